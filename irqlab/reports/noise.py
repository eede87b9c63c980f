"""Is a difference between two runs beyond noise? A bootstrap of quantile ratios.

Method: the percentile bootstrap (Efron 1979; Efron & Tibshirani, "An Introduction to
the Bootstrap", 1993, ch. 13) of the ratio q_B / q_A of one quantile (p50, p99.9) of run B
to the same quantile of baseline run A, each run resampled independently with
replacement. The 95 % interval is the 2.5th..97.5th percentile of the bootstrap ratios;
"beyond noise" means the interval excludes 1. The p-value reported is the dual of that
interval: the smallest alpha whose (1 - alpha) percentile interval excludes 1, i.e.
2 * min(P*(ratio <= 1), P*(ratio >= 1)) (the "achieved significance level" read off the
bootstrap distribution; Efron & Tibshirani ch. 15-16 discuss its limits).

Resampling is exact and cheap for an order statistic: a bootstrap sample is n draws
F_n^-1(U_i) with U_i uniform, F_n^-1 is non-decreasing, so its k-th smallest value is
F_n^-1(U_(k)) = x_(ceil(n * U_(k))), and the k-th smallest of n uniforms is
Beta(k, n - k + 1) (David & Nagaraja, "Order Statistics", 3rd ed. 2003, section 2.2).
So each bootstrap replicate costs one Beta draw instead of n index draws, and every
stored sample is used (runs above MAX_SAMPLES are first subsampled, deterministically
with the seed, only to bound the sort).

Caveat, stated in the output's method text: the bootstrap treats samples as independent.
Interrupt latencies are autocorrelated in time (a noisy second gives a burst of slow
samples), so the interval is optimistic; a block bootstrap over windows would be more
honest but needs many windows per run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterator

import numpy as np

from irqlab.stats import quantile_rank
from irqlab.stats.fields import RATIO_FIELDS

DEFAULT_SEED = 20_240_601
DEFAULT_RESAMPLES = 10_000
MAX_SAMPLES = 2_000_000
CONFIDENCE = 0.95
METHOD = ("percentile bootstrap of the quantile ratio (independent resampling of each run, "
          "exact order-statistic draws, {resamples} resamples, seed {seed}), 95% interval; "
          "assumes independent samples, so it is optimistic for bursty runs")
# (quantile, label) tested: the percentiles compare divides by the baseline's.
QUANTILES: tuple[tuple[float, str], ...] = tuple(
    (f.quantile, f.label) for f in RATIO_FIELDS if f.quantile is not None)


@dataclass(frozen=True)
class NoiseResult:
    """One quantile compared between a run and the baseline."""

    quantile: str
    ratio: float | None        # point estimate q_run / q_base
    ci_low: float | None       # 95 % percentile bootstrap interval of the ratio
    ci_high: float | None
    p_value: float
    beyond_noise: bool
    samples_used: tuple[int, int]   # (baseline, run) after any subsampling

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["samples_used"] = list(self.samples_used)
        return out


def prepare(values_ns: np.ndarray, seed: int = DEFAULT_SEED,
            max_samples: int = MAX_SAMPLES) -> np.ndarray:
    """Sorted float ns, subsampled without replacement (seeded) above ``max_samples``."""
    vals = np.asarray(values_ns, dtype=np.float64)
    if vals.size > max_samples:
        rng = np.random.default_rng(seed)
        vals = vals[rng.choice(vals.size, size=max_samples, replace=False)]
    return np.sort(vals)


def positions(n: int, seed: int = DEFAULT_SEED, max_samples: int = MAX_SAMPLES) -> np.ndarray:
    """The positions (sorted) of the n samples `prepare` keeps: all, or the seeded draw."""
    if n > max_samples:
        rng = np.random.default_rng(seed)
        return np.sort(rng.choice(n, size=max_samples, replace=False))
    return np.arange(n)


def prepare_stream(batches: Iterator[np.ndarray], n: int, ns_per_tick: float,
                   seed: int = DEFAULT_SEED, max_samples: int = MAX_SAMPLES) -> np.ndarray:
    """`prepare` of n latencies in ticks read batch by batch in sequence order (times
    ns_per_tick): the same positions are drawn, so the result is the same array, and
    only the drawn values are kept."""
    idx = positions(n, seed, max_samples)
    picked = []
    offset = 0
    for batch in batches:
        lo, hi = np.searchsorted(idx, [offset, offset + batch.size])
        picked.append(np.asarray(batch)[idx[lo:hi] - offset] * ns_per_tick)
        offset += batch.size
    if offset != n:
        raise RuntimeError(f"expected {n} samples, read {offset}")
    return np.sort(np.concatenate(picked).astype(np.float64, copy=False))


def bootstrap_quantile(sorted_ns: np.ndarray, q: float, resamples: int,
                       rng: np.random.Generator) -> np.ndarray:
    """``resamples`` bootstrap replicates of the nearest-rank q-quantile (see module doc)."""
    n = sorted_ns.size
    k = quantile_rank(q, n)
    u = rng.beta(k, n - k + 1, size=resamples)
    idx = np.clip(np.ceil(u * n).astype(np.int64), 1, n) - 1
    return sorted_ns[idx]


def compare_quantile(base_sorted: np.ndarray, run_sorted: np.ndarray, q: float, label: str,
                     seed: int = DEFAULT_SEED,
                     resamples: int = DEFAULT_RESAMPLES) -> NoiseResult:
    """Bootstrap the ratio of run's to baseline's q-quantile."""
    rng = np.random.default_rng(seed)
    qa = bootstrap_quantile(base_sorted, q, resamples, rng)
    qb = bootstrap_quantile(run_sorted, q, resamples, rng)
    diff = qb - qa
    # The p-value and verdict use the difference, defined even when a quantile is <= 0.
    p_value = float(min(1.0, 2 * min(np.mean(diff <= 0), np.mean(diff >= 0))))
    alpha = (1 - CONFIDENCE) / 2
    point_a = base_sorted[quantile_rank(q, base_sorted.size) - 1]
    point_b = run_sorted[quantile_rank(q, run_sorted.size) - 1]
    ratio = lo = hi = None
    if point_a > 0 and np.all(qa > 0):
        ratios = qb / qa
        ratio = float(point_b / point_a)
        lo, hi = (float(x) for x in np.quantile(ratios, [alpha, 1 - alpha]))
    d_lo, d_hi = np.quantile(diff, [alpha, 1 - alpha])
    beyond = bool(d_lo > 0 or d_hi < 0)
    return NoiseResult(label, ratio, lo, hi, p_value, beyond,
                       (int(base_sorted.size), int(run_sorted.size)))


def compare_runs(base_ns: np.ndarray, run_ns: np.ndarray, seed: int = DEFAULT_SEED,
                 resamples: int = DEFAULT_RESAMPLES) -> list[NoiseResult]:
    """p50 and p99.9 of a run against the baseline."""
    a, b = prepare(base_ns, seed), prepare(run_ns, seed + 1)
    return [compare_quantile(a, b, q, label, seed, resamples) for q, label in QUANTILES]


def method_text(seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES) -> str:
    return METHOD.format(seed=seed, resamples=resamples)
