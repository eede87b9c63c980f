"""Streaming count / mean / population standard deviation over integer ticks.

Why exact integer power sums instead of Welford/Chan floating-point updates:
the textbook one-pass variance (S2 - S1^2/n)/n loses all precision to cancellation in
floating point (Chan, Golub & LeVeque, "Algorithms for computing the sample variance:
analysis and recommendations", The American Statistician 37(3), 1983), which is why
Welford's update and Chan et al.'s pairwise combination
    M2 = M2_a + M2_b + delta^2 * n_a * n_b / n
exist. Our samples are integers, so we can instead keep n, S1 = sum(v) and
S2 = sum(v^2) as exact Python ints: merging is plain addition (associative, so any
split of the stream into batches gives bit-identical results), and the only rounding
happens once, at the end, in the division

    variance = (n * S2 - S1^2) / n^2          (population variance, ddof = 0)

which Python performs on exact integers with a single correct rounding. Population
(ddof = 0) matches the stddev printed by the seed logs' rt_eval.
"""

from __future__ import annotations

import math

import numpy as np

from .exact import as_tick_array, exact_sum, exact_sum_squares


class Moments:
    """Exact count, sum, sum of squares, min and max of a stream of integer ticks."""

    __slots__ = ("count", "total", "total_sq", "min", "max")

    def __init__(self) -> None:
        self.count: int = 0
        self.total: int = 0          # S1, exact
        self.total_sq: int = 0       # S2, exact
        self.min: int | None = None
        self.max: int | None = None

    def add(self, values: np.ndarray) -> None:
        """Add a batch of int64 ticks (vectorized; exact for any int64 values)."""
        arr = as_tick_array(values)
        if arr.size == 0:
            return
        lo, hi = int(arr.min()), int(arr.max())
        bound = max(-lo, hi)
        self.add_summary(arr.size, exact_sum(arr, bound), exact_sum_squares(arr, bound),
                         lo, hi)

    def add_summary(self, count: int, total: int, total_sq: int, lo: int, hi: int) -> None:
        """Add pre-reduced sums of a non-empty batch (used by the windower's reduceat path)."""
        if count <= 0:
            return
        self.count += count
        self.total += total
        self.total_sq += total_sq
        self.min = lo if self.min is None or lo < self.min else self.min
        self.max = hi if self.max is None or hi > self.max else self.max

    def merge(self, other: Moments) -> None:
        """Combine another stream's moments into this one (exact)."""
        if other.count:
            self.add_summary(other.count, other.total, other.total_sq, other.min, other.max)

    @property
    def mean(self) -> float | None:
        """Arithmetic mean (correctly rounded S1 / n), None when empty."""
        return self.total / self.count if self.count else None

    @property
    def variance(self) -> float | None:
        """Population variance (ddof = 0), None when empty."""
        if not self.count:
            return None
        # n*S2 - S1^2 = n * sum((v - mean)^2) >= 0 exactly (Cauchy-Schwarz); int math.
        return (self.count * self.total_sq - self.total * self.total) / (self.count * self.count)

    @property
    def stddev(self) -> float | None:
        """Population standard deviation (ddof = 0), None when empty."""
        var = self.variance
        return None if var is None else math.sqrt(var)

    def __repr__(self) -> str:
        return (f"Moments(count={self.count}, mean={self.mean}, stddev={self.stddev}, "
                f"min={self.min}, max={self.max})")
