"""Distribution functions the statistics need, without scipy (a dependency of 40 MB for
four functions): chi-square tails, the two-sample Kolmogorov-Smirnov p-value, the exact
binomial test, Wilson's interval of a proportion and the standard normal CDF and
quantile."""

from __future__ import annotations

import math

import numpy as np


def gamma_q(a: float, x: float) -> float:
    """Regularised upper incomplete gamma Q(a, x): the series below a + 1, the continued
    fraction above (Press et al., Numerical Recipes, 3rd ed. 2007, section 6.2)."""
    if x <= 0:
        return 1.0
    lead = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(1000):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(lead))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return min(1.0, math.exp(lead) * h)


def chi2_sf(stat: float, df: int) -> float:
    """P(chi-square with df degrees of freedom >= stat)."""
    return gamma_q(df / 2, stat / 2)


def kolmogorov_sf(lam: float) -> float:
    """P(K > lam) of the Kolmogorov distribution: 2 sum (-1)^(j-1) exp(-2 j^2 lam^2)."""
    if lam < 0.2:
        return 1.0
    j = np.arange(1, 101)
    return float(min(1.0, max(0.0, 2 * np.sum((-1.0) ** (j - 1) * np.exp(-2 * j * j * lam * lam)))))


def ks_two_sample_p(a: np.ndarray, b: np.ndarray) -> float:
    """Asymptotic p-value of the two-sample Kolmogorov-Smirnov statistic, with Stephens'
    small-sample correction of lambda (Stephens, JRSS B 32, 1970)."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    both = np.concatenate([a, b])
    d = float(np.max(np.abs(np.searchsorted(a, both, "right") / a.size
                            - np.searchsorted(b, both, "right") / b.size)))
    ne = a.size * b.size / (a.size + b.size)
    return kolmogorov_sf((math.sqrt(ne) + 0.12 + 0.11 / math.sqrt(ne)) * d)


EXACT_BINOMIAL_MAX = 5_000     # above: the normal approximation (n p q is large)


def binom_two_sided_p(k: int, n: int, p: float) -> float:
    """Exact two-sided binomial test: the probability of every count no more likely
    than k (the "minimum likelihood" p-value); above EXACT_BINOMIAL_MAX trials the
    normal approximation with a continuity correction (the exact sum took 0.1 s a call
    at 200,000 trials)."""
    if n == 0:
        return 1.0
    if n > EXACT_BINOMIAL_MAX:
        sd = math.sqrt(n * p * (1 - p))
        if sd == 0:
            return 1.0 if k == round(n * p) else 0.0
        z = max(0.0, abs(k - n * p) - 0.5) / sd
        return min(1.0, math.erfc(z / math.sqrt(2)))
    ks = np.arange(n + 1)
    logpmf = (math.lgamma(n + 1) - np.array([math.lgamma(i + 1) for i in ks])
              - np.array([math.lgamma(n - i + 1) for i in ks])
              + ks * math.log(p) + (n - ks) * math.log1p(-p))
    pmf = np.exp(logpmf - logpmf.max())
    at = pmf[k]
    return float(min(1.0, pmf[pmf <= at * (1 + 1e-7)].sum() / pmf.sum()))


def wilson_interval(successes: float, trials: float,
                    z: float = 1.959964) -> tuple[float, float]:
    """Wilson's score interval of a proportion (Wilson, JASA 22, 1927), 95 % by default;
    real-valued counts are allowed (effective counts of clustered data)."""
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p) / trials + z * z / (4 * trials * trials))) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def normal_cdf(x: float) -> float:
    """The standard normal CDF, from erf."""
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def normal_quantile(p: float) -> float:
    """The standard normal quantile of p (0 < p < 1): bisection on normal_cdf, to the
    last bit within 200 halvings of [-40, 40] (a few calls a look or a test)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if normal_cdf(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
