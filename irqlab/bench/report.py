"""``irqlab bench report``: `irqlab report` of two big runs, against `irqlab compare` of
the same runs in the same rounds.

Issue 45's goal: a report of two 10 M-sample runs in <= 5 s. The baseline is `irqlab
compare --json` of the same two runs: the one pass over the store, the exact
percentiles and the noise test that a report needs anyway; what the report adds over it
is the tail fits, the plots and the HTML. Each round runs both, each in a fresh child
process (wall time, CPU time and peak memory its own: on a machine shared with other jobs the
CPU seconds are the steadier figure), in an order rotated by one each round so a load
that comes and goes hits both alike; the figures are the medians of the rounds.

Every process runs with compiled bytecode, as an installed package's is (see
irqlab.bench.startup): PYTHONDONTWRITEBYTECODE is emptied and the bytecode goes to a
temporary PYTHONPYCACHEPREFIX written by one round that is not counted. Without it, a
venv installed without bytecode (uv's default) compiles matplotlib at every report
(~1-3 s on this machine, more than any plot).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from irqlab.bench.compare import _irqlab, synthetic_run
from irqlab.store.db import Store

GOAL_S = 5.0                         # issue 45


def bench_report(samples: int = 10_000_000, rounds: int = 3) -> list[dict[str, Any]]:
    """One figure: the median seconds of `irqlab report A B -o FILE` over `rounds`
    against `irqlab compare A B --json` in the same rounds."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.duckdb"
        with Store(db) as st:
            a = synthetic_run(st, "big-a", samples, 1)
            b = synthetic_run(st, "big-b", samples, 2)
        argv = {"report": ["report", str(a), str(b), "--db", str(db), "-o",
                           str(Path(tmp) / "r.html"), "--json"],
                "compare": ["compare", str(a), str(b), "--db", str(db), "--json"]}
        env = {"PYTHONDONTWRITEBYTECODE": "",        # empty = unset (python(1))
               "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        for args in argv.values():                   # writes the bytecode; not counted
            _irqlab(args, env=env)
        got: dict[str, list[dict[str, Any]]] = {name: [] for name in argv}
        order = list(argv)
        for i in range(rounds):
            for name in order[i % 2:] + order[:i % 2]:
                got[name].append(_irqlab(argv[name], env=env))
    ours = [g["seconds"] for g in got["report"]]
    base = [g["seconds"] for g in got["compare"]]
    med, base_med = statistics.median(ours), statistics.median(base)
    cpu = [g["cpu_s"] for g in got["report"]]
    base_cpu = [g["cpu_s"] for g in got["compare"]]
    fig: dict[str, Any] = {
        "name": "report", "value": med, "unit": "s", "samples_per_run": samples,
        "runs": 2, "rounds": rounds, "rounds_s": ours,
        "peak_mib": max(g["peak_mib"] for g in got["report"]),
        "cpu_s": statistics.median(cpu), "cpu_rounds_s": cpu,
        "baseline": base_med, "baseline_rounds_s": base,
        "baseline_cpu_s": statistics.median(base_cpu),
        "baseline_name": "irqlab compare --json of the same two runs",
        "ratio": med / base_med, "goal_s": GOAL_S, "met": bool(med <= GOAL_S)}
    fig["text"] = (f"report of 2 x {samples:,} samples: {med:.2f} s median of {rounds} "
                   f"(min {min(ours):.2f}, max {max(ours):.2f}; CPU {fig['cpu_s']:.2f} s; "
                   f"peak {fig['peak_mib']:.0f} MiB); compare of the same runs "
                   f"{base_med:.2f} s (CPU {fig['baseline_cpu_s']:.2f} s), "
                   f"ratio {fig['ratio']:.2f}; goal <= {GOAL_S:g} s: "
                   f"{'met' if fig['met'] else 'NOT met'}")
    return [fig]
