"""Per-window reductions of one batch: split it at window boundaries, reduce each piece.

The windower needs, for every window a batch touches, the sample count, exact sum and
sum of squares, min, max and threshold count. All of it is computed with one
np.*.reduceat per statistic over segment start offsets, so the Python-level work is
per window (~1000 samples), never per sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .exact import exact_sum, exact_sum_squares

_LIMIT = 1 << 63
# n * S2 below this keeps n*S2 - S1^2 and n^2 exact in float64 (< 2^53), with a factor
# 2 of margin for the float estimate used in the test itself.
_FLOAT_EXACT = float(1 << 52)
_MAX_FAST_COUNT = 1 << 26  # keeps n^2 < 2^53 too


@dataclass(slots=True)
class Segments:
    """Reductions of the samples of one batch that fall in the same window.

    `index` is strictly increasing. `total`/`total_sq` are int64 arrays when their
    values provably fit, else object arrays of Python ints; both are exact.
    `invalid` counts the samples below the valid minimum (`reduce_segments`), which no
    other field includes: a window of invalid samples only has count 0, min
    INT64_MAX and max INT64_MIN (as the C path, stats.c, writes it).
    """

    index: np.ndarray
    count: np.ndarray
    min: np.ndarray
    max: np.ndarray
    above: np.ndarray
    total: np.ndarray
    total_sq: np.ndarray
    invalid: np.ndarray


def window_span(deadlines: np.ndarray, origin: int, window_tick: int) -> tuple[int, int]:
    """Window indices of a non-empty batch's first and last deadlines (ValueError when
    the batch starts before the origin or ends in an earlier window than it starts)."""
    first = (int(deadlines[0]) - origin) // window_tick
    last = (int(deadlines[-1]) - origin) // window_tick
    if first < 0:
        raise ValueError("deadline before the first sample's deadline")
    if last < first:
        raise ValueError("samples out of window order (deadline went backwards)")
    return first, last


def segment_starts(deadlines: np.ndarray, origin: int,
                   window_tick: int) -> tuple[np.ndarray, np.ndarray]:
    """(start offsets, window indices) of the runs of equal window index in a batch.

    Window index = (deadline - origin) // window_tick. Samples must come in
    non-decreasing window order (ValueError otherwise; within a window any order).
    """
    n = deadlines.size
    first, last = window_span(deadlines, origin, window_tick)
    if last - first <= n:
        # Fast path: binary-search each window's first deadline. "deadline >= edge" is
        # monotonic over the batch whenever windows come in order, so searchsorted is
        # exact for such data; the min/max check below catches any other input.
        edges = origin + np.arange(first + 1, last + 1, dtype=np.int64) * window_tick
        starts = np.concatenate(([0], np.searchsorted(deadlines, edges, side="left")))
        index = np.arange(first, last + 1, dtype=np.int64)
        nonempty = np.diff(starts, append=n) > 0
        starts, index = starts[nonempty], index[nonempty]
        low = origin + index * window_tick
        if ((np.minimum.reduceat(deadlines, starts) < low).any()
                or (np.maximum.reduceat(deadlines, starts) >= low + window_tick).any()):
            raise ValueError("samples out of window order (deadline went backwards)")
        return starts, index
    # A gap longer than the batch (guest stalled): compute each index explicitly.
    per_sample = (deadlines - origin) // window_tick
    starts = np.concatenate(([0], np.flatnonzero(per_sample[1:] != per_sample[:-1]) + 1))
    index = per_sample[starts]
    if (np.diff(index) < 0).any():
        raise ValueError("samples out of window order (deadline went backwards)")
    return starts, index


def reduce_segments(deadlines: np.ndarray, latencies: np.ndarray, origin: int,
                    window_tick: int, threshold_tick: int,
                    valid_min: int | None = None) -> Segments:
    """Split a non-empty batch by window and reduce each part (see `Segments`).

    Latencies below `valid_min` (None: no minimum) are invalid: counted per window in
    `invalid` and left out of every other figure."""
    if valid_min is not None:
        bad = latencies < valid_min
        if bad.any():
            return _reduce_with_invalid(deadlines, latencies, origin, window_tick,
                                        threshold_tick, bad)
    n = latencies.size
    starts, index = segment_starts(deadlines, origin, window_tick)
    count = np.diff(starts, append=n)
    seg_min = np.minimum.reduceat(latencies, starts)
    seg_max = np.maximum.reduceat(latencies, starts)
    # Samples above threshold are rare: locate them instead of reducing a full mask.
    hits = np.flatnonzero(latencies > threshold_tick)
    above = np.bincount(np.searchsorted(starts, hits, side="right") - 1,
                        minlength=starts.size)
    bound = max(-int(seg_min.min()), int(seg_max.max()))
    longest = int(count.max())
    pieces = list(zip(starts.tolist(), count.tolist()))
    if bound * longest < _LIMIT:
        total = np.add.reduceat(latencies, starts)
    else:
        total = np.array([exact_sum(latencies[s:s + c], bound) for s, c in pieces],
                         dtype=object)
    if bound * bound * longest < _LIMIT:
        total_sq = np.add.reduceat(latencies * latencies, starts)
    else:
        # Rare: huge spikes in long windows; exact per-window path.
        total_sq = np.array([exact_sum_squares(latencies[s:s + c]) for s, c in pieces],
                            dtype=object)
    return Segments(index, count, seg_min, seg_max, above, total, total_sq,
                    np.zeros(index.size, dtype=np.int64))


def _reduce_with_invalid(deadlines: np.ndarray, latencies: np.ndarray, origin: int,
                         window_tick: int, threshold_tick: int,
                         bad: np.ndarray) -> Segments:
    """`reduce_segments` of a batch with invalid samples (`bad`): the windows of the
    whole batch, each reduced over its valid samples, with its invalid count."""
    starts, index = segment_starts(deadlines, origin, window_tick)   # checks the order
    of_sample = np.repeat(np.arange(index.size), np.diff(starts, append=latencies.size))
    invalid = np.bincount(of_sample[bad], minlength=index.size).astype(np.int64)
    nseg = index.size
    count = np.zeros(nseg, dtype=np.int64)
    seg_min = np.full(nseg, np.iinfo(np.int64).max, dtype=np.int64)
    seg_max = np.full(nseg, np.iinfo(np.int64).min, dtype=np.int64)
    above = np.zeros(nseg, dtype=np.int64)
    total: np.ndarray = np.zeros(nseg, dtype=np.int64)
    total_sq: np.ndarray = np.zeros(nseg, dtype=np.int64)
    good = ~bad
    if good.any():
        sub = reduce_segments(deadlines[good], latencies[good], origin, window_tick,
                              threshold_tick)
        at = np.searchsorted(index, sub.index)
        count[at], seg_min[at], seg_max[at], above[at] = (sub.count, sub.min, sub.max,
                                                          sub.above)
        if sub.total.dtype == object:
            total = total.astype(object)
        if sub.total_sq.dtype == object:
            total_sq = total_sq.astype(object)
        total[at], total_sq[at] = sub.total, sub.total_sq
    return Segments(index, count, seg_min, seg_max, above, total, total_sq, invalid)


def mean_stddev(count: np.ndarray, total: np.ndarray,
                total_sq: np.ndarray) -> tuple[list[float], list[float]]:
    """Per-segment mean and population stddev, bit-identical to the exact int formula.

    mean = S1 / n and var = (n*S2 - S1^2) / n^2 (see moments.py). When n*S2 < 2^52
    and n < 2^26, every operand is an integer < 2^53, exact in float64, and IEEE division and sqrt
    are correctly rounded, so the vectorized float path returns exactly what Python's
    int true division would; other segments take the Python-int path.
    """
    if total.dtype == object or total_sq.dtype == object:
        fast = np.zeros(count.size, dtype=bool)
    else:
        fast = ((count.astype(np.float64) * total_sq.astype(np.float64) < _FLOAT_EXACT)
                & (count < _MAX_FAST_COUNT))
    means = np.zeros(count.size)
    variances = np.zeros(count.size)
    if fast.any():
        n = count[fast]
        s1 = total[fast]
        means[fast] = s1 / n
        variances[fast] = (n * total_sq[fast] - s1 * s1) / (n * n)
    mean_list, std_list = means.tolist(), np.sqrt(variances).tolist()
    for k in np.flatnonzero(~fast).tolist():
        n, s1, s2 = int(count[k]), int(total[k]), int(total_sq[k])
        mean_list[k] = s1 / n
        std_list[k] = math.sqrt((n * s2 - s1 * s1) / (n * n))
    return mean_list, std_list
