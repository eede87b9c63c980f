"""A metric of a series of runs over time, and the runs at which it changed.

`irqlab trend SERIES --metric p99.9` and the trends page of `irqlab serve` both build
their figures here: the runs come from the selectors `compare` and `check` take
(irqlab.reports.select), in time order; each run's value is its stored summary's field
(the number `irqlab show --json` prints, irqlab.stats.fields names it); the change points
come from irqlab.stats.changepoint (E-divisive means, Matteson & James 2014).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from irqlab.reports.select import select_runs
from irqlab.stats.changepoint import (DEFAULT_MIN_SIZE, DEFAULT_P_MAX,
                                      DEFAULT_PERMUTATIONS, MAX_VALUES, ChangePoint,
                                      Exchangeability, find_with_exchangeability)
from irqlab.stats.fields import LATENCY_FIELDS, Field

if TYPE_CHECKING:
    from irqlab.store.db import RunRow
    from irqlab.store.interface import RunReader

TREND_VERSION = 1
METHOD = "e-divisive means (Matteson & James 2014), alpha 1, permutation test"


class TrendError(ValueError):
    """A trend that cannot be made: the message names the problem and the fix."""


def metric_names() -> list[str]:
    """The metrics a trend takes, as people write them (p99.9, max, warm-max ...)."""
    return [f.label.replace(" ", "-") for f in LATENCY_FIELDS]


def metric_field(name: str) -> Field:
    """The summary field ``name`` stands for: a latency label as the tables show it
    (``p99.9``, ``warm max`` or ``warm-max``) or its summary key (``p999_ns``)."""
    wanted = name.strip().lower().replace("-", " ")
    for f in LATENCY_FIELDS:
        if wanted in (f.label, f.key):
            return f
    raise TrendError(f"unknown metric {name!r}: choose one of {', '.join(metric_names())}")


@dataclass(frozen=True)
class TrendPoint:
    """One run of the series: its stored summary's value of the metric (None: none)."""

    run_id: int
    name: str
    started_at: dt.datetime
    status: str
    value_ns: float | None
    tag_value: str | None = None      # the run's value of the --by tag (None: not asked)


@dataclass(frozen=True)
class Trend:
    metric: Field
    selectors: tuple[str, ...]
    points: list[TrendPoint]          # the runs with a value, in time order
    skipped: list[TrendPoint]         # selected runs whose summary has no such value
    change_points: list[ChangePoint]  # index: into points
    log_scale: bool
    p_max: float
    permutations: int
    min_size: int
    seed: int
    starts: set[int] = field(default_factory=set)   # points[i] first after a change
    by_tag: str | None = None         # ordered by this tag's value (None: by start time)
    exchangeability: Exchangeability | None = None  # of the runs, at the last test

    def lines(self) -> list[dict[str, Any]]:
        """The JSON lines (docs/formats.md section 4, types trend, trend_run,
        trend_change): one trend, one trend_run per run, one trend_change per change."""
        head = {"type": "trend", "version": TREND_VERSION, "metric": self.metric.label,
                "key": self.metric.key, "selectors": list(self.selectors),
                "runs": len(self.points), "skipped_run_ids": [p.run_id for p in self.skipped],
                "method": METHOD, "scale": "log" if self.log_scale else "linear",
                "p_max": self.p_max, "permutations": self.permutations,
                "min_size": self.min_size, "seed": self.seed,
                "change_points": len(self.change_points),
                "order": f"tag:{self.by_tag}" if self.by_tag else "started_at"}
        ex = self.exchangeability
        if ex is not None:
            # Issue 45: runs that drift are not exchangeable; blocks of runs were
            # permuted, or with too few blocks there is no verdict.
            head.update(lag1_autocorrelation=ex.lag1, block_len=ex.block_len,
                        drift=ex.drift, step_within_drift=ex.step_within_drift)
        runs = [{"type": "trend_run", "version": TREND_VERSION, "index": i,
                 "run_id": p.run_id, "name": p.name, "started_at": p.started_at.isoformat(),
                 "status": p.status, "value_ns": p.value_ns, "change_point": i in self.starts,
                 "tag_value": p.tag_value}
                for i, p in enumerate(self.points)]
        return [head, *runs, *(self.change_line(c) for c in self.change_points)]

    def change_line(self, c: ChangePoint) -> dict[str, Any]:
        after, before = self.points[c.index], self.points[c.index - 1]
        return {"type": "trend_change", "version": TREND_VERSION, "index": c.index,
                "run_id": after.run_id, "name": after.name,
                "started_at": after.started_at.isoformat(), "before_run_id": before.run_id,
                # Means of the segments either side, to the ns (latencies are integer ns).
                "p_value": c.p_value, "mean_before_ns": round(c.mean_before),
                "mean_after_ns": round(c.mean_after),
                "ratio": None if math.isnan(c.ratio) else c.ratio}


def series_points(store: RunReader, selectors: list[str], metric: Field,
                  by_tag: str | None = None) -> tuple[list[TrendPoint], list[TrendPoint]]:
    """The selected runs in time order (start, then run id), or with ``by_tag`` in the
    natural order of that tag's values (kernel 6.1 < 6.6 < 6.10), then time; split into
    those used and those left out: no value of the metric in the stored summary (no
    summary yet, an import whose source gave no such figure) or no such tag."""
    rows = sorted(select_runs(store, selectors), key=lambda r: (r.started_at, r.run_id))
    points = [_point(r, metric, by_tag) for r in rows]
    if by_tag is not None:
        # sorted() is stable: runs of one tag value stay in time order.
        points.sort(key=lambda p: _natural(p.tag_value or ""))
    used = [p for p in points if p.value_ns is not None
            and (by_tag is None or p.tag_value is not None)]
    kept = {p.run_id for p in used}
    return used, [p for p in points if p.run_id not in kept]


def _point(row: RunRow, metric: Field, by_tag: str | None) -> TrendPoint:
    # As stored (integer ns for every latency of a measured run), as `show --json` has it.
    return TrendPoint(row.run_id, row.name, row.started_at, row.status,
                      (row.summary or {}).get(metric.key),
                      None if by_tag is None else row.tags.get(by_tag))


def _natural(text: str) -> tuple[str | int, ...]:
    """Sort key: runs of digits compare as numbers ("6.10" after "6.9"). re.split with
    a group puts text at even and digits at odd places, so two keys never compare a
    number with a text."""
    return tuple(int(part) if i % 2 else part
                 for i, part in enumerate(re.split(r"(\d+)", text)))


def build_trend(store: RunReader, selectors: list[str], metric: str, *,
                p_max: float = DEFAULT_P_MAX, permutations: int = DEFAULT_PERMUTATIONS,
                min_size: int = DEFAULT_MIN_SIZE, seed: int = 0,
                by_tag: str | None = None) -> Trend:
    """The trend of ``metric`` over the runs ``selectors`` name, with its change points;
    ordered by start time, or with ``by_tag`` by that tag's values (series_points).

    TrendError when it cannot be made (unknown metric, too few runs with the metric);
    StoreError (irqlab.store) when a selector names no run."""
    f = metric_field(metric)
    points, skipped = series_points(store, selectors, f, by_tag)
    need = 2 * min_size
    if len(points) < need:
        what = f"a {f.label} value" + (f" and tag {by_tag}" if by_tag else "")
        raise TrendError(
            f"{len(points)} runs with {what} in {' '.join(selectors)}: no change "
            f"can be found with fewer than {need} runs (two segments of at least "
            f"{min_size}); select more runs or pass a smaller --min-size")
    if len(points) > MAX_VALUES:
        raise TrendError(f"{len(points)} runs: a trend takes at most {MAX_VALUES}; select "
                         f"fewer (e.g. by tag:KEY=VALUE)")
    values = [p.value_ns for p in points if p.value_ns is not None]   # all of them
    # The log scale (irqlab.stats.changepoint) needs values > 0; a min of 0 ns has none.
    log_scale = all(v > 0 for v in values)
    found, exch = find_with_exchangeability(values, p_max=p_max, permutations=permutations,
                                            min_size=min_size, seed=seed, log=log_scale)
    return Trend(f, tuple(selectors), points, skipped, found, log_scale, p_max,
                 permutations, min_size, seed, {c.index for c in found}, by_tag, exch)
