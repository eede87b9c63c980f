"""`irqlab bench import` and `irqlab bench compare`: big runs, time and peak memory.

Every command is timed in a child process of its own, so its peak resident memory
(ru_maxrss) is its alone; each against a baseline measured in the same invocation on
the same data:
- import: `irqlab import tscdeadline` of a generated N-line raw-sample log against
  DuckDB's own read_csv of the same file plus its median (what DuckDB itself takes to
  read the text);
- compare: `irqlab compare`, `irqlab report` and `irqlab check` of two synthetic N-sample
  runs against the same commands reading every sample into memory (irqlab before issue
  19; run only up to IN_MEMORY_BASELINE_MAX samples, it needs ~60 bytes per sample).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.samples.record import RECORD_DTYPE
from irqlab.store.db import Store
from irqlab.store.interface import NewRun

_BATCH = 1 << 20
IN_MEMORY_BASELINE_MAX = 30_000_000


def _child(job: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a job of irqlab.bench.child in a child process; its last JSON line (stderr or
    stdout)."""
    proc = subprocess.run([sys.executable, "-m", "irqlab.bench.child", *job],
                          capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=3600)
    for text in (proc.stderr, proc.stdout):
        for line in reversed(text.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
    raise RuntimeError(f"benchmark child failed ({proc.returncode}): "
                       f"{proc.stderr.strip()[-400:]}")


def _irqlab(args: list[str], in_memory: bool = False,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    got = _child(["irqlab", *args], {**(env or {}),
                                     "IRQLAB_BENCH_IN_MEMORY": "1" if in_memory else "0"})
    if got["code"] not in (0, 1):
        raise RuntimeError(f"irqlab {' '.join(args)} exited {got['code']}")
    return got


def write_log(path: Path, lines: int, seed: int = 1) -> int:
    """A tscdeadline_latency log of `lines` 'latency: N' lines (lognormal cycles)."""
    rng = np.random.default_rng(seed)
    with path.open("w") as f:
        for start in range(0, lines, _BATCH):
            k = min(_BATCH, lines - start)
            values = rng.lognormal(np.log(3000.0), 0.3, k).astype(np.int64)
            f.write("".join(f"latency: {v}\n" for v in values.tolist()))
    return path.stat().st_size


def bench_import(lines: int = 10_000_000) -> list[dict[str, Any]]:
    """`irqlab import tscdeadline` against DuckDB read_csv of the same file.

    Peak memory independent of the file's length is shown by importing a quarter of
    the file too (`peak_mib_quarter`)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "tsc.txt"
        size = write_log(log, lines)
        quarter = Path(tmp) / "tsc-quarter.txt"
        write_log(quarter, max(1, lines // 4))
        base = _child(["read-csv", str(log)])
        stored = _child(["csv-table", str(log), str(Path(tmp) / "duck.duckdb")])
        ours = _irqlab(["import", "tscdeadline", str(log), "--tick-hz", "2400000000",
                        "--db", str(Path(tmp) / "a.duckdb"), "--json"])
        small = _irqlab(["import", "tscdeadline", str(quarter), "--tick-hz", "2400000000",
                         "--db", str(Path(tmp) / "b.duckdb"), "--json"])
    return [{"name": "import", "value": lines / ours["seconds"], "unit": "lines/s",
             "lines": lines, "bytes": size, "seconds": ours["seconds"],
             "peak_mib": ours["peak_mib"], "peak_mib_quarter": small["peak_mib"],
             "baseline": lines / base["seconds"],
             "baseline_name": "DuckDB read_csv + quantile_disc(0.5), same file",
             "baseline_seconds": base["seconds"], "baseline_peak_mib": base["peak_mib"],
             "ratio": base["seconds"] / ours["seconds"], "goal": 3_000_000,
             "goal_ratio": 0.5,
             "baseline_store_name": "DuckDB read_csv into a table of a database file "
                                    "(CREATE TABLE AS + CHECKPOINT), same file",
             "baseline_store_seconds": stored["seconds"],
             "ratio_store": stored["seconds"] / ours["seconds"]}]


def synthetic_run(store: Store, name: str, n: int, seed: int) -> int:
    """A run of n 100-us samples at 1 GHz ticks, lognormal latencies, rare spikes."""
    rid = store.create_run(NewRun(name, "synthetic", {"window_ns": 1_000_000_000, "warmup": 1},
                                  {}, status="ok"))
    store.update_run(rid, tick_hz=1_000_000_000, threshold_ns=30_000)
    store.keep_samples_in_files(rid)     # as an import or a fast run keeps them
    rng = np.random.default_rng(seed)

    def batches():
        for start in range(0, n, _BATCH):
            k = min(_BATCH, n - start)
            rec = np.zeros(k, RECORD_DTYPE)
            rec["seq"] = np.arange(start, start + k, dtype=np.uint64)
            rec["deadline_tick"] = rec["seq"] * np.uint64(100_000) + np.uint64(10**12)
            lat = rng.lognormal(np.log(8_000.0), 0.25, k).astype(np.uint64)
            spikes = rng.random(k) < 1e-5
            lat[spikes] += rng.integers(30_000, 3_000_000, int(spikes.sum())).astype(np.uint64)
            rec["entry_tick"] = rec["deadline_tick"] + lat
            yield rec
    with store.transaction():
        store.add_sample_stream(rid, batches())
    return rid


def bench_compare(samples: int = 10_000_000) -> list[dict[str, Any]]:
    """compare, report and check of two `samples`-sample runs: seconds and peak memory,
    against the in-memory path on the same runs (up to IN_MEMORY_BASELINE_MAX)."""
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.duckdb"
        with Store(db) as st:
            a = synthetic_run(st, "big-a", samples, 1)
            b = synthetic_run(st, "big-b", samples, 2)
        commands = {
            "compare": ["compare", str(a), str(b), "--db", str(db), "--json"],
            "report": ["report", str(a), str(b), "--db", str(db), "-o",
                       str(Path(tmp) / "r.html"), "--json"],
            "check": ["check", str(a), "--db", str(db), "--p99.9", "1ms", "--max", "1s",
                      "--json"],
        }
        for name, argv in commands.items():
            ours = _irqlab(argv)
            fig: dict[str, Any] = {"name": f"compare:{name}", "value": ours["seconds"],
                                   "unit": "s", "samples_per_run": samples,
                                   "runs": 1 if name == "check" else 2,
                                   "peak_mib": ours["peak_mib"], "goal_s": 10.0,
                                   "goal_peak_mib": 2048}
            if samples <= IN_MEMORY_BASELINE_MAX:
                base = _irqlab(argv, in_memory=True)
                fig.update(baseline=base["seconds"], baseline_peak_mib=base["peak_mib"],
                           baseline_name="every sample read into memory (before issue 19)",
                           ratio=base["seconds"] / ours["seconds"])
            else:
                # No `baseline` key (the schema wants a number): say why instead.
                fig.update(baseline_name=f"in-memory path skipped above "
                                         f"{IN_MEMORY_BASELINE_MAX} samples")
            figures.append(fig)
    return figures
