"""``irqlab tail RUN|series:NAME [--at LAT,...]``: how often a latency beyond the data
would occur, with 95 % intervals, from an extreme-value fit of the measured tail and its
validity checks (irqlab.stats.evt; the model: irqlab.reports.tail)."""

from __future__ import annotations

import argparse
import math

from irqlab.cli.common import EXIT_FAIL, EXIT_OK, UsageError, add_db_json, db_path, duration
from irqlab.cli.output import json_or_text, show

HELP = ("how often a latency beyond the data would occur: an extreme-value fit of the "
        "tail with its checks (pWCET)")


def _latencies(text: str) -> list[int]:
    """--at: one or more latencies, comma separated (10ms,20ms)."""
    out = []
    for part in text.split(","):
        try:
            out.append(duration(part.strip()))
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"--at {part.strip()!r}: {exc}") from None
    if not out or any(v <= 0 for v in out):
        raise argparse.ArgumentTypeError("--at takes latencies above 0, e.g. 500us,1ms")
    return out


def _width(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 1 < value <= 1e6:
        raise argparse.ArgumentTypeError(f"{text!r} is no interval width: a factor above "
                                         f"1 (high / low), e.g. 10")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tail", help=HELP,
                       description="Peaks over a threshold with a generalised Pareto tail "
                                   "(measurement-based probabilistic timing analysis: "
                                   "Cucu-Grosjean et al. 2012, MBPTA-CV, Abella et al. "
                                   "2017): the per-sample probability of exceeding each "
                                   "--at latency with its 95 %% interval, the pWCET at "
                                   "1e-6 and 1e-9 per sample and per hour at the run's "
                                   "rate, and the independence, identical-distribution and "
                                   "goodness-of-fit checks, each with its p-value. Exit 1 "
                                   "when a check fails (the fit is refused).")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run id, name, series:NAME or tag:KEY=VALUE (several runs: their "
                        "samples together, run after run)")
    p.add_argument("--at", type=_latencies, default=None, metavar="LAT,...",
                   help="latencies to give the exceedance probability of (default: the "
                        "data's maximum and twice it)")
    p.add_argument("--width", type=_width, default=10.0, metavar="FACTOR",
                   help="interval width (high / low) whose sample count is estimated for "
                        "each --at (default 10)")
    p.add_argument("--split-check", action="store_true",
                   help="also fit the first half alone and count how many samples of the "
                        "second half exceed its p99.99 against the predicted interval "
                        "(an out-of-sample check of the fit)")
    add_db_json(p)


def run(args: argparse.Namespace) -> int:
    from irqlab.reports.data import load_runs
    from irqlab.reports.select import select_runs
    from irqlab.reports.tail import build_tail
    from irqlab.store import open_store

    with open_store(db_path(args), read_only=True) as store:
        runs = load_runs(store, select_runs(store, args.runs, series_names=True))
        if not all(r.has_raw for r in runs):
            raw = [r.label for r in runs if not r.has_raw]
            raise UsageError(f"{', '.join(raw)} kept no raw samples: a tail fit needs "
                             f"them (runs imported from summaries have none)")
        model = build_tail(runs, args.at, args.width)
        if args.split_check:
            from irqlab.reports.tail import split_check
            model["split_check"] = split_check(runs)
    show(model, json_or_text(args))
    return EXIT_FAIL if model["refused"] else EXIT_OK
