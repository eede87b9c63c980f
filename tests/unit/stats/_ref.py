"""Direct numpy / pure-Python reference computations the tests compare against."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def nearest_rank(values: np.ndarray, q: float) -> int:
    """Nearest-rank quantile by sorting: the ceil(q*n)-th smallest (1-based), q exact decimal."""
    ordered = np.sort(values)
    rank = max(1, math.ceil(Fraction(repr(q)) * values.size))
    return int(ordered[rank - 1])


def window_reference(deadlines: np.ndarray, latencies: np.ndarray, window_tick: int,
                     threshold_tick: int) -> dict[int, dict]:
    """Per-window statistics by brute force: {index: stats} for non-empty windows."""
    index = (deadlines - deadlines[0]) // window_tick
    out = {}
    for w in np.unique(index).tolist():
        part = latencies[index == w]
        exact = [int(v) for v in part]
        n = len(exact)
        mean = Fraction(sum(exact), n)
        var = sum((Fraction(v) - mean) ** 2 for v in exact) / n
        out[w] = {"samples": n, "mean": float(mean), "stddev": math.sqrt(float(var)),
                  "np_mean": float(part.mean()), "np_std": float(part.std()),
                  "min": int(part.min()), "max": int(part.max()),
                  "above": int(np.count_nonzero(part > threshold_tick))}
    return out


def make_deadlines(rng: np.random.Generator, n: int, period: int, stall_every: int = 0,
                   stall_tick: int = 0, origin: int = 10**12) -> np.ndarray:
    """Monotonic deadlines: `period` apart with jitter, and optional long stalls."""
    steps = np.full(n, period, dtype=np.int64)
    steps[0] = 0
    steps[1:] += rng.integers(-period // 4, period // 4, n - 1)
    if stall_every:
        stalls = rng.choice(np.arange(1, n), size=max(1, n // stall_every), replace=False)
        steps[stalls] += stall_tick
    return origin + np.cumsum(steps)


def heavy_tailed(rng: np.random.Generator, n: int) -> np.ndarray:
    """Lognormal body around 300 ticks, Pareto tail spikes and a few negatives."""
    body = rng.lognormal(np.log(300.0), 0.2, n)
    spikes = rng.random(n) < 0.01
    body[spikes] *= 1 + rng.pareto(1.1, spikes.sum()) * 50
    values = np.minimum(body, 2.0**39).astype(np.int64)
    neg = rng.random(n) < 0.0005
    values[neg] = -rng.integers(1, 50, neg.sum())
    return values
