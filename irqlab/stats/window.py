"""Fixed-length windows of guest time, emitted as they complete.

A sample belongs to window (deadline_tick - first_deadline_tick) // window_tick, where
first_deadline_tick is the deadline of the very first sample. Windows are keyed by the
programmed deadline (guest time), not by host arrival time, so a window's content does
not depend on how the host batched its reads. Gaps (e.g. the guest was descheduled
for longer than a window) are emitted as windows with samples=0 so they stay visible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .exact import as_tick_array, exact_sum, exact_sum_squares
from .moments import Moments

_LIMIT = 1 << 63


@dataclass(slots=True)
class WindowStats:
    """Statistics of one window; latency fields in ticks, None when samples == 0.

    mean/stddev are population statistics (ddof = 0). above_threshold counts samples
    with latency_tick > threshold_tick (strictly). global_min/max_tick are running
    extremes over all samples up to and including this window.
    Not frozen: a frozen dataclass costs ~0.7 us more per window on the hot path;
    treat instances as read-only.
    """

    index: int
    start_s: float
    samples: int
    mean_tick: float | None
    stddev_tick: float | None
    min_tick: int | None
    max_tick: int | None
    above_threshold: int
    global_min_tick: int | None
    global_max_tick: int | None


class Windower:
    """Assigns samples to windows and emits each window once a later one starts.

    Samples must arrive in non-decreasing window order (deadlines are programmed in
    sequence, so they do); a sample for an already emitted window raises ValueError.
    """

    def __init__(self, tick_hz: int, window_tick: int, threshold_tick: int) -> None:
        if tick_hz <= 0 or window_tick <= 0:
            raise ValueError("tick_hz and window_tick must be positive")
        self.tick_hz = int(tick_hz)
        self.window_tick = int(window_tick)
        self.threshold_tick = int(threshold_tick)
        self.first_deadline_tick: int | None = None
        self.totals = Moments()                # all samples so far, exact
        # The window collecting samples now: index, count, sum, sum of squares, ...
        self._open_index: int | None = None
        self._n = self._s1 = self._s2 = self._above = 0
        self._min = self._max = 0
        self._global_min: int | None = None
        self._global_max: int | None = None
        self._finished = False

    def add(self, deadline_tick: np.ndarray, latency_tick: np.ndarray) -> list[WindowStats]:
        """Add a batch of samples; returns the windows this batch completed, in order."""
        if self._finished:
            raise RuntimeError("Windower.add after flush")
        deadlines = as_tick_array(deadline_tick, "deadline_tick")
        latencies = as_tick_array(latency_tick, "latency_tick")
        if deadlines.shape != latencies.shape:
            raise ValueError(f"deadline_tick and latency_tick differ in length: "
                             f"{deadlines.size} != {latencies.size}")
        n = deadlines.size
        if n == 0:
            return []
        if self.first_deadline_tick is None:
            self.first_deadline_tick = int(deadlines[0])
        index = (deadlines - self.first_deadline_tick) // self.window_tick

        # Segments of equal window index: boundaries where the index changes.
        starts = np.flatnonzero(index[1:] != index[:-1]) + 1
        starts = np.concatenate(([0], starts))
        seg_index = index[starts]
        if (np.diff(seg_index) < 0).any() or (
                self._open_index is not None and int(seg_index[0]) < self._open_index):
            raise ValueError("samples out of window order (deadline went backwards)")
        if int(seg_index[0]) < 0:
            raise ValueError("deadline before the first sample's deadline")

        seg_count = np.diff(np.append(starts, n))
        seg_min = np.minimum.reduceat(latencies, starts)
        seg_max = np.maximum.reduceat(latencies, starts)
        seg_above = np.add.reduceat(latencies > self.threshold_tick, starts, dtype=np.int64)
        seg_sum, seg_sq = self._segment_sums(latencies, starts, seg_count,
                                             int(seg_min.min()), int(seg_max.max()))

        # Per window: O(1) Python work on pre-reduced segment sums (a window holds
        # ~1000 samples, so this loop costs a few ns per sample).
        out: list[WindowStats] = []
        for w, cnt, s1, s2, lo, hi, above in zip(
                seg_index.tolist(), seg_count.tolist(), seg_sum, seg_sq,
                seg_min.tolist(), seg_max.tolist(), seg_above.tolist()):
            if w != self._open_index:
                if self._open_index is not None:
                    out.append(self._close())
                    # Windows with no sample at all between the closed and the new one.
                    for gap in range(self._open_index + 1, w):
                        out.append(self._empty(gap))
                self._open_index = w
                self._n, self._s1, self._s2 = cnt, s1, s2
                self._min, self._max, self._above = lo, hi, above
            else:
                self._n += cnt
                self._s1 += s1
                self._s2 += s2
                self._min = min(self._min, lo)
                self._max = max(self._max, hi)
                self._above += above
        self.totals.add_summary(n, sum(seg_sum), sum(seg_sq), int(seg_min.min()),
                                int(seg_max.max()))
        return out

    def _segment_sums(self, values: np.ndarray, starts: np.ndarray, counts: np.ndarray,
                      lo: int, hi: int) -> tuple[list[int], list[int]]:
        """Exact per-segment sum and sum of squares (Python ints)."""
        bound = max(-lo, hi)
        longest = int(counts.max())
        if bound * longest < _LIMIT:
            sums = np.add.reduceat(values, starts).tolist()
        else:
            sums = [exact_sum(values[s:s + c], bound)
                    for s, c in zip(starts.tolist(), counts.tolist())]
        if bound * bound * longest < _LIMIT:
            sq = np.add.reduceat(values * values, starts).tolist()
        else:
            # Rare: huge spikes in long windows; exact per-window path.
            sq = [exact_sum_squares(values[s:s + c])
                  for s, c in zip(starts.tolist(), counts.tolist())]
        return sums, sq

    def _close(self) -> WindowStats:
        """Build the open window's stats and update the running extremes."""
        n, s1, lo, hi = self._n, self._s1, self._min, self._max
        if self._global_min is None or lo < self._global_min:
            self._global_min = lo
        if self._global_max is None or hi > self._global_max:
            self._global_max = hi
        # Exact population variance, one rounding: see moments.py.
        stddev = math.sqrt((n * self._s2 - s1 * s1) / (n * n))
        index = self._open_index
        return WindowStats(index, index * self.window_tick / self.tick_hz, n, s1 / n, stddev,
                           lo, hi, self._above, self._global_min, self._global_max)

    def _empty(self, index: int) -> WindowStats:
        return WindowStats(index=index, start_s=self._start_s(index), samples=0,
                           mean_tick=None, stddev_tick=None, min_tick=None, max_tick=None,
                           above_threshold=0, global_min_tick=self._global_min,
                           global_max_tick=self._global_max)

    def _start_s(self, index: int) -> float:
        # Seconds of guest time since the first deadline; one correctly rounded division.
        return index * self.window_tick / self.tick_hz
