"""`irqlab bench push` and `irqlab bench lab`: lab-store throughput.

Each runs on one synthetic run of N samples (default 10 M) in a temporary DuckDB file,
against a baseline measured in the same invocation on the same data:
- push: `irqlab push` to a throw-away PostgreSQL server (irqlab.store.pgserver) against
  one COPY of the same rows already formatted as text into the same tables (what the
  server itself takes: the difference is ours).
`irqlab bench export` (the Python API to Parquet, on the same synthetic run) is
irqlab.bench.export.
"""

from __future__ import annotations

import io
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.samples.record import RECORD_DTYPE
from irqlab.store.db import Store
from irqlab.store.interface import NewRun

_BATCH = 1_000_000


def _synthetic_run(store: Store, n: int) -> int:
    """A run of ``n`` 1-ms samples with lognormal latencies at 1 GHz ticks."""
    rid = store.create_run(NewRun("bench-lab", "synthetic", {}, {"run_uuid": None}))
    store.update_run(rid, tick_hz=1_000_000_000, status="ok")
    rng = np.random.default_rng(7)
    for start in range(0, n, _BATCH):
        k = min(_BATCH, n - start)
        rec = np.zeros(k, RECORD_DTYPE)
        rec["seq"] = np.arange(start, start + k, dtype=np.uint64)
        rec["deadline_tick"] = rec["seq"] * np.uint64(1_000_000)
        rec["entry_tick"] = rec["deadline_tick"] + rng.lognormal(9.5, 0.3, k).astype(
            np.uint64)
        store.add_samples(rid, rec)
    return rid


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_push(samples: int = 10_000_000) -> list[dict[str, Any]]:
    from irqlab.store.pg import PgStore
    from irqlab.store.pgserver import PgServer

    server = PgServer()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            with Store(Path(tmp) / "bench.duckdb") as src:
                rid = _synthetic_run(src, samples)
                row = src.resolve(str(rid))
                with PgStore(server.database("pushed")) as lab:
                    t0 = time.perf_counter()
                    lab.push(src, row, "bench")
                    ours_s = time.perf_counter() - t0
                # Baseline: the same rows, already text, in one COPY (the server's part).
                buf = io.StringIO()
                for batch in src.iter_samples(rid):
                    cols = [batch.column(k).to_numpy().astype(np.uint64).view(np.int64)
                            for k in ("seq", "deadline_tick", "entry_tick", "flags", "cpu")]
                    np.savetxt(buf, np.column_stack([np.full(len(cols[0]), 1), *cols]),
                               fmt="%d", delimiter="\t")
                text = buf.getvalue()
                del buf
                # The same tables and index as the lab store (PgStore creates them).
                with PgStore(server.database("baseline")) as base:
                    t0 = time.perf_counter()
                    with base.con.cursor().copy("COPY samples FROM STDIN") as copy:
                        copy.write(text)
                    base.con.commit()
                    base_s = time.perf_counter() - t0
    finally:
        server.stop()
    return [{"name": "push", "value": samples / ours_s, "unit": "samples/s",
             "samples": samples, "seconds": ours_s, "baseline": samples / base_s,
             "baseline_name": "one COPY of the same rows pre-formatted as text into the "
                              "same tables",
             "ratio": base_s / ours_s, "peak_rss_mib": _peak_rss_mib()}]


def bench_lab_read(samples: int = 10_000_000) -> list[dict[str, Any]]:
    """Where a lab keeps raw samples (issue 18): one run pushed twice, into PostgreSQL's
    samples table (push) and as a Parquet file in a shared directory (push
    --samples-dir), then read back by the lab store's own reader. Figures: push time, an
    exact p99.9 over the run (the figure compare and check need) and bytes per sample."""
    from irqlab.store.pg import PgStore
    from irqlab.store.pgserver import PgServer

    server = PgServer()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.duckdb"
            shared = Path(tmp) / "shared"
            shared.mkdir()
            table_url, file_url = server.database("table"), server.database("file")
            with Store(db) as src:
                rid = _synthetic_run(src, samples)
                row = src.resolve(str(rid))
                t0 = time.perf_counter()
                with PgStore(table_url) as lab:
                    table_id, _ = lab.push(src, row, "bench")
                push_table_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                with PgStore(file_url) as lab:
                    file_id, _ = lab.push(src, row, "bench", shared)
                push_file_s = time.perf_counter() - t0
            file_bytes = sum(p.stat().st_size for p in shared.iterdir())
            with PgStore(table_url) as lab:
                t0 = time.perf_counter()
                table_p999 = lab.sample_figures(table_id, [0.999]).quantile_tick[0]
                table_s = time.perf_counter() - t0
                with lab.con.cursor() as cur:
                    cur.execute("SELECT pg_total_relation_size('samples')")
                    table_bytes = cur.fetchone()[0]
            with PgStore(file_url) as lab:
                t0 = time.perf_counter()
                file_p999 = lab.sample_figures(file_id, [0.999]).quantile_tick[0]
                file_s = time.perf_counter() - t0
    finally:
        server.stop()
    if table_p999 != file_p999:
        raise RuntimeError(f"lab-read: p99.9 differs: table {table_p999}, file {file_p999}")
    return [{"name": "lab-read", "value": samples / file_s, "unit": "samples/s",
             "samples": samples, "seconds": file_s, "baseline": samples / table_s,
             "baseline_name": "the same exact p99.9 from PostgreSQL's samples table",
             "ratio": table_s / file_s, "p999_ns": int(file_p999),
             "push_file_s": push_file_s, "push_table_s": push_table_s,
             "pg_bytes_per_sample": table_bytes / samples,
             "parquet_bytes_per_sample": file_bytes / samples,
             "peak_rss_mib": _peak_rss_mib()}]
