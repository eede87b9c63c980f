#!/usr/bin/env python3
"""`irqlab trend` under run-level drift (issue 45): change points claimed in series with
no change but AR(1) drift of the log values (sd 5 %, coefficient 0.3 and 0.5, 40 runs),
and what is found of a real x1.2 step at run 20 (40 runs, drift 0.3) and of a staircase
of two x1.2 steps at runs 20 and 40 (60 runs, drift 0.3), through
irqlab.stats.changepoint.find_with_exchangeability, the function trend calls.

    .venv/bin/python scripts/drift_figures.py [--series 500] [--steps 150]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from irqlab.stats.changepoint import find_with_exchangeability  # noqa: E402
from irqlab.stats.special import wilson_interval  # noqa: E402


def ar_runs(rng: np.random.Generator, n: int, phi: float, sd: float = 0.05) -> np.ndarray:
    """n run values of 20 us whose log is a stationary AR(1) of marginal sd ``sd``."""
    x = np.empty(n)
    x[0] = rng.normal() * sd
    for i in range(1, n):
        x[i] = phi * x[i - 1] + rng.normal() * sd * math.sqrt(1 - phi ** 2)
    return 20_000 * np.exp(x)


def share(hits: int, n: int) -> str:
    lo, hi = wilson_interval(hits, n)
    return f"{hits}/{n} ({hits / n:.1%}, 95 % {lo:.1%}-{hi:.1%})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=500)
    ap.add_argument("--steps", type=int, default=150)
    args = ap.parse_args()
    t0 = time.monotonic()
    for phi in (0.3, 0.5):
        rng = np.random.default_rng(int(phi * 10) + 1)
        changed = no_verdict = 0
        for i in range(args.series):
            cps, ex = find_with_exchangeability(ar_runs(rng, 40, phi), seed=i)
            changed += bool(cps)
            no_verdict += ex.drift and not cps
        print(f"no change, drift {phi}: a change in {share(changed, args.series)}; "
              f"drift: no verdict in {no_verdict}")
    for name, n, cuts in (("one x1.2 step", 40, (20,)), ("staircase x1.2 x1.2", 60, (20, 40))):
        rng = np.random.default_rng(9 + len(cuts))
        found = wrong = no_verdict = 0
        for i in range(args.steps):
            x = ar_runs(rng, n, 0.3)
            for c in cuts:
                x[c:] *= 1.2
            cps, ex = find_with_exchangeability(x, seed=i)
            found += all(any(abs(c.index - w) <= 2 for c in cps) for w in cuts)
            wrong += any(all(abs(c.index - w) > 2 for w in cuts) for c in cps)
            no_verdict += ex.drift and not cps
        print(f"{name}, drift 0.3: every step found in {share(found, args.steps)}; "
              f"a change elsewhere in {wrong}; drift: no verdict in {no_verdict}")
    print(f"{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
