"""``irqlab bench ingest``: samples/s through ring -> stats -> store, with a synthetic
writer in the same process standing in for the probe (goal >= 20 M/s, issue 19)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.samples.ring import RingReader
from irqlab.samples.synthetic import SyntheticRing
from irqlab.stats import RunStats
from irqlab.store.interface import NewRun


def bench_ingest(total: int = 20_000_000, batch: int = 1_000_000) -> list[dict[str, Any]]:
    """End-to-end host ingest rate with a lossless reader keeping up: into sample files
    (how a run at this rate keeps its samples, measure.run), and into the samples table
    (how it did before schema v4) as the baseline, in the same process."""
    files_s = _ingest_seconds(total, batch, files=True)
    table_s = _ingest_seconds(total, batch, files=False)
    return [{"name": "ingest", "value": total / files_s, "unit": "samples/s",
             "samples": total, "goal": 20_000_000,       # issue 19: ring -> stats -> store
             "baseline": total / table_s,
             "baseline_name": "the same flow into the DuckDB samples table",
             "ratio": table_s / files_s}]


def _ingest_seconds(total: int, batch: int, files: bool) -> float:
    """Seconds spent reading, computing statistics and storing `total` samples (the
    synthetic writer's time excluded)."""
    from irqlab.store import Store   # DuckDB: only when a bench runs, not for the parser

    ring = SyntheticRing(capacity=1 << 21)
    reader = RingReader(ring.path)
    rng = np.random.default_rng(1)
    stats = RunStats(tick_hz=1_000_000_000, threshold_tick=30_000,
                     window_tick=10_000_000_000, warmup_windows=1)
    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "bench.duckdb") as store:
            rid = store.create_run(NewRun("bench-ingest", "synthetic", {}, {}))
            if files:
                store.keep_samples_in_files(rid)
            written = 0
            work_s = 0.0
            while written < total:
                n = min(batch, total - written)
                deadline = (np.arange(written, written + n, dtype=np.uint64) * 1_000_000)
                latency = rng.lognormal(9.5, 0.3, n).astype(np.uint64)
                ring.write(deadline, deadline + latency)
                written += n
                t0 = time.perf_counter()
                got = reader.poll()
                stats.add(got.deadline_tick, got.latency_tick)
                store.add_samples(rid, got.records)
                work_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            _, summary = stats.finish()
            store.finish_run(rid, "ok", None)    # as the run flow: its last files land
            work_s += time.perf_counter() - t0
            stored = store.sample_count(rid)
    reader.close()
    ring.close()
    if reader.lost or stored != total or summary.samples != total:
        raise RuntimeError(f"ingest bench lost data: lost={reader.lost} stored={stored}")
    return work_s
