"""``irqlab trend SERIES --metric p99.9``: one metric of runs over time, and the runs at
which it changed (E-divisive means: irqlab.stats.changepoint; the series and its lines:
irqlab.reports.trend, which `irqlab serve`'s trends page shows too)."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from irqlab.cli.common import EXIT_OK, UsageError, add_db_json, count, db_path
from irqlab.cli.safe_text import printable
from irqlab.durations import format_latency
from irqlab.stats.fields import LATENCY_FIELDS

if TYPE_CHECKING:       # reports.trend imports numpy: run() imports it (design.md "Start-up")
    from irqlab.reports.trend import Trend

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
    if args.json:
        from irqlab.cli.render import json_line

        for line in trend.lines():
            print(json_line(line))
    else:
        for text in human_lines(trend):
            print(printable(text, False))
    return EXIT_OK


def human_lines(trend: Trend) -> list[str]:
    """One line per run (date, run, value; change points marked), then one per change."""
    label = trend.metric.label
    scale = "log scale" if trend.log_scale else "linear scale: a value is 0"
    order = f"tag {trend.by_tag}, then start time" if trend.by_tag else "start time"
    out = [f"{label} of {len(trend.points)} runs ({' '.join(trend.selectors)}) by {order}; "
           f"change points: E-divisive means, p <= {trend.p_max:g}, "
           f"{trend.permutations} permutations, >= {trend.min_size} runs a segment, {scale}"]
    width = max(len(str(p.run_id)) for p in trend.points)
    tag_width = max(len(p.tag_value or "") for p in trend.points)
    for i, p in enumerate(trend.points):
        mark = "*" if i in trend.starts else " "
        status = "" if p.status == "ok" else f" ({p.status})"
        tag = f"{trend.by_tag}={p.tag_value:<{tag_width}}  " if trend.by_tag else ""
        out.append(f"{mark} {p.started_at:%Y-%m-%d %H:%M:%S}  #{p.run_id:<{width}}  {tag}"
                   f"{format_latency(_ns(p.value_ns)):>10}  {p.name}{status}"
                   + ("   <- change point" if mark == "*" else ""))
    if trend.skipped:
        why = f"no {label} in the summary" + (f" or no tag {trend.by_tag}"
                                               if trend.by_tag else "")
        out.append(f"({why}: run(s) {', '.join(f'#{p.run_id}' for p in trend.skipped)} "
                   f"left out)")
    for c in trend.change_points:
        p = trend.points[c.index]
        ratio = "—" if math.isnan(c.ratio) else f"x{c.ratio:.3g}"
        out.append(f"change at run #{p.run_id} {p.name} ({p.started_at:%Y-%m-%d %H:%M:%S}): "
                   f"{label} {format_latency(_ns(c.mean_before))} -> "
                   f"{format_latency(_ns(c.mean_after))} "
                   f"({ratio}, segment means), p = {c.p_value:.3g}")
    ex = trend.exchangeability
    if ex is not None and ex.step_within_drift:
        out.append(f"drift: no verdict — the largest step is within what the runs' drift "
                   f"explains (lag-1 autocorrelation {ex.lag1:.2f}); measure more runs or "
                   f"steady the host")
    elif ex is not None and ex.drift:
        out.append(f"drift: no verdict — the runs drift (lag-1 autocorrelation "
                   f"{ex.lag1:.2f} > {ex.bound:.2f}): too few blocks of {ex.block_len} "
                   f"runs to test a change; measure more runs or steady the host")
    elif not trend.change_points:
        out.append(f"no change point with p <= {trend.p_max:g} in {len(trend.points)} runs")
    if ex is not None and ex.block_len > 1 and not ex.drift:
        out.append(f"runs autocorrelated (lag-1 {ex.lag1:.2f} > {ex.bound:.2f}): tested "
                   f"by permuting blocks of {ex.block_len} runs")
    return out


def _ns(value: float | None) -> int | None:
    """A figure to the ns, as the JSON has means (format_latency prints ns as given: a
    float, e.g. a segment mean, would show all its digits)."""
    return None if value is None else round(value)
