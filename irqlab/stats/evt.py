"""The tail beyond the data: peaks over a threshold with a generalised Pareto tail.

Measurement-based probabilistic timing analysis (Cucu-Grosjean et al., ECRTS 2012;
MBPTA-CV, Abella et al., ACM TECS 16, 2017) estimates how often a latency rarer than
anything measured would occur, from the measured tail, with the checks that make the
extrapolation defensible. irqlab's version, for one run's latencies in time order:

1. **Threshold** u: the largest of the candidate upper fractions (2 % of the samples
   down to 0.01 %, at least MIN_EXCEEDANCES above it) whose fit passes every check
   with a goodness-of-fit p >= SELECT_P, else the passing one that fits best; none
   passing is a refusal (the checks of the largest are shown).
2. **Fit**: the excesses y = x - u follow a generalised Pareto distribution (Pickands,
   Ann. Statist. 3, 1975; Balkema & de Haan 1974), S(y) = (1 + xi y / sigma)^(-1/xi),
   fitted by maximum likelihood through Grimshaw's one-dimensional profile
   (Technometrics 35, 1993); the rate zeta = k / n of exceedances is binomial.
   P(X > x) = zeta S(x - u) for x > u; below u the empirical share.
3. **Checks**, each a named test with its p-value (MBPTA's i.i.d. and fit tests):
   - independence: Ljung-Box (Biometrika 65, 1978) on the exceedance indicator, lags
     1-10; dependence does not refuse by itself: exceedances come in bursts in latency
     data, so the extremal index theta is estimated (the intervals estimator, Ferro &
     Segers, JRSS B 65, 2003) and every likelihood is multiplied by theta (Fawcett &
     Walshaw, Extremes 10, 2007: clustered exceedances carry the information of theta k
     independent ones), which widens every interval; theta k below MIN_CLUSTERS refuses;
   - identical distribution: the exceedance counts of the two halves (a binomial test)
     and their excesses (two-sample Kolmogorov-Smirnov, asymptotic p); either below
     ALPHA_CHECK refuses (the tail moved during the run);
   - goodness of fit: Pearson's chi-square of the excesses in GOF_BINS bins of equal
     fitted probability, GOF_BINS - 3 degrees of freedom (two fitted parameters).
4. **Intervals**: profile likelihood (Coles, An Introduction to Statistical Modeling of
   Extreme Values, Springer 2001, section 2.6.6 and 4.3.4): the exceedance probability
   p at latency x is a parameter of the model (sigma follows from xi, zeta and p), the
   log likelihood is maximised over the others for each p, and the 95 % interval is the
   set of p whose profile is within chi-square(1, 0.95) / 2 of the maximum. The pWCET
   at probability p (the latency exceeded with that probability per sample) is
   profiled the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from irqlab.stats.special import (binom_two_sided_p, chi2_sf, ks_two_sample_p,
                                  wilson_interval)

CANDIDATE_FRACTIONS = (0.02, 0.01, 0.005, 0.002, 0.001, 0.0005, 0.0002, 0.0001)
MIN_EXCEEDANCES = 50
MIN_CLUSTERS = 20
ALPHA_CHECK = 0.01          # a check fails below this p (one per check, stated)
# A threshold is taken at once only when its fit's chi-square p is at least this: a
# threshold inside the body passes a 1 % check too often (15 of 200 synthetic seeds,
# whose intervals then covered 53 %); otherwise the passing candidate that fits best.
SELECT_P = 0.10
GOF_BINS = 10
LJUNG_BOX_LAGS = 10
CHI2_1_95 = 3.841458820694124   # chi-square(1) 95 % point: the profile interval's cut
XI_GRID = np.linspace(-0.45, 1.2, 166)
METHOD = ("peaks over threshold, generalised Pareto fit by maximum likelihood, profile "
          "likelihood 95 % intervals, likelihood scaled by the extremal index (Coles 2001; "
          "Ferro & Segers 2003; Fawcett & Walshaw 2007); MBPTA: Cucu-Grosjean et al. "
          "2012, Abella et al. 2017")


@dataclass
class Check:
    """One validity check: its test, p-value and whether it passed."""

    name: str
    test: str
    p_value: float | None
    passed: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "test": self.test, "p_value": self.p_value,
                "passed": self.passed, "detail": self.detail}


@dataclass
class TailFit:
    """A fitted tail, or a refusal (``refused`` says why; the checks say which)."""

    n: int
    threshold_ns: float
    exceedances: int
    xi: float
    sigma_ns: float
    theta: float                    # extremal index (1: no clustering)
    excesses: np.ndarray = field(repr=False)
    sample: TailSample = field(repr=False)     # what was fitted
    checks: list[Check] = field(default_factory=list)
    refused: str | None = None
    table: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def zeta(self) -> float:
        return self.exceedances / self.n

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "threshold_ns": self.threshold_ns,
                "exceedances": self.exceedances, "xi": self.xi, "sigma_ns": self.sigma_ns,
                "extremal_index": self.theta, "refused": self.refused}


# --- the generalised Pareto likelihood -------------------------------------------------

def gpd_loglik(y: np.ndarray, xi: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Log likelihood of excesses y (1-D) at each (xi, sigma) pair (broadcast arrays of
    one shape); -inf outside the support."""
    xi = np.asarray(xi, float)[..., None]
    sigma = np.asarray(sigma, float)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = 1 + xi * y / sigma
        small = np.abs(xi) < 1e-9
        body = np.where(small, y / sigma, (1 + 1 / np.where(small, 1, xi)) *
                        np.log(np.where(z > 0, z, 1)))
        ll = -y.size * np.log(sigma[..., 0]) - body.sum(axis=-1)
        bad = (sigma[..., 0] <= 0) | ~np.isfinite(sigma[..., 0]) | np.any(z <= 0, axis=-1)
    return np.where(bad, -np.inf, ll)


def gpd_mle(y: np.ndarray) -> tuple[float, float]:
    """(xi, sigma) maximising the likelihood of excesses y > 0: Grimshaw's profile over
    t = xi / sigma, for which xi(t) = mean(log(1 + t y)) and
    l(t) = -k log(xi(t) / t) - k (1 + xi(t)); a log-spaced grid on both sides of 0, then
    golden-section refinement of the best bracket."""
    k, ymax, ybar = y.size, float(y.max()), float(y.mean())
    values, weights = distinct(y)

    def prof(t: float) -> float:
        if abs(t) < 1e-12 / ybar:
            return -k * math.log(ybar) - k          # the exponential limit
        if 1 + t * ymax <= 0:
            return -math.inf
        xi = float(np.dot(weights, np.log1p(t * values))) / k
        sigma = xi / t
        if sigma <= 0:
            return -math.inf
        return -k * math.log(sigma) - k * (1 + xi)

    pos = np.logspace(-6, 3, 37) / ybar
    neg = -np.logspace(-6, 0, 25)[::-1] / ymax * (1 - 1e-9)
    ts = np.concatenate([neg, [0.0], pos])
    vals = np.array([prof(float(t)) for t in ts])
    i = int(np.argmax(vals))
    lo, hi = ts[max(0, i - 1)], ts[min(ts.size - 1, i + 1)]
    g = (math.sqrt(5) - 1) / 2
    a, b = lo + (1 - g) * (hi - lo), lo + g * (hi - lo)
    fa, fb = prof(a), prof(b)
    for _ in range(80):
        if hi - lo <= 1e-7 * max(abs(a), abs(b), 1e-12 / ybar):
            break                       # t to 7 digits: the likelihood is flat there
        if fa < fb:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = prof(b)
        else:
            hi, b, fb = b, a, fa
            a = lo + (1 - g) * (hi - lo)
            fa = prof(a)
    t = (a + b) / 2
    if prof(t) < vals[i]:
        t = float(ts[i])
    if abs(t) < 1e-12 / ybar:
        return 0.0, ybar
    xi = float(np.dot(weights, np.log1p(t * values))) / k
    return xi, xi / t


def distinct(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, counts) of y when it repeats values (latencies in whole ns or ticks do:
    a 10M-sample run's 200,000 top excesses hold ~15,000 distinct values), so a sum of
    f(y) is a weighted sum over the distinct ones (exact); else y with weights 1."""
    values, counts = np.unique(y, return_counts=True)
    if values.size > 0.7 * y.size:
        return y, np.ones(y.size)
    return values, counts.astype(np.float64)


def gpd_sf(y: np.ndarray | float, xi: float, sigma: float) -> np.ndarray:
    """S(y) = P(Y > y) of the generalised Pareto distribution."""
    y = np.asarray(y, float)
    if abs(xi) < 1e-9:
        return np.exp(-y / sigma)
    z = np.maximum(1 + xi * y / sigma, 0)
    with np.errstate(divide="ignore"):
        return np.where(z > 0, z ** (-1 / xi), 0.0)


def gpd_isf(s: float, xi: float, sigma: float) -> float:
    """The y with S(y) = s."""
    if abs(xi) < 1e-9:
        return -sigma * math.log(s)
    return sigma / xi * (s ** -xi - 1)


# --- the checks -------------------------------------------------------------------------

def ljung_box_times(times: np.ndarray, n: int, lags: int = LJUNG_BOX_LAGS) -> float:
    """p-value of the Ljung-Box Q over lags 1..lags (chi-square, lags df) of the 0/1 series of length n whose ones are at ``times`` (ascending).
    The autocovariance of an indicator at lag h comes from its ones alone: the pairs of
    ones h apart (k log k for k ones, not a pass over all n samples a lag)."""
    k = times.size
    if k == 0 or k == n or n <= lags + 1:
        return 1.0
    mean = k / n
    denom = k * (1 - mean) ** 2 + (n - k) * mean ** 2       # sum of (x - mean)^2
    q = 0.0
    for h in range(1, lags + 1):
        m = n - h
        both = int(np.count_nonzero(np.isin(times + h, times, assume_unique=True)))
        ones_a = k - int(np.count_nonzero(times >= m))        # ones among x[:m]
        ones_b = k - int(np.count_nonzero(times < h))          # ones among x[h:]
        # sum over i < m of (x_i - mean)(x_{i+h} - mean)
        cross = both - mean * (ones_a + ones_b) + m * mean * mean
        r = cross / denom
        q += r * r / m
    return chi2_sf(n * (n + 2) * q, lags)


def extremal_index(times: np.ndarray) -> float:
    """Ferro & Segers' (2003) intervals estimator of the extremal index from the sample
    positions of the exceedances (their eq. 4, the bias-corrected form when any
    inter-exceedance time exceeds 2)."""
    t = np.diff(np.asarray(times, float))
    if t.size < 2:
        return 1.0
    if t.max() <= 2:
        theta = 2 * t.sum() ** 2 / (t.size * np.sum(t * t))
    else:
        theta = 2 * np.sum(t - 1) ** 2 / (t.size * np.sum((t - 1) * (t - 2)))
    return float(min(1.0, max(1e-6, theta)))


def _chi2_gof(y: np.ndarray, xi: float, sigma: float) -> float:
    """Pearson's chi-square p of the excesses in GOF_BINS bins of equal fitted
    probability (GOF_BINS - 3 df)."""
    edges = [gpd_isf(1 - i / GOF_BINS, xi, sigma) for i in range(1, GOF_BINS)]
    counts = np.bincount(np.searchsorted(np.asarray(edges), y, "right"),
                         minlength=GOF_BINS)
    expected = y.size / GOF_BINS
    stat = float(np.sum((counts - expected) ** 2) / expected)
    return chi2_sf(stat, GOF_BINS - 3)


# --- fitting ---------------------------------------------------------------------------

def top_count(n: int) -> int:
    """How many of n samples a fit looks at: those above the highest candidate
    threshold and that threshold itself."""
    return int(round(CANDIDATE_FRACTIONS[0] * n)) + 1


@dataclass
class TailSample:
    """What a fit reads of n latencies in time order: the top_count(n) largest (ascending)
    with their positions, and the count above a lower latency (``count_above``: asked
    only for an exceedance below the kept values, e.g. `irqlab tail --at` deep in the
    body)."""

    n: int
    top_ns: np.ndarray              # float64, ascending
    positions: np.ndarray           # int64, each top value's index in the sequence
    count_above: Callable[[float], int] = field(repr=False)

    @classmethod
    def of(cls, latency_ns: np.ndarray) -> "TailSample":
        """The sample of latencies in memory (time order)."""
        x = np.asarray(latency_ns, float)
        k = min(x.size, top_count(x.size))
        idx = np.argpartition(x, x.size - k)[x.size - k:] if k else np.empty(0, int)
        idx = idx[np.argsort(x[idx], kind="stable")]
        srt: list[np.ndarray] = []

        def count_above(v: float) -> int:
            if not srt:
                srt.append(np.sort(x))
            return int(x.size - np.searchsorted(srt[0], v, "right"))
        return cls(x.size, x[idx], idx.astype(np.int64), count_above)

    def above(self, v: float) -> int:
        """How many of the n samples are above v (exact)."""
        if self.top_ns.size and v >= self.top_ns[0]:
            return int(self.top_ns.size - np.searchsorted(self.top_ns, v, "right"))
        return self.count_above(v)

    def quantile(self, q: float) -> float:
        """The nearest-rank q quantile (from the kept values when it is among them)."""
        rank = min(self.n - 1, int(math.ceil(q * self.n)) - 1)
        i = rank - (self.n - self.top_ns.size)
        if i < 0:
            raise ValueError(f"quantile {q} is below the {self.top_ns.size} kept values")
        return float(self.top_ns[i])


def fit_tail(latency_ns: np.ndarray) -> TailFit:
    """The tail fit of one run's latencies (time order) with its checks (module doc)."""
    return fit_sample(TailSample.of(latency_ns))


def fit_sample(sample: TailSample) -> TailFit:
    """The tail fit of a TailSample with its checks (module doc)."""
    n, top = sample.n, sample.top_ns
    if n < MIN_EXCEEDANCES / CANDIDATE_FRACTIONS[0]:
        return _refusal(sample, f"{n} samples: a tail fit needs at least "
                                f"{int(MIN_EXCEEDANCES / CANDIDATE_FRACTIONS[0]):,}")
    tried: list[TailFit] = []
    passing: list[TailFit] = []
    for frac in CANDIDATE_FRACTIONS:
        k_target = int(round(frac * n))
        if k_target < MIN_EXCEEDANCES:
            break
        u = float(top[top.size - k_target - 1])      # the sorted sample's [n - k - 1]
        above = top > u
        k = int(above.sum())
        if k < MIN_EXCEEDANCES or u <= 0:
            continue
        fit = _fit_at(sample, u, above)
        tried.append(fit)
        if fit.refused is None:
            if fit.checks[-1].p_value is not None and fit.checks[-1].p_value >= SELECT_P:
                return fit
            passing.append(fit)
    if passing:
        return max(passing, key=lambda f: f.checks[-1].p_value or 0.0)
    if not tried:
        return _refusal(sample, "too many equal values at the top to place a threshold")
    return tried[0]


def _refusal(sample: TailSample, why: str) -> TailFit:
    return TailFit(sample.n, math.nan, 0, math.nan, math.nan, 1.0, np.empty(0), sample,
                   [], why)


def _fit_at(sample: TailSample, u: float, above: np.ndarray) -> TailFit:
    """The fit and checks at threshold u (``above``: which kept values exceed it)."""
    n = sample.n
    order = np.argsort(sample.positions[above], kind="stable")
    times = sample.positions[above][order]          # exceedances in time order
    y = sample.top_ns[above][order] - u
    k = y.size
    xi, sigma = gpd_mle(y)
    theta = extremal_index(times)
    checks = []
    p_lb = ljung_box_times(times, n)
    checks.append(Check("independence", "Ljung-Box on the exceedance indicator, lags "
                        f"1-{LJUNG_BOX_LAGS}", p_lb, theta * k >= MIN_CLUSTERS,
                        f"extremal index {theta:.2f}: ~{theta * k:,.0f} independent "
                        f"clusters of {k:,} exceedances" + (
                            "; intervals widened by it" if theta < 1 else "")))
    half = n // 2
    first = times < half
    k1 = int(first.sum())
    p_rate = binom_two_sided_p(k1, k, half / n)
    y1, y2 = y[first], y[~first]
    p_ks = ks_two_sample_p(y1, y2) if min(y1.size, y2.size) >= 5 else None
    checks.append(Check("identical distribution (rate)", "binomial test of the halves' "
                        "exceedance counts", p_rate, p_rate >= ALPHA_CHECK,
                        f"{k1:,} and {k - k1:,} exceedances in the two halves"))
    checks.append(Check("identical distribution (shape)", "two-sample Kolmogorov-Smirnov "
                        "of the halves' excesses", p_ks,
                        p_ks is None or p_ks >= ALPHA_CHECK))
    p_gof = _chi2_gof(y, xi, sigma)
    checks.append(Check("goodness of fit", f"Pearson chi-square, {GOF_BINS} bins of equal "
                        f"fitted probability, {GOF_BINS - 3} df", p_gof,
                        p_gof >= ALPHA_CHECK))
    failed = [c.name for c in checks if not c.passed]
    refused = f"{', '.join(failed)} failed" if failed else None
    return TailFit(n, u, k, xi, sigma, theta, y, sample, checks, refused)


# --- profile likelihood intervals -------------------------------------------------------

def _zeta_grid(fit: TailFit) -> tuple[np.ndarray, np.ndarray]:
    """Rates around k/n (+- 6 standard errors of the theta-scaled binomial) and their
    scaled binomial log likelihoods."""
    k, n, th = fit.exceedances, fit.n, fit.theta
    z0 = k / n
    se = math.sqrt(z0 * (1 - z0) / (n * th))
    zs = np.linspace(max(z0 - 6 * se, z0 * 0.05), min(z0 + 6 * se, 1 - 1e-12), 61)
    ll = th * (k * np.log(zs) + (n - k) * np.log1p(-zs))
    return zs, ll


def _log_sum_table(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """F(c) = sum log(1 + c y) on a grid of c from just above -1 / max(y) to large c:
    the only data-dependent part of the GPD likelihood at xi / sigma = c, so a profile
    over (xi, s) pairs is interpolation instead of a pass over the excesses each."""
    ymax, ybar = float(y.max()), float(y.mean())
    neg = -(1 - np.logspace(-10, 0, 800, endpoint=False)[::-1]) / ymax
    pos = np.logspace(-10, 4, 1600) / ybar
    c = np.concatenate([np.sort(neg), [0.0], pos])
    values, weights = distinct(y)
    f = np.empty(c.size)
    step = max(1, 10_000_000 // max(1, values.size))      # ~80 MB a block
    for i in range(0, c.size, step):
        f[i:i + step] = np.log1p(c[i:i + step, None] * values[None, :]) @ weights
    return c, f


def _profile_s(fit: TailFit, y0: float, log_s: np.ndarray) -> np.ndarray:
    """max over xi of the (theta-scaled) GPD log likelihood with S(y0) = s, for each
    log s: sigma follows as xi y0 / (s^-xi - 1) (y0 / -log s at xi = 0)."""
    if fit.table is None:
        fit.table = _log_sum_table(fit.excesses)
    c_grid, f_grid = fit.table
    k, total_y = fit.exceedances, float(fit.excesses.sum())
    ymax = float(fit.excesses.max())
    xi = XI_GRID[:, None]
    s = np.exp(log_s)[None, :]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        expo = np.abs(xi) < 1e-9
        sig = np.where(expo, y0 / -np.log(s), xi * y0 / (s ** -xi - 1))
        c = xi / sig
        valid = (sig > 0) & np.isfinite(sig) & (c > c_grid[0]) & (c < c_grid[-1]) \
            & (1 + c * ymax > 0)
        f = np.interp(np.where(valid, c, 0.0), c_grid, f_grid)
        ll = np.where(expo, -k * np.log(sig) - total_y / sig,
                      -k * np.log(sig) - (1 + 1 / np.where(expo, 1.0, xi)) * f)
    ll = np.where(valid, ll, -np.inf)
    return fit.theta * ll.max(axis=0)


def _interval(values: np.ndarray, prof: np.ndarray) -> tuple[float, float, float]:
    """(estimate, low, high) from a profile on a grid: the maximum and the ends of the
    set within CHI2_1_95 / 2 of it (linear interpolation at the crossings)."""
    i = int(np.argmax(prof))
    cut = prof[i] - CHI2_1_95 / 2
    inside = np.flatnonzero(prof >= cut)
    lo_i, hi_i = inside[0], inside[-1]

    def cross(a: int, b: int) -> float:
        if not (0 <= b < values.size) or not np.isfinite(prof[b]):
            return float(values[a])
        f = (prof[a] - cut) / (prof[a] - prof[b]) if prof[a] != prof[b] else 0.0
        return float(values[a] + f * (values[b] - values[a]))
    return float(values[i]), cross(lo_i, lo_i - 1), cross(hi_i, hi_i + 1)


def exceedance(fit: TailFit, x_ns: float) -> tuple[float, float, float]:
    """(p, low, high): the per-sample probability of a latency above x_ns, with its 95 %
    profile-likelihood interval (x_ns <= the threshold: the empirical share, Wilson)."""
    n = fit.n
    if x_ns <= fit.threshold_ns:
        c = fit.sample.above(x_ns)
        return (c / n, *wilson_interval(c * fit.theta, n * fit.theta))
    y0 = x_ns - fit.threshold_ns
    s_hat = float(gpd_sf(y0, fit.xi, fit.sigma_ns))
    centre = math.log(max(s_hat, 1e-300))
    log_s = np.linspace(centre - 12, min(centre + 12, -1e-9), 400)
    ls_prof = _profile_s(fit, y0, log_s)
    zs, lz = _zeta_grid(fit)
    # p = zeta s: profile over zeta of the binomial plus the GPD profile at s = p / zeta.
    log_p = np.log(zs[len(zs) // 2]) + log_s
    total = np.full(log_p.size, -np.inf)
    for z, l_z in zip(zs, lz):
        ls = log_p - math.log(z)
        ok = (ls >= log_s[0]) & (ls <= log_s[-1])
        v = np.full(log_p.size, -np.inf)
        v[ok] = np.interp(ls[ok], log_s, ls_prof) + l_z
        total = np.maximum(total, v)
    est, lo, hi = _interval(log_p, total)
    return fit.zeta * s_hat, math.exp(lo), math.exp(hi)


def pwcet(fit: TailFit, p: float) -> tuple[float, float, float]:
    """(latency, low, high) in ns exceeded with per-sample probability p: the estimate
    from the fit, the interval where the exceedance interval's ends cross p."""
    if p >= fit.zeta:
        q = fit.sample.quantile(1 - p)
        return q, q, q
    est = fit.threshold_ns + gpd_isf(p / fit.zeta, fit.xi, fit.sigma_ns)
    lo = _solve(fit, p, est, upper_end=False)
    hi = _solve(fit, p, est, upper_end=True)
    return est, lo, hi


def _solve(fit: TailFit, p: float, est: float, upper_end: bool) -> float:
    """The latency where the exceedance interval's upper end (upper_end: the pWCET's
    upper bound) or lower end equals p, by bisection on log(x - u)."""
    u = fit.threshold_ns
    idx = 2 if upper_end else 1

    def f(x: float) -> float:
        return math.log(exceedance(fit, x)[idx]) - math.log(p)

    a = b = max(est - u, 1.0)
    step = 2.0
    if upper_end:
        while f(u + b) > 0 and b < 1e15:
            a, b = b, b * step
        if b >= 1e15:
            return math.inf
    else:
        while f(u + a) < 0 and a > 1e-3:
            a, b = a / step, a
    for _ in range(40):
        m = math.sqrt(a * b)
        if f(u + m) > 0:
            a = m
        else:
            b = m
        if b / a < 1.001:
            break
    return u + math.sqrt(a * b)


def samples_for_width(fit: TailFit, low: float, high: float, width: float) -> int | None:
    """Samples in all for an exceedance interval of high / low <= width: the log
    width shrinks as 1 / sqrt(n) (asymptotic normality of the maximum likelihood)."""
    if low <= 0 or high <= 0 or width <= 1:
        return None
    now = math.log(high / low)
    want = math.log(width)
    return int(math.ceil(fit.n * (now / want) ** 2)) if now > want else fit.n
