#!/usr/bin/env python3
"""Store size of a long `irqlab monitor` over time (issue 33's retention figure).

Starts `irqlab monitor` (default: native target on CPU 1, 1 ms, 60 s windows,
--keep-raw 5m) on a fresh store in a temporary directory, prints once a minute the
store's size (DuckDB file + its sample files) and the raw samples stored, stops it
with SIGTERM after --minutes, then checks that every sample above the threshold is
still stored (windows' above_threshold sum == stored samples above the threshold).

    .venv/bin/python scripts/monitor_store_size.py --minutes 30

Not a test (it takes as long as it is asked to); run it once for a figure.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def tree_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a directory (0 if absent)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += (Path(root) / f).stat().st_size
            except FileNotFoundError:
                pass
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--keep-raw", default="5m")
    ap.add_argument("--window", default="60s")
    ap.add_argument("--period", default="1ms")
    ap.add_argument("--threshold", default="50us")
    ap.add_argument("--target-args", default="--target native --cpus 1",
                    help="the target and its options (default: native on CPU 1)")
    ap.add_argument("--dir", default=None, help="where the store goes (default: a temp dir)")
    args = ap.parse_args()

    work = Path(args.dir or tempfile.mkdtemp(prefix="irqlab-monitor-size-"))
    db = work / "monitor.duckdb"
    irqlab = Path(sys.executable).with_name("irqlab")
    cmd = [str(irqlab), "monitor", *args.target_args.split(), "--period", args.period,
           "--window", args.window, "--keep-raw", args.keep_raw, "--threshold",
           args.threshold, "--quiet", "--db", str(db)]
    print("# " + " ".join(cmd), flush=True)
    print("# minute  store_MiB  db_MiB  files_MiB  files", flush=True)
    log = open(work / "monitor.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    start = time.monotonic()
    try:
        minute = 0
        while time.monotonic() - start < args.minutes * 60 and proc.poll() is None:
            time.sleep(max(0.0, start + (minute + 1) * 60 - time.monotonic()))
            minute += 1
            samples_dir = db.with_name(db.name + ".samples")
            files = sum(1 for _ in samples_dir.rglob("*.parquet")) \
                if samples_dir.is_dir() else 0
            db_b = tree_bytes(db) + tree_bytes(db.with_name(db.name + ".wal"))
            files_b = tree_bytes(samples_dir)
            print(f"{minute:8d}  {(db_b + files_b) / 2**20:9.2f}  {db_b / 2**20:6.2f}  "
                  f"{files_b / 2**20:9.2f}  {files:5d}", flush=True)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
        log.close()
    print(f"# monitor exit code {code}", flush=True)
    return check_above(db)


def check_above(db: Path) -> int:
    """Every above-threshold sample of the monitor's run is still stored."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from irqlab.store import Store
    from irqlab.store.retention import latencies_tick

    with Store(db) as store:
        run = store.runs()[-1]
        windows = store.windows(run.run_id)
        above_windows = sum(int(w["above_threshold"] or 0) for w in windows)
        stored = above_stored = 0
        threshold_tick = run.threshold_ns * run.tick_hz // 1_000_000_000
        for batch in store.iter_samples(run.run_id):
            stored += batch.num_rows
            above_stored += int((latencies_tick(batch) > threshold_tick).sum())
        total = sum(int(w["samples"] or 0) for w in windows)
        print(f"# run {run.run_id} {run.status}: {len(windows)} windows, {total} samples "
              f"measured, {stored} raw samples stored; above threshold: {above_windows} "
              f"counted, {above_stored} stored; retention: "
              f"{run.metadata.get('retention')}", flush=True)
    return 0 if above_windows == above_stored else 1


if __name__ == "__main__":
    sys.exit(main())
