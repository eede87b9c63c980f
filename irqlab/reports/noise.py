"""Is a difference between two groups of runs beyond noise? The run is the unit.

Two runs of one configuration differ by more than their samples do (host state, CPU
frequency, caches, placement: Kalibera & Jones, "Rigorous Benchmarking in Reasonable
Time", ISMM 2013, measure this run-level variation and show that it must be replicated
to be judged); and samples within a run are autocorrelated (a noisy second gives a
burst of slow samples). Resampling single samples as if independent (before issue 27) is
pseudo-replication (Hurlbert, Ecological Monographs 54, 1984): two identical runs came
out "beyond noise at p<0.001". So:

**Replicates** (both groups >= 2 runs, `irqlab run --repeat N`): each run gives one
value per quantile, its exact nearest-rank p50 and p99.9 (Hyndman & Fan 1996 def. 1),
and the groups are compared on the logs of these per-run values (the log makes a
multiplicative effect additive and the per-run spread closer to normal). Which t-test
was decided by simulation (issue 45; 2,000 A/A pairs a case, run-level lognormal noise
5 %, AR(1) 0.9 samples with bursts; irqlab.reports.noise_sim): Welch's (Welch,
Biometrika 34, 1947) with the Welch-Satterthwaite degrees of freedom is liberal at
unequal group sizes (3 v 10: 7.7-9.2 % at a nominal 5 %; 2 v 5: 6.6 %, ~15 % when the
2-run side is the noisier one), Student's pooled t is exact when the two groups are one
configuration (then their spreads are equal too) but liberal when the smaller group is
the noisier (3 v 10: 12.7 %). The p-value used is the larger of the two, the interval
the wider (both are centred on the same difference): 1.7-4.0 % in every case simulated,
and ×1.3 found in 79 % of 3 v 3 pairs, 90 % of 3 v 5, 100 % of 5 v 5. Below MIN_RUNS
(3) a side the level could not be held in simulation (2 v 5: 5.2 %): the interval is
shown, the verdict is `unknown`. A group whose values are all equal (rounded to us by an
importer, to a histogram's bucket) would give t = d / 0 and p = 0: each group's spread
is floored at the rounding's own variance, step^2 / 12 (Sheppard 1898), the step being
the largest power of ten dividing every value.

Verdicts per quantile (and per row: `different` if any quantile is, `same` if all are,
else `unknown`): `different` when the simultaneous interval excludes 1; `same` when it
lies inside the equivalence margin, [1/(1+m), 1+m] (two one-sided tests, Schuirmann,
J. Pharmacokin. Biopharm. 15, 1987: each one-sided test at half the interval's
complement, so `same` has the same error bound as `different`); `unknown` when neither
is shown. An interval that excludes 1 but lies inside the margin is `same` (a shift
smaller than what the user said matters). Two quantiles are tested per row, so each
interval is a Bonferroni (Dunn 1961) simultaneous one at 1 - 0.05/2 and each p-value is
Bonferroni-adjusted: the row's `different` has a family-wise error rate <= 5 %.
`--repeat auto` judges the groups after each added pair of runs, from MIN_RUNS to
--max-repeat a side: each quantile's level is spent over those looks by Lan & DeMets'
O'Brien-Fleming-type function (Biometrika 70, 1983; irqlab.stats.spending), so stopping
early does not inflate it and the last look keeps nearly the whole level (an equal
Bonferroni split gave every look 1/8 of it at the default cap: x1.3 found in 78 % of
pairs). The same nominal level makes the look's interval, so `same` (its two one-sided
tests) is judged at the spent level too. That the levels hold for these t-tests on a few
runs, and the power they keep, are measured by simulation (reports/noise_sim.py,
docs/figures.md).

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
quantile's ratio includes 1, beyond_noise is false (even the samples' own variation
explains the difference); otherwise null, never true. The verdict is always `unknown`.

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

from irqlab.stats import quantile_rank, spending
from irqlab.stats.fields import RATIO_FIELDS
from irqlab.stats.special import wilson_interval  # noqa: F401  (noise.wilson_interval)

DEFAULT_SEED = 20_240_601
DEFAULT_RESAMPLES = 2_000
MAX_SAMPLES = 2_000_000      # per run, for the single-run bootstrap
MAX_BLOCKS = 1_024           # per run: bounds the bootstrap's cost (resamples x blocks)
GRID_POINTS = 256            # values around a quantile where resamples are evaluated
FAMILY_ALPHA = 0.05          # the row's family-wise level
TEST_REPLICATES = "run-t"
TEST_SINGLE = "bootstrap"
VERDICT_DIFFERENT = "different"
VERDICT_SAME = "same"
VERDICT_UNKNOWN = "unknown"
VERDICTS = (VERDICT_DIFFERENT, VERDICT_SAME, VERDICT_UNKNOWN)
MIN_RUNS = 3                 # a side, for `different` or `same` (the simulation's floor)
# Equivalence margins of `same`, per quantile label (fractions): the run-to-run spread
# of a quiet host of this kind (../shared/notes/environment.md: p50 20-23 us between
# runs, about +-7 %; p99 28-54 us, about +-30 %), i.e. differences a real-time engineer
# would call noise. A busy host spreads wider (measured here beside four busy agents:
# sd of log p50 8 % a run, of log p99.9 100 %+, docs/figures.md): `same` then needs
# more runs or a wider --margin, and says `unknown` rather than claim it.
DEFAULT_MARGINS: dict[str, float] = {"p50": 0.10, "p99.9": 0.25}
SINGLE_REASON = ("single runs: run-to-run variation unknown (re-run with --repeat 3 or "
                 "--repeat auto); the interval describes the samples within each run")
METHOD_REPLICATES = ("the run is the unit: t-tests on the log of each run's quantile, "
                     "the larger p of Student's and Welch's (Welch 1947), Bonferroni over "
                     "{m} quantiles (family-wise 5 %); `same` when the interval lies "
                     "inside the margin (two one-sided tests, Schuirmann 1987)")
METHOD_SINGLE = ("single runs: block bootstrap of contiguous blocks (Kuensch 1989, "
                 "non-overlapping blocks), block length from the autocorrelation (Politis & "
                 "White 2004), {resamples} resamples, seed {seed}, Bonferroni over {m} "
                 "quantiles; run-to-run variation unknown: never `different` or `same`")
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
    verdict: str = "unknown"          # different, same or unknown (VERDICTS)
    margin: float | None = None       # the equivalence margin `same` was judged against
    reason: str = ""                  # why that verdict, one line

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


def t_pdf(t: float, df: float) -> float:
    """Student's t density."""
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)
                    - 0.5 * math.log(df * math.pi) - (df + 1) / 2 * math.log1p(t * t / df))


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (p > 0.5): Newton's method on t_sf2 (its derivative is
    -2 x the density), safeguarded by a bracket that bisects when a step leaves it;
    ~5 steps where plain bisection took ~40 (the noise simulation calls this 10^4 times)."""
    target, lo, hi = 2 * (1 - p), 0.0, 1.0
    while t_sf2(hi, df) > target:
        lo, hi = hi, hi * 2
    t = (lo + hi) / 2
    for _ in range(100):
        f = t_sf2(t, df) - target
        if f > 0:
            lo = t
        else:
            hi = t
        step = f / (2 * t_pdf(t, df))
        nxt = t + step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2
        if abs(nxt - t) <= 1e-12 * max(1.0, t):
            return nxt
        t = nxt
    return t


# --- replicates: Student's and Welch's t on log per-run quantiles ----------------------

def rounding_step(values: Sequence[float]) -> float:
    """The resolution per-run values were rounded to: the largest power of ten (1 ns to
    1 s) dividing every value when all are whole nanoseconds (an importer's microseconds,
    a tool's rounding), else 0 (not rounded, as far as can be told)."""
    if not all(float(v).is_integer() for v in values):
        return 0.0
    ints = [int(v) for v in values]
    step = 1
    while step < 1_000_000_000 and all(v % (step * 10) == 0 for v in ints):
        step *= 10
    return float(step)


def run_level_ratio(base_q: Sequence[float], run_q: Sequence[float], label: str,
                    m: int = len(QUANTILES), samples: tuple[int, int] = (0, 0),
                    margin: float | None = None, alpha: float | None = None
                    ) -> NoiseResult:
    """One quantile: per-run values of the baseline group and of the other group (>= 2
    each), compared on their logs (see the module doc for the test). ``margin`` (a
    fraction, 0.10 for 10 %) is the equivalence margin of the `same` verdict; ``alpha``
    the two-sided level of this quantile's test (default the family's 5 % split over the m
    quantiles; a look of --repeat auto passes the level spent at it, look_levels). A
    value <= 0 has no log: no ratio, `unknown`."""
    conf = 1 - (FAMILY_ALPHA / m if alpha is None else alpha)
    if min(base_q) <= 0 or min(run_q) <= 0:
        return NoiseResult(label, None, None, None, None, None, samples, None, conf,
                           verdict=VERDICT_UNKNOWN, margin=margin,
                           reason="a value <= 0 has no ratio")
    x, y = np.log(np.asarray(base_q, float)), np.log(np.asarray(run_q, float))
    nx, ny = x.size, y.size
    d = float(y.mean() - x.mean())
    # Rounded values can make a group's spread exactly 0 (t = d / 0): the rounding's own
    # variance, step^2 / 12 (Sheppard 1898), on the log scale at the groups' level, is
    # the least either group's spread can be.
    step = rounding_step(list(base_q) + list(run_q))
    level = math.exp(float(np.concatenate([x, y]).mean()))
    floor = (step / level) ** 2 / 12
    vx, vy = max(float(x.var(ddof=1)), floor), max(float(y.var(ddof=1)), floor)
    se_w = math.sqrt(vx / nx + vy / ny)
    if se_w == 0:
        return NoiseResult(label, math.exp(d), None, None, None, None, samples, None,
                           conf, verdict=VERDICT_UNKNOWN, margin=margin,
                           reason="no spread between runs and no rounding step to "
                                  "bound it: nothing to judge against")
    df_w = (vx / nx + vy / ny) ** 2 / ((vx / nx) ** 2 / (nx - 1) + (vy / ny) ** 2 / (ny - 1))
    pooled = ((nx - 1) * vx + (ny - 1) * vy) / (nx + ny - 2)
    se_s = math.sqrt(pooled * (1 / nx + 1 / ny))
    df_s = nx + ny - 2
    p = max(t_sf2(d / se_w, df_w), t_sf2(d / se_s, df_s))
    tail = 1 - (1 - conf) / 2
    half = max(t_quantile(tail, df_w) * se_w, t_quantile(tail, df_s) * se_s)
    lo, hi = math.exp(d - half), math.exp(d + half)
    excludes = bool(lo > 1 or hi < 1)
    word, reason = _quantile_verdict(label, lo, hi, excludes, margin, min(nx, ny))
    return NoiseResult(label, math.exp(d), lo, hi, p, excludes, samples,
                       min(1.0, m * p), conf, df_w, verdict=word, margin=margin,
                       reason=reason)


def _quantile_verdict(label: str, lo: float, hi: float, excludes: bool,
                      margin: float | None, runs_min: int) -> tuple[str, str]:
    """(verdict, why) of one quantile from its simultaneous interval: `same` when the
    whole interval lies within the margin (two one-sided tests, Schuirmann 1987: each
    at the interval's level), `different` when it excludes 1, else `unknown`."""
    if runs_min < MIN_RUNS:
        return VERDICT_UNKNOWN, (f"{runs_min} runs a side: fewer than {MIN_RUNS} is not "
                                 f"calibrated (re-run with --repeat {MIN_RUNS} or auto)")
    within = margin is not None and lo >= 1 / (1 + margin) and hi <= 1 + margin
    if within:
        shift = " (a shift, but inside it)" if excludes else ""
        return VERDICT_SAME, f"{label} interval ×{lo:.3g}–{hi:.3g} within ±{margin:.0%}{shift}"
    if excludes:
        return VERDICT_DIFFERENT, f"{label} interval ×{lo:.3g}–{hi:.3g} excludes 1"
    if margin is None:
        return VERDICT_UNKNOWN, f"{label} interval ×{lo:.3g}–{hi:.3g} includes 1; no margin"
    return VERDICT_UNKNOWN, (f"{label} interval ×{lo:.3g}–{hi:.3g} includes 1 and reaches "
                             f"past ±{margin:.0%}: more runs would tell")


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


def _autocovariance(x: np.ndarray, max_lag: int, mean: float | None = None) -> np.ndarray:
    """Autocovariances at lags 0..max_lag (biased, divided by n), by FFT, about `mean`
    (default the series' own)."""
    n = x.size
    y = x - (x.mean() if mean is None else mean)
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


BLOCK_SEGMENTS = 4             # contiguous segments a long series' dependence is read from
BLOCK_SEGMENT_LEN = 65_536     # samples each (2^16: lags up to sqrt(n) fit many times)


def block_length(series: np.ndarray) -> int:
    """Politis & White (2004) automatic block length for the circular block bootstrap,
    with Patton, Politis & White's (2009) correction, on the mid-ranks of the series.

    m-hat is the smallest lag after which K_N autocorrelations in a row are below
    2 sqrt(log10(n) / n); M = 2 m-hat; with the flat-top window lambda,
    G = sum lambda(k/M) |k| R(k), g = sum lambda(k/M) R(k) and D = (4/3) g^2,
    b = (2 G^2 / D)^(1/3) n^(1/3), at most min(3 sqrt(n), n / 3).

    A series longer than BLOCK_SEGMENTS x BLOCK_SEGMENT_LEN samples is read from that
    many contiguous segments spread over it (their autocovariances averaged): G and D
    are properties of the dependence, estimated as well from 262,144 samples as from
    millions (with the sampling error of 262,144: tests/unit/reports/test_noise.py
    holds the two within 25 % on AR(1) series), and b is then scaled by the n^(1/3)
    of the whole series. It was one sort and two FFTs of 2 M points a run (compare of
    two 10 M-sample runs: 2.8 of its 4.4 s, issue 45)."""
    n = series.size
    if n < 8:
        return 1
    n_used = n
    if n > BLOCK_SEGMENTS * BLOCK_SEGMENT_LEN:
        starts = np.linspace(0, n - BLOCK_SEGMENT_LEN, BLOCK_SEGMENTS).astype(int)
        segments = [series[s:s + BLOCK_SEGMENT_LEN] for s in starts]
        n_used = BLOCK_SEGMENTS * BLOCK_SEGMENT_LEN
    else:
        segments = [series]
    ranks = mid_ranks(np.concatenate(segments))
    seg_len = segments[0].size
    k_n = max(5, int(math.ceil(math.sqrt(math.log10(n_used)))))
    m_max = min(seg_len - 1, int(math.ceil(math.sqrt(n_used))) + k_n)
    b_max = max(1, int(math.ceil(min(3 * math.sqrt(n), n / 3))))
    mean = float(ranks.mean())
    acov = np.mean([_autocovariance(ranks[i * seg_len:(i + 1) * seg_len], m_max, mean)
                    for i in range(len(segments))], axis=0)
    if acov[0] <= 0:
        return 1                          # constant series: no dependence to keep
    rho = np.abs(acov[1:] / acov[0])
    bound = 2 * math.sqrt(math.log10(n_used) / n_used)
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
        for run in np.unique(self.run_of_block):
            cols = np.flatnonzero(self.run_of_block == run)
            k = cols.size
            # Counted over this run's own columns only (a run's blocks are contiguous:
            # BlockSide.of appends them run by run), not over every block of the side
            # for every run; the same draws as before, so the same resamples.
            picks = rng.integers(0, k, size=(resamples, k))
            picks += (np.arange(resamples) * k)[:, None]
            counts = np.bincount(picks.ravel(), minlength=resamples * k)
            w[:, cols[0]:cols[0] + k] = counts.reshape(resamples, k)
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
                               (base.samples, run.samples), min(1.0, m * p), conf,
                               verdict=VERDICT_UNKNOWN, reason=SINGLE_REASON))
    return out


# --- the verdict -----------------------------------------------------------------------

def row_verdict(results: list[NoiseResult]) -> tuple[str, str]:
    """(verdict, why) of a row from its quantiles': `different` if any quantile is,
    `same` if every one is, else `unknown` (the first undecided quantile says why)."""
    if not results:
        return VERDICT_UNKNOWN, "no quantile to compare"
    different = [r for r in results if r.verdict == VERDICT_DIFFERENT]
    if different:
        return VERDICT_DIFFERENT, "; ".join(r.reason for r in different)
    if all(r.verdict == VERDICT_SAME for r in results):
        return VERDICT_SAME, "; ".join(r.reason for r in results)
    return VERDICT_UNKNOWN, next(r.reason for r in results if r.verdict != VERDICT_SAME)


@dataclass(frozen=True)
class AutoDecision:
    """Where the --repeat auto rule stopped: its row verdict and the runs a side used."""

    verdict: str
    runs: int
    decided: bool          # every quantile `different` or `same` (else the cap was hit)


def auto_looks(max_runs: int) -> int:
    """How many times --repeat auto judges, from MIN_RUNS up to max_runs a side."""
    return max(1, max_runs - MIN_RUNS + 1)


SPENDING = spending.OBRIEN_FLEMING     # chosen by simulation (docs/figures.md)


def look_levels(max_runs: int) -> dict[int, float]:
    """Runs a side -> the two-sided level of each quantile's test when --repeat auto
    judges at that many (MIN_RUNS..max_runs): the family's 5 % split over the quantiles
    (Bonferroni) and each quantile's share spent over the looks (irqlab.stats.spending;
    information grows with the runs a side)."""
    counts = tuple(range(MIN_RUNS, max(MIN_RUNS, max_runs) + 1))
    levels = spending.nominal_levels(tuple(float(n) for n in counts),
                                     FAMILY_ALPHA / len(QUANTILES), SPENDING)
    return dict(zip(counts, levels))


def judge_prefix(base_q: dict[str, Sequence[float]], run_q: dict[str, Sequence[float]],
                 margins: dict[str, float], n: int, max_runs: int) -> list[NoiseResult]:
    """Every quantile judged on the first n runs a side, at the level --repeat auto
    spends at that look (look_levels(max_runs))."""
    alpha = look_levels(max_runs)[n]
    return [run_level_ratio(base_q[label][:n], run_q[label][:n], label,
                            margin=margins.get(label), alpha=alpha)
            for _q, label in QUANTILES if label in base_q and label in run_q]


def decided(results: list[NoiseResult]) -> bool:
    """--repeat auto's stopping rule: every quantile is `different` or `same`."""
    return bool(results) and all(r.verdict != VERDICT_UNKNOWN for r in results)


def auto_decision(base_q: dict[str, Sequence[float]], run_q: dict[str, Sequence[float]],
                  margins: dict[str, float], max_runs: int) -> AutoDecision:
    """The --repeat auto rule replayed on runs already measured (per-run quantiles in
    run order, at least max_runs a side): judge at MIN_RUNS a side, then one more a side
    at a time, until decided or max_runs (irqlab bench noise and noise_sim replay it
    this way; the run flow applies the same rule as the runs arrive, irqlab.suite)."""
    results: list[NoiseResult] = []
    n = MIN_RUNS
    for n in range(MIN_RUNS, max_runs + 1):
        results = judge_prefix(base_q, run_q, margins, n, max_runs)
        if decided(results):
            return AutoDecision(row_verdict(results)[0], n, True)
    return AutoDecision(row_verdict(results)[0] if results else VERDICT_UNKNOWN,
                        n, False)


def auto_judge(groups: list[tuple[str, list[dict[str, Any]]]], rounds: int,
               max_runs: int) -> dict[str, Any]:
    """--repeat auto's judgement after ``rounds`` whole rounds: each group (a name and
    its runs' summaries, in run order) against the first, on the per-run quantiles
    compare uses (RATIO_FIELDS), the level split over the looks. The `auto` object
    run and matrix report: runs, max_repeat, decided (every quantile of every group
    `different` or `same`), looks, spending, verdicts."""

    def quantiles(summaries: list[dict[str, Any]]) -> dict[str, list[float]]:
        return {f.label: [float(s.get(f.key) or 0) for s in summaries[:rounds]]
                for f in RATIO_FIELDS}
    base = quantiles(groups[0][1])
    verdicts, ok = [], rounds >= MIN_RUNS and len(groups) > 1
    for name, summaries in groups[1:]:
        results = (judge_prefix(base, quantiles(summaries), DEFAULT_MARGINS, rounds,
                                max_runs)
                   if rounds >= MIN_RUNS else [])
        verdicts.append({"series": name, "verdict": row_verdict(results)[0]})
        ok = ok and decided(results)
    return {"runs": rounds, "max_repeat": max_runs, "decided": ok,
            "looks": auto_looks(max_runs), "spending": SPENDING, "verdicts": verdicts}


def auto_text(auto: dict[str, Any]) -> str:
    """The line run and matrix print where --repeat auto stopped."""
    words = ", ".join(f"series:{v['series']} {v['verdict']}" for v in auto["verdicts"])
    how = ("every quantile decided" if auto["decided"] else
           f"stopped at --max-repeat {auto['max_repeat']}, not every quantile decided")
    return (f"repeat auto: {auto['runs']} runs each ({how}; level spent over "
            f"{auto['looks']} looks, {auto['spending']}): {words}")


def parse_margins(text: str) -> dict[str, float]:
    """`--margin`: `10%` (every quantile) or `p50=5%,p99.9=20%` (those named; the others
    keep their defaults). A margin is a percentage in (0, 1000]."""
    def pct(v: str) -> float:
        v = v.strip()
        num = v[:-1] if v.endswith("%") else v
        try:
            val = float(num)
        except ValueError:
            raise ValueError(f"margin {v!r} is not a percentage (e.g. 10%)") from None
        if not 0 < val <= 1000 or not math.isfinite(val):
            raise ValueError(f"margin {v!r} must be a percentage above 0 and at most 1000%")
        return val / 100
    labels = [label for _q, label in QUANTILES]
    if "=" not in text:
        return {label: pct(text) for label in labels}
    out = dict(DEFAULT_MARGINS)
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in labels:
            raise ValueError(f"margin for {name.strip()!r}: the compared quantiles are "
                             f"{', '.join(labels)}")
        out[name.strip()] = pct(value)
    return out


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
