"""`irqlab bench push` and `irqlab bench export`: lab-store and Parquet throughput.

Both run on one synthetic run of N samples (default 10 M) in a temporary DuckDB file,
each against a baseline measured in the same invocation on the same data:
- push: `irqlab push` to a throw-away PostgreSQL server (irqlab.store.pgserver) against
  one COPY of the same rows already formatted as text into the same tables (what the
  server itself takes: the difference is ours);
- export: `irqlab export --parquet` against DuckDB writing the same columns to Parquet
  itself (`COPY … TO … (FORMAT parquet)`).
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

_BATCH = 1_000_000


def _synthetic_run(store: Store, n: int) -> int:
    """A run of ``n`` 1-ms samples with lognormal latencies at 1 GHz ticks."""
    rid = store.create_run("bench-lab", "synthetic", {}, {"run_uuid": None})
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


def bench_export(samples: int = 10_000_000) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    from irqlab.api import SAMPLE_SCHEMA, StoreView

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        with Store(db) as src:
            rid = _synthetic_run(src, samples)
        with StoreView(Store(db, read_only=True)) as view:
            t0 = time.perf_counter()
            with pq.ParquetWriter(Path(tmp) / "ours.parquet", SAMPLE_SCHEMA) as writer:
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


def bench_lab_read(samples: int = 10_000_000) -> list[dict[str, Any]]:
    """Where a lab keeps raw samples (issue 18): PostgreSQL (what push does) against
    Parquet files in a shared directory read by DuckDB (what export writes), on one run.
    Figures: an exact p99.9 over the run's samples (the query compare and check need), and
    the bytes each keeps per sample."""
    import duckdb
    import pyarrow.parquet as pq

    from irqlab.api import SAMPLE_SCHEMA, StoreView
    from irqlab.store.pg import PgStore
    from irqlab.store.pgserver import PgServer

    server = PgServer()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.duckdb"
            url = server.database("lab")
            with Store(db) as src:
                rid = _synthetic_run(src, samples)
                with PgStore(url) as lab:
                    lab_id, _ = lab.push(src, src.resolve(str(rid)), "bench")
            part = Path(tmp) / "samples" / f"run_id={rid}"
            part.mkdir(parents=True)
            with StoreView(Store(db, read_only=True)) as view:
                with pq.ParquetWriter(part / "part-0.parquet", SAMPLE_SCHEMA) as writer:
                    for batch in view.sample_batches(rid):
                        writer.write_batch(batch)
            parquet_bytes = sum(p.stat().st_size for p in part.iterdir())
            with PgStore(url) as lab:
                cur = lab.con.cursor()
                t0 = time.perf_counter()
                pg_p999 = cur.execute(
                    "SELECT percentile_disc(0.999) WITHIN GROUP (ORDER BY entry_tick - "
                    "deadline_tick) FROM samples WHERE run_id = %s", [lab_id]).fetchone()[0]
                pg_s = time.perf_counter() - t0
                pg_bytes = cur.execute("SELECT pg_total_relation_size('samples')"
                                       ).fetchone()[0]
            con = duckdb.connect(config={"autoload_known_extensions": False,
                                         "autoinstall_known_extensions": False})
            t0 = time.perf_counter()
            pq_p999 = con.execute(
                f"SELECT quantile_disc(latency_ns, 0.999) FROM read_parquet("
                f"'{tmp}/samples/*/*.parquet', hive_partitioning = true) "
                f"WHERE run_id = {rid}").fetchone()[0]
            pq_s = time.perf_counter() - t0
            con.close()
    finally:
        server.stop()
    # Ticks are ns here (1 GHz), so both exact answers must agree.
    if int(pg_p999) != int(pq_p999):
        raise RuntimeError(f"lab-read: p99.9 differs: PostgreSQL {pg_p999}, "
                           f"Parquet {pq_p999}")
    return [{"name": "lab-read", "value": samples / pg_s, "unit": "samples/s",
             "samples": samples, "seconds": pg_s, "baseline": samples / pq_s,
             "baseline_name": "DuckDB quantile_disc over the same run exported to Parquet",
             "ratio": pq_s / pg_s, "p999_ns": int(pg_p999),
             "pg_bytes_per_sample": pg_bytes / samples,
             "parquet_bytes_per_sample": parquet_bytes / samples,
             "peak_rss_mib": _peak_rss_mib()}]
