"""Whole-run statistics: windows, exact moments and a log histogram for percentiles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fields import PERCENTILE_FIELDS
from .histogram import LogHistogram
from .moments import Moments
from .native import reduce_batch
from .segments import Segments, reduce_segments
from .window import WindowStats, Windower

# (summary field, quantile) pairs; quantiles as exact decimals, see quantile_rank.
# (RunSummary attribute, quantile) of every percentile the summary reports: the catalog's.
PERCENTILES: tuple[tuple[str, float], ...] = tuple(
    (f.tick_attr, f.quantile) for f in PERCENTILE_FIELDS if f.quantile is not None)


@dataclass(frozen=True)
class RunSummary:
    """Summary of a whole run, in ticks; latency fields are None when samples == 0.

    min/max/mean/stddev are exact (population stddev, ddof = 0). Percentiles come from
    `histogram` (nearest rank, never under-reported, relative error < 1/128);
    `saturated_percentiles` names the p*_tick fields whose rank fell in the histogram's
    underflow (value = exact min) or overflow (value = exact max) bucket.
    warm_max_tick is the max over windows with index >= warmup_windows; the warm-up
    never takes the last window, so a run of at most warmup_windows windows (a one-window
    run) has its last window's max (docs/formats.md section 4, issue 32).
    invalid counts the samples whose latency was below the valid minimum (entry before
    deadline): they are in no other field, `samples` included.
    """

    samples: int
    min_tick: int | None
    mean_tick: float | None
    stddev_tick: float | None
    max_tick: int | None
    warm_max_tick: int | None
    p50_tick: int | None
    p90_tick: int | None
    p99_tick: int | None
    p999_tick: int | None
    p9999_tick: int | None
    above_threshold: int
    histogram: LogHistogram
    saturated_percentiles: tuple[str, ...] = ()
    invalid: int = 0


class RunStats:
    """Streaming statistics of one run; feed batches with `add`, end with `finish`.

    A latency below `valid_min` (default 0: an ISR entered before its deadline, which
    no working timer does) is counted `invalid`, never as a latency."""

    def __init__(self, tick_hz: int, threshold_tick: int, window_tick: int,
                 warmup_windows: int, valid_min: int | None = 0) -> None:
        if warmup_windows < 0:
            raise ValueError(f"warmup_windows must be >= 0, got {warmup_windows}")
        self.tick_hz = int(tick_hz)
        self.threshold_tick = int(threshold_tick)
        self.window_tick = int(window_tick)
        self.warmup_windows = int(warmup_windows)
        self.valid_min = valid_min
        self._windower = Windower(tick_hz, window_tick, threshold_tick, valid_min)
        self._histogram = LogHistogram()
        # Exact whole-run moments are accumulated by the windower from the per-window
        # sums it already computes, saving a pass over every batch.
        self._moments: Moments = self._windower.totals
        self._above = 0
        self._invalid = 0
        self._warm_max: int | None = None
        self._last_window: tuple[int, int] | None = None    # (index, max)
        self._summary: RunSummary | None = None

    def add(self, deadline_tick: np.ndarray, latency_tick: np.ndarray) -> list[WindowStats]:
        """Add a batch of samples; returns the windows it completed."""
        if self._summary is not None:
            raise RuntimeError("RunStats.add after finish")
        # Windower first: it validates shapes and ordering before anything is counted.
        deadlines, latencies, origin = self._windower.check(deadline_tick, latency_tick)
        if latencies.size == 0:
            return []
        # The C fast path reduces windows and tallies the histogram in one pass.
        fused = reduce_batch(deadlines, latencies, origin, self.window_tick,
                             self.threshold_tick, self._histogram.layout, self.valid_min)
        if fused is None:
            seg = reduce_segments(deadlines, latencies, origin, self.window_tick,
                                  self.threshold_tick, self.valid_min)
            windows = self._windower.add_segments(seg, origin)
            if seg.invalid.any():
                assert self.valid_min is not None
                latencies = latencies[latencies >= self.valid_min]
            self._histogram.add(latencies)
        else:
            seg, tally = fused
            assert tally is not None
            windows = self._windower.add_segments(seg, origin)
            self._histogram.add_tally(tally, seg)
        self._absorb(seg)
        return windows

    def finish(self) -> tuple[list[WindowStats], RunSummary]:
        """End the run: returns the last window(s) and the run summary."""
        if self._summary is not None:
            raise RuntimeError("RunStats.finish called twice")
        windows = self._windower.flush()
        self._summary = self._summarize()
        return windows, self._summary

    def summary(self) -> RunSummary:
        """The summary built by `finish` (RuntimeError before it)."""
        if self._summary is None:
            raise RuntimeError("RunStats.summary before finish")
        return self._summary

    def _absorb(self, seg: Segments) -> None:
        # Threshold count and warm max come from the batch's window reductions: every
        # sample is in exactly one of them, so this is exact and costs nothing per sample.
        self._above += int(seg.above.sum())
        self._invalid += int(seg.invalid.sum())
        # A window of invalid samples only has no max (seg.max is INT64_MIN there).
        warm = (seg.index >= self.warmup_windows) & (seg.count > 0)
        if warm.any():
            top = int(seg.max[warm].max())
            if self._warm_max is None or top > self._warm_max:
                self._warm_max = top
        # The last window's max so far (a window may span batches: several segments).
        filled = seg.count > 0
        if filled.any():
            last = int(seg.index[filled].max())
            top = int(seg.max[filled & (seg.index == last)].max())
            if self._last_window is None or last > self._last_window[0]:
                self._last_window = (last, top)
            elif last == self._last_window[0]:
                self._last_window = (last, max(top, self._last_window[1]))

    def _summarize(self) -> RunSummary:
        m, h = self._moments, self._histogram
        values: dict[str, int | None] = {}
        saturated = []
        for name, q in PERCENTILES:
            detail = h.quantile_detail(q)
            values[name] = None if detail is None else detail.value
            if detail is not None and detail.saturated:
                saturated.append(name)
        return RunSummary(samples=m.count, min_tick=m.min, mean_tick=m.mean,
                          stddev_tick=m.stddev, max_tick=m.max,
                          warm_max_tick=self._warm_max if self._warm_max is not None
                          else (self._last_window[1] if self._last_window else None),
                          above_threshold=self._above, histogram=h,
                          saturated_percentiles=tuple(saturated), invalid=self._invalid,
                          **values)
