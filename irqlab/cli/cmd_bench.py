"""``irqlab bench``: performance figures (a benchmark, never a test)."""

from __future__ import annotations

import argparse

from irqlab.cli.common import EXIT_OK, count, renderer

NAME = "bench"


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="print performance figures (a benchmark, not a test)")
    b.add_argument("what", nargs="*", choices=["ingest", "stats", "rate", []],
                   default=[], help="which figures (default: all)")
    b.add_argument("--stats-samples", type=count, default=100_000_000, metavar="N")
    b.add_argument("--json", action="store_true", help="print JSON lines")


def run(args: argparse.Namespace) -> int:
    from irqlab.bench import run_benchmarks

    figures = run_benchmarks(args.what or ["ingest", "stats", "rate"],
                             stats_samples=args.stats_samples)
    renderer(args).bench(figures)
    return EXIT_OK
