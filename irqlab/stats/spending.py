"""Group-sequential levels: how much of a test's level each look at growing data may
spend, so that looking after every added run does not inflate the error rate.

Lan & DeMets (Biometrika 70, 1983) spend the level alpha as a function of the
information fraction t (here runs a side / the most runs a side):
- O'Brien-Fleming type: alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) (almost nothing
  early, nearly all of alpha at the last look: the last look keeps a fixed design's
  power; O'Brien & Fleming, Biometrics 35, 1979);
- Pocock type: alpha(t) = alpha ln(1 + (e - 1) t) (evenly; Pocock, Biometrika 64, 1977).

The boundaries b_j (reject at look j when |Z_j| >= b_j) make the probability of a first
crossing at look j under the null equal the level spent there, alpha(t_j) -
alpha(t_{j-1}), for the joint normal law of the looks' statistics (Z_j = S_j / sqrt(I_j)
with independent increments, corr(Z_i, Z_j) = sqrt(t_i / t_j)); the density of the
not-yet-stopped statistic is carried from look to look on a grid (Armitage, McPherson &
Rowe, JRSS A 132, 1969; Jennison & Turnbull, Group Sequential Methods, 2000, ch. 19).
Each boundary is returned as its nominal two-sided p, 2 (1 - Phi(b_j)): a test of any
other statistic (irqlab's t-tests on a few runs) rejects at look j when its own p-value
is below it (the "significance level" approach, Jennison & Turnbull 2000, section 3.8);
that the level then holds is measured by simulation (reports/noise_sim.py), not assumed.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from irqlab.stats.special import normal_cdf, normal_quantile

OBRIEN_FLEMING = "obrien-fleming"
POCOCK = "pocock"
_GRID = 801                    # points of the density grid
_GRID_HALF_WIDTH = 8.0         # +- standard deviations covered by the grid


def spent(t: float, alpha: float, kind: str = OBRIEN_FLEMING) -> float:
    """The level spent by information fraction t (0 < t <= 1)."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    if kind == OBRIEN_FLEMING:
        return float(2 - 2 * normal_cdf(normal_quantile(1 - alpha / 2) / math.sqrt(t)))
    if kind == POCOCK:
        return alpha * math.log(1 + (math.e - 1) * t)
    raise ValueError(f"unknown spending function {kind!r}")


@lru_cache(maxsize=64)
def nominal_levels(information: tuple[float, ...], alpha: float,
                   kind: str = OBRIEN_FLEMING) -> tuple[float, ...]:
    """The nominal two-sided p of each look's boundary; ``information``: each look's
    information (increasing; here runs a side), the last one the most there can be."""
    info = np.asarray(information, float)
    frac = info / info[-1]
    grid = np.linspace(-_GRID_HALF_WIDTH, _GRID_HALF_WIDTH, _GRID)
    step = grid[1] - grid[0]
    # Sub-density of S_j / sqrt(I_j) of the paths not stopped yet, on the grid.
    dens: np.ndarray | None = None
    out: list[float] = []
    prev_spent = 0.0
    for j, t in enumerate(frac):
        if dens is None:
            dens = np.exp(-grid ** 2 / 2) / math.sqrt(2 * math.pi)
        else:
            # Z_j = (sqrt(I_{j-1}) Z_{j-1} + sqrt(I_j - I_{j-1}) e) / sqrt(I_j).
            r = math.sqrt(info[j - 1] / info[j])
            s = math.sqrt(1 - r * r)
            kern = np.exp(-((grid[:, None] - r * grid[None, :]) / s) ** 2 / 2) \
                / (s * math.sqrt(2 * math.pi))
            dens = kern @ (dens * step)
        target = spent(float(t), alpha, kind) - prev_spent
        prev_spent += target
        # The boundary b whose two tails of the current sub-density hold `target`.
        # Mass above / below each grid point: each point's cell [g - step/2, g + step/2]
        # split at the point (a whole cell counted beyond it made every boundary
        # conservative: 4.77 % spent of 5 % in a check by simulation).
        cum = np.cumsum(dens) * step
        upper = cum[-1] - cum + dens * step / 2
        lower = cum - dens * step / 2
        mass_beyond = upper + lower[::-1]               # |z| >= grid point (grid >= 0)
        half = grid >= 0
        g, m = grid[half], mass_beyond[half]
        if target <= 0:
            b = _GRID_HALF_WIDTH
        else:
            i = int(np.searchsorted(-m, -target))       # m decreases along g
            i = min(max(i, 1), g.size - 1)
            # Linear interpolation between the grid points around the target.
            f = (m[i - 1] - target) / (m[i - 1] - m[i]) if m[i - 1] != m[i] else 0.0
            b = float(g[i - 1] + f * (g[i] - g[i - 1]))
        out.append(float(2 * (1 - normal_cdf(b))))
        dens = np.where(np.abs(grid) >= b, 0.0, dens)
    return tuple(out)
