#!/usr/bin/env python3
"""Detection figures of `irqlab trend`'s change points (irqlab.stats.changepoint) on the
issue-34 synthetic series: N series of 60 runs, p99.9 of 20 us with lognormal run-to-run
noise (sigma of the log 0.05), one step of +20 % at run 40, and N series without a step.

Prints the hit rate (a change point at 40 +- 1 with p <= P_MAX), the false-positive rate
(any change point in a series without a step), each with its 95 % Wilson interval.
Seeds 0 .. N-1, the same series and seeds tests/unit/stats/test_changepoint.py uses
for its first 50 (it uses fewer permutations to stay fast).

    .venv/bin/python scripts/changepoint_figures.py [--series 1000] [--permutations 199]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from irqlab.stats.changepoint import find_change_points  # noqa: E402


def series(seed: int, step: bool) -> np.ndarray:
    rng = np.random.default_rng(10_000 + seed)      # as tests/unit/stats/test_changepoint.py
    level = np.full(60, 20_000.0)
    if step:
        level[40:] *= 1.2
    return level * np.exp(rng.normal(0.0, 0.05, 60))


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (Wilson, JASA 22, 1927)."""
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--permutations", type=int, default=199)
    ap.add_argument("--p-max", type=float, default=0.01)
    args = ap.parse_args()
    n, r, p_max = args.series, args.permutations, args.p_max
    started = time.monotonic()
    hits = sum(any(abs(c.index - 40) <= 1 and c.p_value <= p_max
                   for c in find_change_points(series(s, True), permutations=r, seed=s,
                                               p_max=p_max))
               for s in range(n))
    false = sum(bool(find_change_points(series(s, False), permutations=r, seed=s,
                                        p_max=p_max)) for s in range(n))
    lo, hi = wilson(hits, n)
    print(f"step +20 % at run 40: found at 40 +- 1 with p <= {p_max}: {hits}/{n} = "
          f"{hits / n:.1%} (95 % CI {lo:.1%}-{hi:.1%})")
    lo, hi = wilson(false, n)
    print(f"no step: series with a change point: {false}/{n} = {false / n:.1%} "
          f"(95 % CI {lo:.1%}-{hi:.1%})")
    print(f"({r} permutations, {time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
