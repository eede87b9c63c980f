"""Exact nearest-rank quantiles of samples too many to hold: a few passes, bounded memory.

The samples are read as batches from a source that can be read again (the store); no
pass keeps more than a few MiB. Pass 1 builds the log histogram (C fast path when
built) with exact count, min, max and the count above a threshold: the histogram puts
the r-th smallest sample (rank r = quantile_rank(q, n)) in one bucket [lo, hi] with a
known number of samples below it. Each further pass narrows every such range: a range
holding at most COLLECT_MAX samples is gathered and the sample picked by np.partition;
a bigger one is cut into 2^16 bins by (v - lo) >> shift and the bin holding the rank
becomes the new range (bins of one value end it). Histogram buckets are 1/128 of their
value wide, so most quantiles need one pass after the first, a few two.

The answer equals sorting every sample and taking position r (tests compare both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from .histogram import LogHistogram, quantile_rank
from .native import reduce_batch

# A range with at most this many samples is gathered (8 MiB of int64) and partitioned.
COLLECT_MAX = 1 << 20
_BIN_BITS = 16

# read() -> the samples (int64 latencies in ticks) as batches; may be called many times.
Reader = Callable[[], Iterator[np.ndarray]]


@dataclass(frozen=True)
class ExactFigures:
    """Exact figures of a sample stream, in ticks."""

    count: int
    min_tick: int | None
    max_tick: int | None
    above: int | None                  # samples > threshold_tick (None: none given)
    quantile_tick: list[int]           # one per asked quantile ([] when count == 0)
    histogram: LogHistogram            # of every sample (plots, survival curves)
    passes: int                        # reads of the source it took


@dataclass
class _Target:
    """The sample of one rank, known to lie in [lo, hi] with `below` samples under lo
    and `inside` samples in the range."""

    rank: int
    lo: int
    hi: int
    below: int
    inside: int
    value: int | None = None


def first_pass(read: Reader, threshold_tick: int | None) -> tuple[LogHistogram, int]:
    """Histogram (with exact count, sum, min, max) and count above the threshold."""
    hist = LogHistogram()
    above = 0
    thr = threshold_tick if threshold_tick is not None else np.iinfo(np.int64).max
    for batch in read():
        if not batch.size:
            continue
        batch = np.ascontiguousarray(batch, dtype=np.int64)
        reduced = reduce_batch(None, batch, 0, 1, thr, hist.layout)
        if reduced is None:
            hist.add(batch)
            above += int(np.count_nonzero(batch > thr))
        else:
            seg, tally = reduced
            assert tally is not None
            hist.add_tally(tally, seg)
            above += int(seg.above.sum())
    return hist, above


def exact_figures(read: Reader, quantiles: list[float],
                  threshold_tick: int | None = None,
                  histogram: LogHistogram | None = None) -> ExactFigures:
    """Count, min, max, count above `threshold_tick` and exact nearest-rank quantiles.

    `histogram`: the samples' histogram when already built (as they were written),
    which saves the first pass (no threshold count then)."""
    if histogram is None:
        hist, above = first_pass(read, threshold_tick)
    else:
        hist, above, threshold_tick = histogram, 0, None
    n = hist.count
    if n == 0:
        return ExactFigures(0, None, None, None if threshold_tick is None else 0, [], hist, 1)
    targets = [_locate(hist, quantile_rank(q, n)) for q in quantiles]
    passes = 1
    while any(t.value is None for t in targets):
        _narrow(read, [t for t in targets if t.value is None])
        passes += 1
    return ExactFigures(n, hist.min, hist.max, None if threshold_tick is None else above,
                        [int(t.value) for t in targets], hist, passes)  # type: ignore[arg-type]


def _locate(hist: LogHistogram, rank: int) -> _Target:
    """The histogram range holding the sample of `rank` (resolved when it is one value)."""
    assert hist.min is not None and hist.max is not None
    if rank == 1:
        return _Target(rank, hist.min, hist.min, 0, 1, hist.min)
    if rank == hist.count:
        return _Target(rank, hist.max, hist.max, rank - 1, 1, hist.max)
    if rank <= hist.underflow:
        t = _Target(rank, hist.min, -1, 0, hist.underflow)
    else:
        cum = np.cumsum(hist.counts)
        r = rank - hist.underflow
        if r > int(cum[-1]):
            t = _Target(rank, hist.max_trackable + 1, hist.max,
                        hist.underflow + int(cum[-1]), hist.overflow)
        else:
            b = int(np.searchsorted(cum, r, side="left"))
            lo, hi = hist.bucket_bounds(b)
            t = _Target(rank, lo, hi, hist.underflow + (int(cum[b - 1]) if b else 0),
                        int(hist.counts[b]))
    t.lo, t.hi = max(t.lo, hist.min), min(t.hi, hist.max)
    if t.lo == t.hi:
        t.value = t.lo
    return t


def _narrow(read: Reader, targets: list[_Target]) -> None:
    """One pass: resolve or narrow every target (targets sharing a range share work)."""
    ranges = {(t.lo, t.hi, t.inside) for t in targets}
    plans = {}
    for lo, hi, inside in ranges:
        shift = 0 if inside <= COLLECT_MAX else max(0, (hi - lo).bit_length() - _BIN_BITS)
        plans[(lo, hi, inside)] = ([] if inside <= COLLECT_MAX else
                                   np.zeros(((hi - lo) >> shift) + 1, dtype=np.int64), shift)
    for batch in read():
        for (lo, hi, _inside), (acc, shift) in plans.items():
            sel = batch[(batch >= lo) & (batch <= hi)]
            if not sel.size:
                continue
            if isinstance(acc, list):
                acc.append(sel)
            else:
                acc += np.bincount((sel - lo) >> shift, minlength=acc.size)[:acc.size]
    for t in targets:
        acc, shift = plans[(t.lo, t.hi, t.inside)]
        k = t.rank - t.below                      # 1-based rank inside the range
        if isinstance(acc, list):
            vals = np.concatenate(acc) if acc else np.empty(0, dtype=np.int64)
            if vals.size != t.inside or not 1 <= k <= vals.size:
                raise RuntimeError("the samples changed between passes")
            t.value = int(np.partition(vals, k - 1)[k - 1])
            continue
        cum = np.cumsum(acc)
        if int(cum[-1]) != t.inside:
            raise RuntimeError("the samples changed between passes")
        j = int(np.searchsorted(cum, k, side="left"))
        t.below += int(cum[j - 1]) if j else 0
        t.inside = int(acc[j])
        t.lo, t.hi = t.lo + (j << shift), min(t.hi, t.lo + ((j + 1) << shift) - 1)
        if t.lo == t.hi:
            t.value = t.lo
