"""Is a difference between two groups of runs beyond noise? The run is the unit.

Two runs of one configuration differ by more than their samples do (host state, CPU
frequency, caches, placement: Kalibera & Jones, "Rigorous Benchmarking in Reasonable
Time", ISMM 2013, measure this run-level variation and show that it must be replicated
to be judged); and samples within a run are autocorrelated (a noisy second gives a
burst of slow samples). Resampling single samples as if independent (before issue 27) is
pseudo-replication (Hurlbert, Ecological Monographs 54, 1984): two identical runs came
out "beyond noise at p<0.001". So:

**Replicates** (both groups >= 2 runs, `irqlab run --repeat N`): each run gives one
value per quantile, its exact nearest-rank p50 and p99.9 (Hyndman & Fan 1996 def. 1).
Welch's t-test (Welch, "The generalization of Student's problem when several different
population variances are involved", Biometrika 34, 1947) on the logs of these per-run
quantiles, with the Welch-Satterthwaite degrees of freedom, compares the groups: the
log makes a multiplicative effect additive and the per-run spread closer to normal, and
the t quantile (not a normal one) keeps the test calibrated at 2-5 runs a side. The
interval of the ratio is exp(interval of the mean log difference); the ratio itself
is that of the groups' geometric means. Two quantiles are tested per row, so each
interval is a Bonferroni (Dunn 1961) simultaneous one at 1 - 0.05/2 and each p-value is
Bonferroni-adjusted (Holm 1979 would reject as often or more, but its steps have no
matching simultaneous intervals; the verdict has to agree with the intervals shown):
the row's "beyond noise" has a family-wise error rate <= 5 %.

**Single runs** (either group one run): run-to-run variation cannot be known, so the
verdict never says "beyond noise". What can be judged is whether even the within-run
variation explains the difference: a block bootstrap (Kuensch, Ann. Statist. 17, 1989;
here the non-overlapping blocks of Carlstein, Ann. Statist. 14, 1986) resamples
contiguous blocks of each run, so bursts stay whole. The block length comes from the
run's measured autocorrelation by Politis & White's automatic rule (Econometric Reviews
23, 2004, with the correction of Patton, Politis & White, 2009), computed on the ranks of
the latencies (so one huge stall does not decide it; the rule is derived for the mean,
here it measures how long the dependence lasts) and never below the length that keeps
the number of blocks <= MAX_BLOCKS. If the simultaneous interval of every
quantile's ratio includes 1: "within noise"; otherwise "single runs: re-run with
--repeat to judge" and beyond_noise is null, never true.

Big runs: the bootstrap uses at most MAX_SAMPLES samples a run, every k-th in time
order (systematic thinning keeps the series' dependence, at lags k times longer, and
only widens the interval); a run kept in the store is thinned batch by batch
(`prepare_stream`), so memory stays bounded. A resample's quantile is found on a grid
of GRID_POINTS pooled values around the estimate: each block's count of samples <= each
grid value is computed once, a resample's counts are its block weights times that table,
and its quantile is the first grid value whose count reaches the nearest rank (the exact
quantile rounded up to the grid: a fraction of the interval's width).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Iterator, Sequence

import numpy as np

from irqlab.stats import quantile_rank
from irqlab.stats.fields import RATIO_FIELDS

DEFAULT_SEED = 20_240_601
DEFAULT_RESAMPLES = 2_000
MAX_SAMPLES = 2_000_000      # per run, for the single-run bootstrap
MAX_BLOCKS = 1_024           # per run: bounds the bootstrap's cost (resamples x blocks)
GRID_POINTS = 256            # values around a quantile where resamples are evaluated
FAMILY_ALPHA = 0.05          # the row's family-wise level
TEST_REPLICATES = "welch-t"
TEST_SINGLE = "bootstrap"
VERDICT_BEYOND = "beyond noise"
VERDICT_WITHIN = "within noise"
VERDICT_SINGLE = "single runs: re-run with --repeat to judge"
METHOD_REPLICATES = ("Welch's t on the log of each run's quantile (the run is the unit; "
                     "Welch 1947), interval of the ratio = exp(interval of the mean log "
                     "difference), Bonferroni over {m} quantiles: family-wise 5 %")
METHOD_SINGLE = ("single runs: block bootstrap of contiguous blocks (Kuensch 1989, "
                 "non-overlapping blocks), block length from the autocorrelation (Politis & "
                 "White 2004), {resamples} resamples, seed {seed}, Bonferroni over {m} "
                 "quantiles; run-to-run variation unknown, never called beyond noise")
# (quantile, label) tested: the percentiles compare divides by the baseline's.
QUANTILES: tuple[tuple[float, str], ...] = tuple(
    (f.quantile, f.label) for f in RATIO_FIELDS if f.quantile is not None)


@dataclass(frozen=True)
class NoiseResult:
    """One quantile compared between a group of runs and the baseline group."""

    quantile: str
    ratio: float | None        # point estimate q_run / q_base
    ci_low: float | None       # simultaneous interval of the ratio (level `confidence`)
    ci_high: float | None
    p_value: float | None      # unadjusted, two-sided
    beyond_noise: bool | None  # None: single runs whose interval excludes 1 (unknown)
    samples_used: tuple[int, int]   # (baseline, run) samples the test rests on
    p_adjusted: float | None = None   # Bonferroni: min(1, m * p)
    confidence: float = 1 - FAMILY_ALPHA / len(QUANTILES)
    df: float | None = None           # Welch-Satterthwaite degrees of freedom

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["samples_used"] = list(self.samples_used)
        return out


# --- Student's t without scipy ---------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; Press et al.,
    Numerical Recipes, 3rd ed. 2007, section 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def t_sf2(t: float, df: float) -> float:
    """Two-sided tail P(|T| >= |t|) of Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return _betainc(df / 2, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (p > 0.5), by bisection on t_sf2."""
    target, lo, hi = 2 * (1 - p), 0.0, 1.0
    while t_sf2(hi, df) > target:
        hi *= 2
    while hi - lo > 1e-10 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_sf2(mid, df) > target else (lo, mid)
    return (lo + hi) / 2


# --- replicates: Welch's t on log per-run quantiles ------------------------------------

def welch_log_ratio(base_q: Sequence[float], run_q: Sequence[float], label: str,
                    m: int = len(QUANTILES), samples: tuple[int, int] = (0, 0)
                    ) -> NoiseResult:
    """One quantile: per-run values of the baseline group and of the other group (>= 2
    each). A value <= 0 has no log: no ratio, no verdict."""
    conf = 1 - FAMILY_ALPHA / m
    if min(base_q) <= 0 or min(run_q) <= 0:
        return NoiseResult(label, None, None, None, None, None, samples, None, conf)
    x, y = np.log(np.asarray(base_q, float)), np.log(np.asarray(run_q, float))
    d = float(y.mean() - x.mean())
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = math.sqrt(vx + vy)
    if se == 0:
        # Every run of each group gave the same value: the difference is exact.
        p, half, df = (1.0 if d == 0 else 0.0), 0.0, None
    else:
        df = (vx + vy) ** 2 / (vx ** 2 / (x.size - 1) + vy ** 2 / (y.size - 1))
        p = t_sf2(d / se, df)
        half = t_quantile(1 - (1 - conf) / 2, df) * se
    p_adj = min(1.0, m * p)
    lo, hi = math.exp(d - half), math.exp(d + half)
    return NoiseResult(label, math.exp(d), lo, hi, p, bool(lo > 1 or hi < 1), samples,
                       p_adj, conf, df)


# --- single runs: block bootstrap ------------------------------------------------------

def positions(n: int, max_samples: int = MAX_SAMPLES) -> np.ndarray:
    """The positions the bootstrap keeps of n samples: all, or every k-th (time order)."""
    return np.arange(0, n, thinning(n, max_samples))


def thinning(n: int, max_samples: int = MAX_SAMPLES) -> int:
    """k: every k-th sample is kept (1: all)."""
    return max(1, -(-n // max_samples))


def prepare(values_ns: np.ndarray, max_samples: int = MAX_SAMPLES) -> np.ndarray:
    """Float ns in time order, thinned to at most ``max_samples``."""
    vals = np.asarray(values_ns, dtype=np.float64)
    return vals[positions(vals.size, max_samples)]


def prepare_stream(batches: Iterator[np.ndarray], n: int, ns_per_tick: float,
                   max_samples: int = MAX_SAMPLES) -> np.ndarray:
    """`prepare` of n latencies in ticks read batch by batch in sequence order (times
    ns_per_tick): the same positions, only the kept values held."""
    idx = positions(n, max_samples)
    picked = []
    offset = 0
    for batch in batches:
        lo, hi = np.searchsorted(idx, [offset, offset + batch.size])
        picked.append(np.asarray(batch)[idx[lo:hi] - offset] * ns_per_tick)
        offset += batch.size
    if offset != n:
        raise RuntimeError(f"expected {n} samples, read {offset}")
    return joined(picked)


def joined(picked: list[np.ndarray]) -> np.ndarray:
    """The kept values of a run read in batches, in time order."""
    if not picked:
        return np.empty(0)
    return np.concatenate(picked).astype(np.float64, copy=False)


def _autocovariance(x: np.ndarray, max_lag: int) -> np.ndarray:
    """Autocovariances at lags 0..max_lag (biased, divided by n), by FFT."""
    n = x.size
    y = x - x.mean()
    size = 1 << int(2 * n - 1).bit_length()
    f = np.fft.rfft(y, size)
    acov = np.fft.irfft(f * np.conj(f), size)[:max_lag + 1] / n
    return acov


def mid_ranks(series: np.ndarray) -> np.ndarray:
    """Each value's mid-rank, (its first + one past its last position in sorted order)
    / 2, from one stable sort: two searchsorted calls of every value into the sorted
    values gave the same numbers by random access (4.0 of compare's 5.7 s on two 10 M
    runs, issue 45)."""
    n = series.size
    order = np.argsort(series, kind="stable")
    srt = series[order]
    starts = np.flatnonzero(np.concatenate(([True], srt[1:] != srt[:-1])))
    ends = np.append(starts[1:], n)
    ranks = np.empty(n, np.float64)
    ranks[order] = np.repeat((starts + ends) / 2, ends - starts)
    return ranks


def block_length(series: np.ndarray) -> int:
    """Politis & White (2004) automatic block length for the circular block bootstrap,
    with Patton, Politis & White's (2009) correction, on the mid-ranks of the series.

    m-hat is the smallest lag after which K_N autocorrelations in a row are below
    2 sqrt(log10(n) / n); M = 2 m-hat; with the flat-top window lambda,
    G = sum lambda(k/M) |k| R(k), g = sum lambda(k/M) R(k) and D = (4/3) g^2,
    b = (2 G^2 / D)^(1/3) n^(1/3), at most min(3 sqrt(n), n / 3)."""
    n = series.size
    if n < 8:
        return 1
    ranks = mid_ranks(series)
    k_n = max(5, int(math.ceil(math.sqrt(math.log10(n)))))
    m_max = min(n - 1, int(math.ceil(math.sqrt(n))) + k_n)
    b_max = max(1, int(math.ceil(min(3 * math.sqrt(n), n / 3))))
    acov = _autocovariance(ranks, m_max)
    if acov[0] <= 0:
        return 1                          # constant series: no dependence to keep
    rho = np.abs(acov[1:] / acov[0])
    bound = 2 * math.sqrt(math.log10(n) / n)
    small = rho < bound
    m_hat = m_max
    for m in range(0, m_max - k_n + 1):
        if small[m:m + k_n].all():
            m_hat = m
            break
    big_m = min(2 * max(m_hat, 1), m_max)
    k = np.arange(1, big_m + 1)
    s = k / big_m
    lam = np.where(s <= 0.5, 1.0, 2 * (1 - s))
    g_big = 2 * float(np.sum(lam * k * acov[1:big_m + 1]))
    g0 = float(acov[0] + 2 * np.sum(lam * acov[1:big_m + 1]))
    if g0 <= 0:
        return 1
    b = (2 * g_big ** 2 / ((4 / 3) * g0 ** 2)) ** (1 / 3) * n ** (1 / 3)
    return int(min(b_max, max(1, round(b))))


@dataclass
class BlockSide:
    """One group's runs for the block bootstrap: blocks of each run, in time order."""

    blocks: list[np.ndarray]       # each block sorted ascending
    run_of_block: np.ndarray       # run index of each block
    pooled: np.ndarray             # every kept value, sorted
    block_len: int                 # in kept samples (the longest of its runs)
    block_len_samples: int         # in the runs' own samples (times the thinning)
    samples: int                   # kept samples

    @classmethod
    def of(cls, series: list[np.ndarray], strides: list[int] | None = None) -> "BlockSide":
        """Blocks of each run's series (time order, thinned by its stride)."""
        strides = strides or [1] * len(series)
        blocks, owner, lens, lens_samples = [], [], [], []
        for i, (x, stride) in enumerate(zip(series, strides)):
            length = max(block_length(x), -(-x.size // MAX_BLOCKS))
            lens.append(length)
            lens_samples.append(length * stride)
            for start in range(0, x.size, length):
                blocks.append(np.sort(x[start:start + length]))
                owner.append(i)
        pooled = np.sort(np.concatenate(series)) if series else np.empty(0)
        return cls(blocks, np.asarray(owner), pooled, max(lens), max(lens_samples),
                   int(pooled.size))

    def weights(self, resamples: int, rng: np.random.Generator) -> np.ndarray:
        """Block counts of each resample: each run's blocks drawn with replacement, as
        many as it has (stratified by run: a run never lends blocks to another)."""
        nb = len(self.blocks)
        w = np.zeros((resamples, nb), dtype=np.float64)
        rows = np.arange(resamples)[:, None] * nb
        for run in np.unique(self.run_of_block):
            cols = np.flatnonzero(self.run_of_block == run)
            picks = cols[rng.integers(0, cols.size, size=(resamples, cols.size))]
            w += np.bincount((rows + picks).ravel(),
                             minlength=resamples * nb).reshape(resamples, nb)
        return w

    def quantile(self, q: float) -> float:
        return float(self.pooled[quantile_rank(q, self.pooled.size) - 1])

    def bootstrap(self, q: float, w: np.ndarray) -> np.ndarray:
        """The nearest-rank q-quantile of each resample (rows of block counts `w`)."""
        grid = self._grid(q)
        counts = np.array([np.searchsorted(b, grid, "right") for b in self.blocks],
                          dtype=np.float64)
        sizes = np.array([b.size for b in self.blocks], dtype=np.float64)
        below = w @ counts                      # resample's count <= each grid value
        total = w @ sizes
        frac = Fraction(repr(float(q)))
        rank = np.maximum(1, -((-frac.numerator * total.astype(np.int64))
                               // frac.denominator))
        reached = below >= rank[:, None]
        # The first grid value whose count reaches the rank; beyond the grid: its end.
        idx = np.where(reached.any(axis=1), reached.argmax(axis=1), grid.size - 1)
        return grid[idx]

    def _grid(self, q: float) -> np.ndarray:
        """Pooled values around the estimate, wide enough for the resamples' spread:
        +- 8 standard errors of the empirical CDF there (from the block counts)."""
        est = self.quantile(q)
        n = self.pooled.size
        c = np.array([np.searchsorted(b, est, "right") for b in self.blocks], float)
        m = np.array([b.size for b in self.blocks], float)
        p = c.sum() / n
        sd = math.sqrt(float(np.sum((c - p * m) ** 2))) / n
        half = 8 * sd + 4 / n
        lo = max(0, int(math.floor((q - half) * n)) - 1)
        hi = min(n - 1, int(math.ceil((q + half) * n)))
        ranks = np.unique(np.linspace(lo, hi, min(GRID_POINTS, hi - lo + 1)).astype(int))
        return np.unique(self.pooled[ranks])


def block_bootstrap(base: BlockSide, run: BlockSide, seed: int = DEFAULT_SEED,
                    resamples: int = DEFAULT_RESAMPLES) -> list[NoiseResult]:
    """Each quantile's ratio run / base by the block bootstrap (see module doc)."""
    m = len(QUANTILES)
    conf = 1 - FAMILY_ALPHA / m
    rng = np.random.default_rng(seed)
    wa, wb = base.weights(resamples, rng), run.weights(resamples, rng)
    out = []
    for q, label in QUANTILES:
        qa, qb = base.bootstrap(q, wa), run.bootstrap(q, wb)
        pa, pb = base.quantile(q), run.quantile(q)
        diff = qb - qa
        p = float(min(1.0, 2 * min(np.mean(diff <= 0), np.mean(diff >= 0))))
        alpha = (1 - conf) / 2
        ratio = lo = hi = None
        if pa > 0 and np.all(qa > 0):
            ratio = pb / pa
            lo, hi = (float(v) for v in np.quantile(qb / qa, [alpha, 1 - alpha]))
        d_lo, d_hi = np.quantile(diff, [alpha, 1 - alpha])
        excludes = bool(d_lo > 0 or d_hi < 0)
        out.append(NoiseResult(label, ratio, lo, hi, p, None if excludes else False,
                               (base.samples, run.samples), min(1.0, m * p), conf))
    return out


# --- the verdict -----------------------------------------------------------------------

def verdict(test: str, results: list[NoiseResult]) -> tuple[bool | None, str]:
    """(beyond_noise, verdict text) of a row from its quantiles' results."""
    if test == TEST_SINGLE:
        if any(r.beyond_noise is None for r in results):
            return None, VERDICT_SINGLE
        return False, VERDICT_WITHIN
    flags = [r.beyond_noise for r in results if r.beyond_noise is not None]
    if not flags:
        return None, "no verdict (a quantile <= 0 has no ratio)"
    return any(flags), VERDICT_BEYOND if any(flags) else VERDICT_WITHIN


def method_text(seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES) -> str:
    """Both methods, as the compare header states them."""
    m = len(QUANTILES)
    return (METHOD_REPLICATES.format(m=m) + "; "
            + METHOD_SINGLE.format(resamples=resamples, seed=seed, m=m))


def row_method(test: str, seed: int = DEFAULT_SEED,
               resamples: int = DEFAULT_RESAMPLES) -> str:
    m = len(QUANTILES)
    if test == TEST_REPLICATES:
        return METHOD_REPLICATES.format(m=m)
    return METHOD_SINGLE.format(resamples=resamples, seed=seed, m=m)


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson's score interval of a proportion (Wilson, JASA 22, 1927), 95 % by default."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
