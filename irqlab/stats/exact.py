"""Exact (arbitrary precision) sums over int64 arrays.

numpy's int64 reductions wrap around silently on overflow. These helpers pick the
fastest path that provably cannot overflow: a plain int64 reduction when
max|v| * n < 2^63, otherwise a split into pieces whose partial sums fit, combined
as Python ints. Results are exact integers, so merging partial results is plain
addition and the split of a stream into batches can never change a statistic.
"""

from __future__ import annotations

import math

import numpy as np

_LIMIT = 1 << 63                     # magnitude bound of an int64 accumulator (exclusive)
_SQRT_LIMIT = math.isqrt(_LIMIT - 1)  # largest |v| whose square fits in int64
_LO_MASK = 0xFFFF_FFFF
_PIECE = 1 << 30                     # n * 2^32 < 2^63 for pieces of this many elements
_DOT_MIN_CHUNK = 1 << 16             # below this chunk length, dot-per-chunk is too slow


def as_tick_array(values: object, name: str = "values") -> np.ndarray:
    """Return `values` as a 1-D int64 array (no copy when it already is one)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.dtype != np.int64:
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{name} must hold integer ticks, got dtype {arr.dtype}")
        if arr.dtype == np.uint64 and arr.size and int(arr.max()) >= _LIMIT:
            raise ValueError(f"{name} holds values >= 2^63 that do not fit in int64")
        arr = arr.astype(np.int64)
    return arr


def max_abs(values: np.ndarray) -> int:
    """max |v| as a Python int (np.abs would overflow on -2^63)."""
    if values.size == 0:
        return 0
    return max(-int(values.min()), int(values.max()))


def exact_sum(values: np.ndarray, bound: int | None = None) -> int:
    """Exact sum of an int64 array; `bound` (>= max|v|) skips a min/max pass if known."""
    n = values.size
    if n == 0:
        return 0
    m = max_abs(values) if bound is None else bound
    if m * n < _LIMIT:
        return int(values.sum(dtype=np.int64))
    # v = hi * 2^32 + lo with 0 <= lo < 2^32 (two's complement & and arithmetic >>).
    # Per piece of <= 2^30 elements: sum(lo) < 2^62 and |sum(hi)| <= 2^61, both exact.
    total = 0
    for start in range(0, n, _PIECE):
        piece = values[start:start + _PIECE]
        lo = int((piece & _LO_MASK).sum(dtype=np.int64))
        hi = int((piece >> 32).sum(dtype=np.int64))
        total += (hi << 32) + lo
    return total


def exact_sum_squares(values: np.ndarray, bound: int | None = None) -> int:
    """Exact sum of v^2 over an int64 array; `bound` (>= max|v|) is optional."""
    n = values.size
    if n == 0:
        return 0
    m = max_abs(values) if bound is None else bound
    if m == 0:
        return 0
    sq_bound = m * m
    if sq_bound * n < _LIMIT:
        # Integer dot has no BLAS path; it is a single pass with no temporary array.
        return int(np.dot(values, values))
    chunk = (_LIMIT - 1) // sq_bound
    if chunk >= _DOT_MIN_CHUNK:
        return sum(int(np.dot(values[i:i + chunk], values[i:i + chunk]))
                   for i in range(0, n, chunk))
    if m <= _SQRT_LIMIT:
        squares = values * values  # each square fits in int64
        return exact_sum(squares, bound=sq_bound)
    # Some squares overflow int64 (|v| > 3.04e9): those rare values go through Python ints.
    big = (values > _SQRT_LIMIT) | (values < -_SQRT_LIMIT)
    small_part = exact_sum_squares(values[~big], bound=_SQRT_LIMIT)
    return small_part + sum(v * v for v in values[big].tolist())
