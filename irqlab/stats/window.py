"""Fixed-length windows of guest time, emitted as they complete.

A sample belongs to window (deadline_tick - first_deadline_tick) // window_tick, where
first_deadline_tick is the deadline of the very first sample. Windows are keyed by the
programmed deadline (guest time), not by host arrival time, so a window's content does
not depend on how the host batched its reads. Gaps (e.g. the guest was descheduled
for longer than a window) are emitted as windows with samples=0 so they stay visible.

With a valid minimum (a run's is 0: an ISR cannot be entered before its deadline), a
latency below it is no latency: the window counts it in `invalid` and leaves it out of
`samples` and every latency figure (issue 27: a miscalibrated timer fired early).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import native
from .exact import as_tick_array
from .moments import Moments
from .segments import Segments, mean_stddev, reduce_segments

# The extremes of a window with no valid sample yet (as stats.c and segments.py give).
_NO_MIN = int(np.iinfo(np.int64).max)
_NO_MAX = int(np.iinfo(np.int64).min)


@dataclass(slots=True)
class WindowStats:
    """Statistics of one window; latency fields in ticks, None when samples == 0.

    mean/stddev are population statistics (ddof = 0). above_threshold counts samples
    with latency_tick > threshold_tick (strictly). global_min/max_tick are running
    extremes over all samples up to and including this window. start_s is guest time
    since the first deadline: index * window_tick / tick_hz. invalid counts the samples
    below the valid minimum, which no other field includes (so samples may be 0 while
    invalid is not).
    Not frozen (a frozen dataclass costs ~0.7 us more per window on the hot path);
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
    invalid: int = 0


class Windower:
    """Assigns samples to windows and emits each window once a later one starts.

    Samples must arrive in non-decreasing window order (deadlines are programmed in
    sequence, so they do); otherwise `add` raises ValueError and changes nothing.
    A stall of k windows emits k empty windows (one object each).
    """

    def __init__(self, tick_hz: int, window_tick: int, threshold_tick: int,
                 valid_min: int | None = None) -> None:
        if tick_hz <= 0 or window_tick <= 0:
            raise ValueError("tick_hz and window_tick must be positive")
        self.tick_hz = int(tick_hz)
        self.window_tick = int(window_tick)
        self.threshold_tick = int(threshold_tick)
        self.valid_min = valid_min             # None: every latency is valid
        self.first_deadline_tick: int | None = None
        self.totals = Moments()                # every sample added so far, exact
        # The window still collecting samples (never empty once it exists).
        self._open_index: int | None = None
        self._n = self._s1 = self._s2 = self._above = self._invalid = 0
        self._min, self._max = _NO_MIN, _NO_MAX
        self._global_min: int | None = None
        self._global_max: int | None = None
        self._finished = False

    def add(self, deadline_tick: np.ndarray, latency_tick: np.ndarray) -> list[WindowStats]:
        """Add a batch of samples; returns the windows this batch completed, in order."""
        deadlines, latencies, origin = self.check(deadline_tick, latency_tick)
        if deadlines.size == 0:
            return []
        reduced = native.reduce_batch(deadlines, latencies, origin, self.window_tick,
                                      self.threshold_tick, valid_min=self.valid_min)
        seg = (reduce_segments(deadlines, latencies, origin, self.window_tick,
                               self.threshold_tick, self.valid_min)
               if reduced is None else reduced[0])
        return self.add_segments(seg, origin)

    def check(self, deadline_tick: np.ndarray,
              latency_tick: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """A batch as contiguous int64 arrays of equal length, and the window origin
        (the first deadline ever seen) it is reduced against."""
        if self._finished:
            raise RuntimeError("Windower.add after flush")
        deadlines = np.ascontiguousarray(as_tick_array(deadline_tick, "deadline_tick"))
        latencies = np.ascontiguousarray(as_tick_array(latency_tick, "latency_tick"))
        if deadlines.shape != latencies.shape:
            raise ValueError(f"deadline_tick and latency_tick differ in length: "
                             f"{deadlines.size} != {latencies.size}")
        origin = self.first_deadline_tick
        if origin is None:
            origin = int(deadlines[0]) if deadlines.size else 0
        return deadlines, latencies, origin

    def add_segments(self, seg: Segments, origin: int) -> list[WindowStats]:
        """Add a non-empty batch already reduced against `origin` (`check`); returns
        the windows it completed, in order."""
        first_index = int(seg.index[0])
        if self._open_index is not None and first_index < self._open_index:
            raise ValueError("samples out of window order (deadline went backwards)")
        self.first_deadline_tick = origin

        out: list[WindowStats] = []
        k = 0
        if first_index == self._open_index:
            # The batch continues the open window.
            self._merge_open(seg, 0)
            k = 1
        last = seg.index.size - 1
        if k <= last:
            if self._open_index is not None:
                out.append(self._close())
                out.extend(self._gap(self._open_index, int(seg.index[k])))
            self._emit_complete(seg, k, last, out)
            self._open_index = int(seg.index[last])
            self._n = self._s1 = self._s2 = self._above = self._invalid = 0
            self._min, self._max = _NO_MIN, _NO_MAX
            self._merge_open(seg, last)
        # Python-int sums: per-window int64 sums fit, their batch total might not.
        # (A window of invalid samples only has min INT64_MAX: min() skips it.)
        self.totals.add_summary(int(seg.count.sum()), sum(seg.total.tolist()),
                                sum(seg.total_sq.tolist()), int(seg.min.min()),
                                int(seg.max.max()))
        return out

    def flush(self) -> list[WindowStats]:
        """End of stream: emit the final (partial) window if it has samples."""
        if self._finished:
            return []
        self._finished = True
        return [self._close()] if self._open_index is not None else []

    # ---- internals ------------------------------------------------------------

    def _merge_open(self, seg: Segments, k: int) -> None:
        """Fold segment k into the open window's exact accumulators."""
        self._n += int(seg.count[k])
        self._s1 += int(seg.total[k])
        self._s2 += int(seg.total_sq[k])
        self._min = min(self._min, int(seg.min[k]))
        self._max = max(self._max, int(seg.max[k]))
        self._above += int(seg.above[k])
        self._invalid += int(seg.invalid[k])

    def _emit_complete(self, seg: Segments, start: int, stop: int,
                       out: list[WindowStats]) -> None:
        """Emit segments start..stop-1: whole windows, complete within this batch."""
        if start >= stop:
            return
        part = slice(start, stop)
        if not seg.count[part].all():
            # A window of invalid samples only (rare): one at a time, no latency figures.
            for k in range(start, stop):
                if k > start:
                    out.extend(self._gap(int(seg.index[k - 1]), int(seg.index[k])))
                out.append(self._single(seg, k))
            out.extend(self._gap(int(seg.index[stop - 1]), int(seg.index[stop])))
            return
        means, stddevs = mean_stddev(seg.count[part], seg.total[part], seg.total_sq[part])
        # Running extremes: prefix min/max over the batch, seeded with the history.
        gmin = np.minimum.accumulate(seg.min[part])
        gmax = np.maximum.accumulate(seg.max[part])
        if self._global_min is not None:
            np.minimum(gmin, self._global_min, out=gmin)
            np.maximum(gmax, self._global_max, out=gmax)
        index = seg.index[part].tolist()
        window_tick, tick_hz = self.window_tick, self.tick_hz
        columns = (index, [w * window_tick / tick_hz for w in index],
                   seg.count[part].tolist(), means, stddevs, seg.min[part].tolist(),
                   seg.max[part].tolist(), seg.above[part].tolist(), gmin.tolist(),
                   gmax.tolist(), seg.invalid[part].tolist())
        self._global_min, self._global_max = columns[-3][-1], columns[-2][-1]
        if index[-1] - index[0] == len(index) - 1:
            # No empty window in between (the common case): one object per window.
            out.extend(map(WindowStats, *columns))
        else:
            previous = None
            for row in zip(*columns):
                if previous is not None and row[0] > previous[0] + 1:
                    out.extend(self._gap(previous[0], row[0], previous[-3], previous[-2]))
                out.append(WindowStats(*row))
                previous = row
        # Gap between the last complete window and the (new) open one.
        out.extend(self._gap(index[-1], int(seg.index[stop])))

    def _single(self, seg: Segments, k: int) -> WindowStats:
        """Segment k as a whole window (the running extremes updated)."""
        self._open_index = int(seg.index[k])
        self._n = self._s1 = self._s2 = self._above = self._invalid = 0
        self._min, self._max = _NO_MIN, _NO_MAX
        self._merge_open(seg, k)
        return self._close()

    def _close(self) -> WindowStats:
        """Build the open window's stats and update the running extremes."""
        n, s1, lo, hi = self._n, self._s1, self._min, self._max
        index = self._open_index
        assert index is not None
        if n == 0:
            # Invalid samples only: no latency figure, the running extremes unchanged.
            return WindowStats(index, index * self.window_tick / self.tick_hz, 0, None,
                               None, None, None, 0, self._global_min, self._global_max,
                               self._invalid)
        if self._global_min is None or lo < self._global_min:
            self._global_min = lo
        if self._global_max is None or hi > self._global_max:
            self._global_max = hi
        # Exact population variance with one rounding (moments.py); Python int division.
        stddev = math.sqrt((n * self._s2 - s1 * s1) / (n * n))
        return WindowStats(index, index * self.window_tick / self.tick_hz, n, s1 / n, stddev,
                           lo, hi, self._above, self._global_min, self._global_max,
                           self._invalid)

    def _gap(self, after: int, before: int, global_min: int | None = None,
             global_max: int | None = None) -> list[WindowStats]:
        """Empty windows strictly between indices `after` and `before`; their running
        extremes are the given ones (default: the extremes so far)."""
        if global_min is None:
            global_min, global_max = self._global_min, self._global_max
        return [WindowStats(i, i * self.window_tick / self.tick_hz, 0, None, None, None,
                            None, 0, global_min, global_max)
                for i in range(after + 1, before)]
