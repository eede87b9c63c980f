"""The C fast path of the statistics (irqlab/native/stats.c), beside the numpy reference.

One call reduces a batch to per-window figures (a `Segments`, as segments.py's numpy
`reduce_segments` builds it) and, optionally, tallies its latencies into a histogram's
buckets, in one sequential pass. The numpy code stays the reference and the fallback:
`reduce_batch` returns None when the library is missing or disabled (``IRQLAB_NATIVE=0``,
`irqlab.native.set_enabled(False)`), and callers then take the numpy path; the tests
compare both (tests/unit/stats/test_native.py).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

import numpy as np

from irqlab import native

from .segments import Segments, reduce_segments, window_span

# Rows of the C output (stats.c's SEG_* enum).
_ROWS = 11
(_INDEX, _COUNT, _MIN, _MAX, _ABOVE, _S1_LO, _S1_HI, _S2_LO, _S2_MID, _S2_HI,
 _INVALID) = range(_ROWS)
# The valid minimum that makes no sample invalid (stats.c PARAM_VALID_MIN_TICK).
NO_VALID_MIN = -(1 << 63)


@dataclass(slots=True)
class Tally:
    """A batch's histogram counts: regular buckets, then the out-of-range counts."""

    counts: np.ndarray
    underflow: int
    overflow: int


@dataclass(frozen=True, slots=True)
class HistogramLayout:
    """The bucket layout the C tally must follow (LogHistogram's)."""

    precision_bits: int
    max_value_bits: int

    @property
    def n_buckets(self) -> int:
        return (self.max_value_bits - self.precision_bits) << self.precision_bits


def _exact_words(lo: np.ndarray, *high: np.ndarray, signed: bool) -> np.ndarray:
    """int64 array of the multi-word integers when each fits, else Python ints (object).

    Words are little-endian 64-bit limbs; a signed value is two's complement over the
    limbs given.
    """
    if signed:
        (hi,) = high
        if np.array_equal(hi, lo >> 63):
            return lo
        unsigned = lo.view(np.uint64).tolist()
        return np.array([(h << 64) + u for h, u in zip(hi.tolist(), unsigned)], dtype=object)
    mid, hi = high
    if not mid.any() and not hi.any() and (lo >= 0).all():
        return lo
    words = zip(lo.view(np.uint64).tolist(), mid.view(np.uint64).tolist(),
                hi.view(np.uint64).tolist())
    return np.array([(h << 128) + (m << 64) + u for u, m, h in words], dtype=object)


def reduce_batch(deadlines: np.ndarray | None, latencies: np.ndarray, origin: int,
           window_tick: int, threshold_tick: int,
           layout: HistogramLayout | None = None,
           valid_min: int | None = None) -> tuple[Segments, Tally | None] | None:
    """Per-window reductions of a non-empty int64 batch and its histogram tally (when
    `layout` is given); None when the C library is not usable.

    `deadlines` None puts every sample in window 0 (a histogram-only batch). Latencies
    below `valid_min` (None: no minimum) are only counted in `Segments.invalid`, as
    `reduce_segments` does. Raises ValueError, as `reduce_segments` does, for samples
    out of window order.
    """
    handle = native.lib()
    if handle is None:
        return None
    n = latencies.size
    if deadlines is None:
        max_segments = 1
    else:
        # At most one window per sample, and never more than the windows spanned.
        first, last = window_span(deadlines, origin, window_tick)
        max_segments = min(n, last - first + 1) + 1
    # Without a tally the layout is unused; LogHistogram's default passes the C checks.
    lay = layout or HistogramLayout(7, 40)
    params = np.array([origin, window_tick, threshold_tick, lay.precision_bits,
                       lay.max_value_bits,
                       NO_VALID_MIN if valid_min is None else valid_min], dtype=np.int64)
    hist = np.zeros(layout.n_buckets + 3, dtype=np.int64) if layout else None
    seg = np.empty((_ROWS, max_segments), dtype=np.int64)
    got = handle.irq_stats_reduce_valid(
        None if deadlines is None else native.ptr(deadlines), native.ptr(latencies), n,
        native.ptr(params), None if hist is None else native.ptr(hist), max_segments,
        native.ptr(seg))
    if got == -errno.EDOM:
        raise ValueError("deadline before the first sample's deadline")
    if got in (-errno.EINVAL, -errno.ENOSPC):
        # ENOSPC: more windows than the span allows, only possible out of order.
        raise ValueError("samples out of window order (deadline went backwards)")
    if got < 0:
        raise ValueError(f"cannot reduce the batch (error {-got}: {errno.errorcode[-got]})")
    seg = seg[:, :got]
    segments = Segments(
        index=seg[_INDEX].copy(), count=seg[_COUNT].copy(), min=seg[_MIN].copy(),
        max=seg[_MAX].copy(), above=seg[_ABOVE].copy(),
        total=_exact_words(seg[_S1_LO].copy(), seg[_S1_HI], signed=True),
        total_sq=_exact_words(seg[_S2_LO].copy(), seg[_S2_MID], seg[_S2_HI], signed=False),
        invalid=seg[_INVALID].copy())
    tally = None
    if hist is not None:
        tally = Tally(hist[2:-1], int(hist[0]), int(hist[-1]))
    return segments, tally

