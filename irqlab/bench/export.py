"""``irqlab bench`` export: the Python API (irqlab.api) writing a run's samples to Parquet.

Its synthetic run is irqlab.bench.lab's (push, lab-read), the same N samples.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from irqlab.api import SAMPLE_SCHEMA, StoreView
from irqlab.bench.lab import _peak_rss_mib, _synthetic_run
from irqlab.store.db import Store
from irqlab.store.parquet import samples_writer


def bench_export(samples: int = 10_000_000) -> list[dict[str, Any]]:
    """Export speed of the Python API: one synthetic run's samples read through
    StoreView.sample_batches into Parquet, against DuckDB's own COPY TO of the same
    columns from the same file."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        with Store(db) as src:
            rid = _synthetic_run(src, samples)
        with StoreView(Store(db, read_only=True)) as view:
            t0 = time.perf_counter()
            with samples_writer(Path(tmp) / "ours.parquet", SAMPLE_SCHEMA) as writer:
                for batch in view.sample_batches(rid):
                    writer.write_batch(batch)
            ours_s = time.perf_counter() - t0
        with Store(db, read_only=True) as src:
            t0 = time.perf_counter()
            src.con.execute(
                f"COPY (SELECT run_id, seq, cpu, deadline_tick, "
                f"entry_tick - deadline_tick AS latency_tick, flags FROM samples "
                f"WHERE run_id = {rid} ORDER BY seq) TO '{tmp}/duckdb.parquet' "
                f"(FORMAT parquet)")
            base_s = time.perf_counter() - t0
    return [{"name": "export", "value": samples / ours_s, "unit": "samples/s",
             "samples": samples, "seconds": ours_s, "baseline": samples / base_s,
             "baseline_name": "DuckDB COPY TO parquet of the same columns (ticks)",
             "ratio": base_s / ours_s, "peak_rss_mib": _peak_rss_mib()}]
