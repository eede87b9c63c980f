"""Synthetic latencies of known tail, for the extreme-value tests: a lognormal body and,
in a fraction `frac` of the samples drawn at random, a generalised Pareto excess above
the threshold u (shape xi, scale sigma): P(X > x) = frac (1 + xi (x - u) / sigma)^(-1/xi)
for x > u exactly (body samples above u are folded below it)."""

from __future__ import annotations

import math

import numpy as np

MEDIAN_NS = 20_000.0
U_NS = 40_000.0
SIGMA_NS = 5_000.0


def synthetic(rng: np.random.Generator, n: int, xi: float = 0.2, frac: float = 0.01,
              tail_scale: float = 1.0) -> np.ndarray:
    body = rng.lognormal(math.log(MEDIAN_NS), 0.3, n)
    over = body > U_NS
    body[over] = U_NS - (body[over] - U_NS) % (U_NS - MEDIAN_NS) - 1
    tail = rng.random(n) < frac
    sigma = SIGMA_NS * tail_scale
    body[tail] = U_NS + sigma / xi * ((1 - rng.random(int(tail.sum()))) ** -xi - 1)
    return body


def true_p(x_ns: float, xi: float = 0.2, frac: float = 0.01) -> float:
    return frac * (1 + xi * (x_ns - U_NS) / SIGMA_NS) ** (-1 / xi)


def true_x(p: float, xi: float = 0.2, frac: float = 0.01) -> float:
    return U_NS + SIGMA_NS / xi * ((p / frac) ** -xi - 1)
