#!/usr/bin/env python3
"""Wall time of a 6-cell matrix over a pool of 3 labgrid places, --parallel 3 against
--parallel 1 (issue 33: the first should take <= 0.5x the second).

A real labgrid coordinator on 127.0.0.1 (a free port, a temporary directory), 3 places
whose boards are QEMU (TCG) running the x86-64 probe at a 10 ms period, as in
tests/integration/test_matrix_pool.py. The runs alternate (1, 3, 1, 3 ...) so a change
in the host's load hits both alike; each goes into a fresh store. Run it alone, under the
emulation lock, on a host that is otherwise idle:

    flock /tmp/irqlab-tcg.lock .venv/bin/python scripts/bench-matrix-pool.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/ helpers

from tests.integration._labgrid_pool import (acquired, local_lab,  # noqa: E402
                                             write_scenario, write_x86_env)

PLACES = {"rig-a": {}, "rig-b": {}, "rig-c": {}}


def one(scn: Path, parallel: int, db: Path, env: dict[str, str]) -> float:
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "matrix", str(scn),
                          "--lg-places", "rig-*", "--parallel", str(parallel),
                          "--format", "json", "--db", str(db)],
                         env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    cells = [ln for ln in res.stdout.splitlines() if '"status": "ok"' in ln]
    if res.returncode != 0 or len(cells) != 6:
        sys.exit(f"--parallel {parallel} failed (exit {res.returncode}, {len(cells)} ok "
                 f"cells): {res.stderr[-2000:]}")
    if any(who is not None for who in acquired(env).values()):
        sys.exit(f"a place stayed acquired after --parallel {parallel}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1, help="pairs of runs (default 1)")
    ap.add_argument("--samples", type=int, default=1000,
                    help="samples a cell at the 10 ms period (default 1000: 10 s; with "
                         "1 s cells the workers' start-up, ~6 s, dominates)")
    args = ap.parse_args()
    from irqlab.runner.machines import MACHINES
    if not MACHINES["x86_64"].probe.exists():
        subprocess.run(["make", "-s", "-C", str(MACHINES["x86_64"].probe.parents[2])],
                       check=True)
    walls: dict[int, list[float]] = {1: [], 3: []}
    with tempfile.TemporaryDirectory(prefix="irqlab-bench-pool-") as tmp, \
            local_lab(PLACES) as env:
        d = Path(tmp)
        scn = write_scenario(d / "pool.toml", write_x86_env(d / "x86.yaml"), "benchpool",
                             samples=args.samples)
        for r in range(args.rounds):
            for parallel in (1, 3):
                wall = one(scn, parallel, d / f"r{r}p{parallel}.duckdb", env)
                walls[parallel].append(wall)
                print(f"round {r + 1}: --parallel {parallel}: {wall:.1f} s "
                      f"(load average {os.getloadavg()[0]:.1f})", flush=True)
    p1, p3 = statistics.median(walls[1]), statistics.median(walls[3])
    print(f"6 cells x {args.samples} samples at 10 ms on 3 places: median --parallel 1 "
          f"{p1:.1f} s, --parallel 3 {p3:.1f} s, ratio {p3 / p1:.2f} "
          f"({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
