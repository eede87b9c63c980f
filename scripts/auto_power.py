#!/usr/bin/env python3
"""`--repeat auto` by simulation (issue 45): the A/A `different` share and the x1.3
detection of the auto rule (irqlab.reports.noise.auto_decision, replayed by
noise_sim.auto_shares) with the level spent over its looks by each rule: the
O'Brien-Fleming- or Pocock-type Lan-DeMets spending (irqlab.stats.spending), or the
equal Bonferroni split used before 2026-11-29.

    .venv/bin/python scripts/auto_power.py [--rule obrien-fleming|pocock|bonferroni]
        [--cap 6] [--pairs 1000] [--run-sd 0.08]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from irqlab.reports import noise  # noqa: E402
from irqlab.reports.noise_sim import SimConfig, auto_shares  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rule", default="obrien-fleming",
                    choices=("obrien-fleming", "pocock", "bonferroni"))
    ap.add_argument("--cap", type=int, default=6, help="--max-repeat replayed")
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--run-sd", type=float, default=0.08,
                    help="sd of the log run-level factor (0.08: this busy host's p50)")
    args = ap.parse_args()
    if args.rule == "bonferroni":
        looks = noise.auto_looks(args.cap)
        alpha = noise.FAMILY_ALPHA / len(noise.QUANTILES) / looks
        noise.look_levels = lambda cap: {n: alpha for n in range(noise.MIN_RUNS, cap + 1)}
    else:
        noise.SPENDING = args.rule
    t0 = time.monotonic()
    base = SimConfig(run_sd=args.run_sd)
    for name, other in (("A/A", base), ("A/B x1.3", SimConfig(run_sd=args.run_sd, shift=1.3))):
        counts, used = auto_shares(np.random.default_rng(45_000 + args.cap), args.pairs,
                                   args.cap, base, other)
        lo, hi = noise.wilson_interval(counts["different"], args.pairs)
        print(f"{args.rule}, cap {args.cap}, run sd {args.run_sd}: {name} different "
              f"{counts['different']}/{args.pairs} = {counts['different'] / args.pairs:.1%} "
              f"(95 % {lo:.1%}-{hi:.1%}), same {counts['same']}, runs a side used: median "
              f"{statistics.median(used):g}, mean {np.mean(used):.2f}")
    print(f"{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
