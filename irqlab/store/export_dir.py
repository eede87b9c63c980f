"""An `irqlab export` directory opened as a read-only store (`--db DIR`): list, show,
compare, report, check, trend and serve read the exported runs as they read a DuckDB file.

The directory (docs/formats.md, "export"): ``runs.parquet`` (one row per run, the API's
runs table), ``summaries.parquet`` (every summary key) and
``samples/run_id=N/*.parquet`` (raw samples in ns). The samples are read where they lie:
a small DuckDB catalog in a temporary directory holds the runs' rows and a view over the
Parquet files in place of the samples table, and the DuckDB store opens that catalog
read-only, so every read (percentiles, noise, plots, the runs page's SQL) is the DuckDB
store's own. Exported samples are in ns, so each run's tick rate is 1 GHz here; its
original rate, its provenance facts and the directory are kept in its metadata
(``export``). An export keeps no windows, histograms, params or tags: those read empty.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from irqlab.store.db import Store
from irqlab.store.errors import StoreError

_NS_PER_S = 1_000_000_000
# runs.parquet's own columns (irqlab.api.StoreView.runs); the others are provenance facts.
_RUN_COLUMNS = ("run_id", "name", "target", "status", "accel", "emulated", "started_at",
                "tick_hz", "period_ns", "suite", "source")


class ExportStore(Store):
    """The runs of an `irqlab export` directory, read-only (irqlab.store.interface)."""

    def __init__(self, directory: str | os.PathLike, read_only: bool = False) -> None:
        folder = Path(directory).expanduser()
        if not read_only:
            raise StoreError(f"{folder} is an `irqlab export` directory, which is read "
                             f"only: write runs to a database file (--db FILE)")
        self._catalog_dir = tempfile.TemporaryDirectory(prefix="irqlab-export-")
        catalog = Path(self._catalog_dir.name) / "catalog.duckdb"
        try:
            _write_catalog(folder, catalog)
            super().__init__(catalog, read_only=True)
        except BaseException:
            self._catalog_dir.cleanup()
            raise
        self.path = folder                 # what messages name

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._catalog_dir.cleanup()


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _write_catalog(folder: Path, catalog: Path) -> None:
    """The catalog: the runs of ``folder`` as rows, its samples as a view."""
    import duckdb

    runs_file, sums_file = folder / "runs.parquet", folder / "summaries.parquet"
    try:
        con = duckdb.connect()
        runs = _records(con, runs_file)
        sums = {r["run_id"]: r for r in _records(con, sums_file)} if sums_file.is_file() \
            else {}
        con.close()
    except duckdb.Error as exc:
        raise StoreError(f"{folder} is not a readable irqlab export ({exc}); pass "
                         f"--db DIR of `irqlab export --parquet DIR`") from None
    with Store(catalog) as store:
        for run in runs:
            store.con.execute(
                "INSERT INTO runs (run_id, name, target, accel, emulated, status, "
                "started_at, tick_hz, period_ns, threshold_ns, params, metadata, summary, "
                "kind, source, tags, suite) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?, ?, ?)",
                [run["run_id"], run["name"], run["target"], run["accel"], run["emulated"],
                 run["status"], run["started_at"], _NS_PER_S, run["period_ns"],
                 (sums.get(run["run_id"]) or {}).get("threshold_ns"), "{}",
                 json.dumps(_metadata(folder, run)), json.dumps(_summary(sums, run)),
                 "latency", run["source"] or "irqlab", "{}", run["suite"]])
        if any((folder / "samples").glob("run_id=*/*.parquet")):
            pattern = _sql_text(str(folder / "samples" / "run_id=*" / "*.parquet"))
            store.con.execute("DROP TABLE samples")
            # ns as ticks at 1 GHz: entry = deadline + latency, the u64 counters' shape.
            store.con.execute(
                "CREATE VIEW samples AS SELECT CAST(run_id AS BIGINT) AS run_id, seq, "
                "CAST(deadline_ns AS UBIGINT) AS deadline_tick, "
                "CAST(deadline_ns + latency_ns AS UBIGINT) AS entry_tick, flags, cpu "
                f"FROM read_parquet({pattern}, hive_partitioning = true)")


def _records(con: Any, path: Path) -> list[dict[str, Any]]:
    cur = con.execute("SELECT * FROM read_parquet(?)", [str(path)])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _metadata(folder: Path, run: dict[str, Any]) -> dict[str, Any]:
    """The run's metadata as far as the export keeps it: the host's facts (``host.*``,
    as text: the export flattens every fact to text) where show and compare look for
    them, every fact and the original tick rate under ``export``."""
    facts = {k: v for k, v in run.items() if k not in _RUN_COLUMNS and v is not None}
    host = {k.split(".", 1)[1]: v for k, v in facts.items() if k.startswith("host.")}
    return {**({"host": host} if host else {}),
            "export": {"directory": str(folder), "tick_hz": run["tick_hz"], "facts": facts}}


def _summary(sums: dict[int, dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    """The stored summary (summaries.parquet) with the run's own keys (run_id, name ...)
    every summary line carries (docs/formats.md section 4)."""
    row = sums.get(run["run_id"]) or {}
    own = {k: run[k] for k in ("run_id", "name", "target", "accel", "emulated", "status")}
    arch = run.get("run.arch")
    return {**own, **({"arch": arch} if arch else {}),
            **{k: v for k, v in row.items() if k != "run_id" and v is not None}}
