"""``irqlab bench``: performance figures (a benchmark, never a test)."""

from __future__ import annotations

import argparse
from pathlib import Path

from irqlab.argtypes import count_in, run_length
from irqlab.cli.common import EXIT_OK, count, duration
from irqlab.cli.output import json_or_text, show

NAME = "bench"
# Sizes of a benchmark's synthetic input: at least one (0 divided by 0, or measured
# nothing and printed a ratio); at most what fits a machine's memory many times over.
at_least_one = count_in(1, 10**12, "a benchmark needs something to measure")


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="print performance figures (a benchmark, not a test)")
    from irqlab.bench import BENCHES, DEFAULT_BENCHES
    from irqlab.targets import TARGETS

    # metavar keeps the usage line short enough for man(1) to set; the names are in help.
    b.add_argument("what", nargs="*", choices=[*BENCHES, []], metavar="BENCH",
                   default=[], help=f"which figures, of {', '.join(BENCHES)} (default: "
                                    f"{' '.join(DEFAULT_BENCHES)}; cyclictest and net only "
                                    "when named: they run rounds x 2 (net: 3) x "
                                    "--round-duration; noise: pairs x 2 x K runs)")
    b.add_argument("--rounds", type=count, default=5, metavar="N",
                   help="cyclictest, net, startup, report: rounds of (ours, the "
                        "baseline) (default 5)")
    b.add_argument("--round-duration", type=duration, default=10_000_000_000, metavar="DUR",
                   help="cyclictest, net: length of each side of a round (default 10s)")
    b.add_argument("--bench-cpu", type=count, default=None, metavar="CPU",
                   help="cyclictest: the CPU both run on (default the highest allowed)")
    b.add_argument("--stats-samples", type=at_least_one, default=100_000_000, metavar="N")
    b.add_argument("--trace-bytes", type=count, default=1 << 30, metavar="BYTES",
                   help="trace: raw ring data to synthesise from a real capture "
                        "(default 1 GiB; only when `trace` is named: needs root)")
    b.add_argument("--trace-rounds", type=at_least_one, default=3, metavar="N",
                   help="trace: rounds of ours on the same input; the median is compared "
                        "(the first, which pays for fresh memory, is shown too; default 3)")
    b.add_argument("--lab-samples", type=at_least_one, default=10_000_000, metavar="N",
                   help="push, export: samples of the synthetic run (default 10 M; only "
                        "when named; push starts a throw-away PostgreSQL server)")
    b.add_argument("--import-lines", type=at_least_one, default=10_000_000, metavar="N",
                   help="import: lines of the generated raw-sample log (default 10 M)")
    b.add_argument("--compare-samples", type=at_least_one, default=10_000_000, metavar="N",
                   help="compare, report: samples of each of the two runs (default 10 M; "
                        "compare's in-memory baseline runs only up to 30 M)")
    b.add_argument("--xentrace-minutes", type=float, default=10.0, metavar="MIN",
                   help="xentrace: trace time of the input, a real TCG capture laid end to "
                        "end (default 10)")
    b.add_argument("--xentrace-file", type=Path, default=None, metavar="FILE",
                   help="xentrace: the capture to lay end to end (default the fixture "
                        "recorded under TCG, tests/fixtures/xen)")
    b.add_argument("--pairs", type=count, default=80, metavar="N",
                   help="noise: A/A and A/B pairs, each of two groups of runs (default 80: "
                        "0 of 73 or more is what shows a rate <= 5 %%)")
    b.add_argument("--runs-per-side", type=count, default=3, metavar="K",
                   help="noise: runs in each group of a pair (default 3; 1 = single runs, "
                        "which are always `unknown`)")
    b.add_argument("--max-repeat", type=count, default=0, metavar="N",
                   help="noise: also replay --repeat auto on N runs a side measured for "
                        "each pair (default 0: not replayed)")
    b.add_argument("--duration", type=run_length, default=500_000_000, metavar="DUR",
                   help="noise: length of each run; a bare number is seconds, as in "
                        "`irqlab run -D` (default 500ms)")
    b.add_argument("--shift", type=_shift, default=1.30, metavar="FACTOR",
                   help="noise: A/B multiplies B's latencies by this (default 1.30)")
    b.add_argument("--period", type=duration, default=100_000, metavar="DUR",
                   help="noise: probe period of each run (default 100us)")
    b.add_argument("--b-period", type=duration, default=None, metavar="DUR",
                   help="noise: also a real A/B: each pair measures a third series at "
                        "this period (a configuration that differs), judged against A")
    # The targets declare which suit it (Target.noise_bench); the default is the one
    # quickest to start.
    noise_targets = [t for t in TARGETS.values() if t.noise_bench]
    b.add_argument("--target", choices=[t.name for t in noise_targets],
                   default=min(noise_targets, key=lambda t: t.boot_estimate_s).name,
                   help="noise: what the runs measure, a target cheap enough for hundreds "
                        "of runs (default %(default)s)")
    b.add_argument("--serve-runs", type=count, default=100_000, metavar="N",
                   help="serve: runs in the store the runs page is served from (default "
                        "100,000)")
    b.add_argument("--json", action="store_true", help="print JSON lines")


def _shift(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1.0 < value < 100.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a factor above 1, e.g. 1.10")
    return value


def run(args: argparse.Namespace) -> int:
    from irqlab.bench import DEFAULT_BENCHES, run_benchmarks

    opts = {"stats": {"n": args.stats_samples},
            "cyclictest": {"rounds": max(1, args.rounds),
                           "duration_s": args.round_duration / 1e9,
                           "cpu": args.bench_cpu},
            "trace": {"target_bytes": args.trace_bytes, "rounds": max(1, args.trace_rounds)},
            "lab": {"samples": max(1, args.lab_samples)},
            "import": {"lines": max(1, args.import_lines)},
            "compare": {"samples": max(1, args.compare_samples)},
            "report": {"samples": max(1, args.compare_samples), "rounds": max(1, args.rounds)},
            "xentrace": {"minutes": args.xentrace_minutes, "rounds": max(1, args.rounds // 2),
                         "source": args.xentrace_file},
            "net": {"rounds": max(1, args.rounds), "duration_s": args.round_duration / 1e9},
            "noise": {"pairs": max(1, args.pairs), "runs_per_side": max(1, args.runs_per_side),
                      "duration_ns": args.duration, "period_ns": args.period,
                      "target": args.target, "shift": args.shift,
                      "b_period_ns": args.b_period, "max_repeat": args.max_repeat},
            "startup": {"rounds": max(1, args.rounds)},
            "serve": {"runs": max(2, args.serve_runs), "rounds": max(1, args.rounds)}}
    figures = run_benchmarks(args.what or list(DEFAULT_BENCHES), opts)
    show({"type": "bench_figures", "figures": figures}, json_or_text(args))
    return EXIT_OK
