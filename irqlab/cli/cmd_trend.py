"""``irqlab trend SERIES --metric p99.9``: one metric of runs over time, and the runs at
which it changed (E-divisive means: irqlab.stats.changepoint; the series and its lines:
irqlab.reports.trend, which `irqlab serve`'s trends page shows too)."""

from __future__ import annotations

import argparse
import math

from irqlab.cli.common import EXIT_OK, UsageError, add_db_json, count, db_path
from irqlab.cli.output import json_or_text, show
from irqlab.stats.fields import LATENCY_FIELDS

HELP = "find the runs at which a metric of a series changed (change points)"
# Defaults of irqlab.stats.changepoint, repeated here so the parser imports no numpy
# (tests/cli/test_trend.py holds them equal).
P_MAX, PERMUTATIONS, MIN_SIZE = 0.01, 199, 5


def _p_max(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is no p-value: write a number between "
                                         f"0 and 1, e.g. 0.05")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    metrics = ", ".join(f.label.replace(" ", "-") for f in LATENCY_FIELDS)
    p = sub.add_parser("trend", help=HELP,
                       description="One value per run (the stored summary's, as `irqlab "
                                   "show --json` prints it) in time order, and the runs at "
                                   "which the series changed: E-divisive means (Matteson & "
                                   "James, JASA 2014) on the log of the values, each change "
                                   "point with its permutation-test p-value.")
    p.add_argument("runs", nargs="+", metavar="SERIES",
                   help="series:ID, tag:KEY=VALUE, suite:NAME, run ids or names (as in "
                        "compare); their runs together, ordered by start time")
    p.add_argument("--metric", default="p99.9", metavar="METRIC",
                   help=f"the summary figure to follow: {metrics} (default p99.9)")
    p.add_argument("--by", default=None, metavar="KEY",
                   help="order the runs by their tag KEY (natural order: kernel 6.1 < 6.6 "
                        "< 6.10), then start time, instead of by start time; runs without "
                        "the tag are left out")
    p.add_argument("--p-max", type=_p_max, default=P_MAX, metavar="P",
                   help=f"largest p-value of a change point (default {P_MAX})")
    p.add_argument("--permutations", type=count, default=PERMUTATIONS, metavar="N",
                   help=f"permutations of each significance test (default {PERMUTATIONS}; "
                        f"the smallest p-value is 1/(N+1))")
    p.add_argument("--min-size", type=count, default=MIN_SIZE, metavar="N",
                   help=f"fewest runs between two change points (default {MIN_SIZE}, at "
                        f"least 2)")
    p.add_argument("--seed", type=count, default=0,
                   help="seed of the permutations (same seed, same answer)")
    add_db_json(p)


def run(args: argparse.Namespace) -> int:
    from irqlab.reports.trend import TrendError, build_trend
    from irqlab.store import open_store

    if args.min_size < 2:
        raise UsageError("--min-size must be at least 2 (a segment of one run has no "
                         "spread to compare)")
    if args.permutations < 1:
        raise UsageError("--permutations must be at least 1, e.g. 199")
    with open_store(db_path(args), read_only=True) as store:
        try:
            trend = build_trend(store, args.runs, args.metric, p_max=args.p_max,
                                permutations=args.permutations, min_size=args.min_size,
                                seed=args.seed, by_tag=args.by)
        except TrendError as exc:
            raise UsageError(str(exc)) from None
    show({"type": "trend_result", "trend": trend}, json_or_text(args))
    return EXIT_OK
