"""DuckDB-backed run store.

DuckDB is embedded (one file, no server), stores the raw samples column-wise and compressed,
and answers quantiles in SQL, which later reports and ad-hoc user queries rely on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import duckdb
import numpy as np
import pyarrow as pa

from irqlab.store.schema import MIGRATIONS, SCHEMA_VERSION

RUN_STATUSES = ("running", "ok", "failed", "interrupted")


def _utcnow() -> dt.datetime:
    """Naive UTC timestamp (the schema stores UTC in TIMESTAMP columns)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class StoreError(Exception):
    """The database cannot be used as asked; the message says why and what to do."""


def default_db_path() -> Path:
    """``$IRQLAB_DB``, else ``$XDG_DATA_HOME/irqlab/irqlab.duckdb`` (~/.local/share/...)."""
    env = os.environ.get("IRQLAB_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "irqlab" / "irqlab.duckdb"


@dataclass
class RunRow:
    """One row of ``runs`` with JSON columns decoded."""

    run_id: int
    name: str
    target: str
    arch: str | None
    accel: str | None
    emulated: bool | None
    status: str
    started_at: dt.datetime
    ended_at: dt.datetime | None
    tick_hz: int | None
    period_ns: int | None
    threshold_ns: int | None
    message: str | None
    params: dict[str, Any]
    metadata: dict[str, Any]
    summary: dict[str, Any] | None
    kind: str = "latency"
    source: str = "irqlab"
    tags: dict[str, str] = field(default_factory=dict)
    suite: str | None = None
    cell: dict[str, Any] | None = None


_RUN_COLUMNS = ("run_id, name, target, arch, accel, emulated, status, started_at, ended_at, "
                "tick_hz, period_ns, threshold_ns, message, params, metadata, summary, "
                "kind, source, tags, suite, cell")
_JSON_COLUMNS = (13, 14, 15, 18, 20)


def _row(raw: tuple) -> RunRow:
    vals = list(raw)
    for i in _JSON_COLUMNS:
        vals[i] = json.loads(vals[i]) if vals[i] is not None else None
    for i in (13, 14, 18):
        vals[i] = vals[i] or {}
    return RunRow(*vals)


class _Rows:
    """A fully fetched result."""

    def __init__(self, rows: list[tuple], description: Any) -> None:
        self.rows = rows
        self.description = description

    def fetchone(self) -> tuple | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple]:
        return self.rows


class Store:
    """A DuckDB file holding runs; open with ``Store(path)``, close with ``close()``."""

    def __init__(self, path: str | os.PathLike, read_only: bool = False) -> None:
        self.path = Path(path)
        if read_only and not self.path.exists():
            raise StoreError(f"no database at {self.path}: run `irqlab run` first or pass "
                             f"--db PATH to the database you used")
        if not read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create {self.path.parent}: {exc.strerror}; "
                                 f"pass --db PATH to a writable place") from exc
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}; if another irqlab "
                             f"is running on it, wait for it or use --db OTHER_PATH") from exc
        except duckdb.Error as exc:
            raise StoreError(f"{self.path} is not a usable irqlab database ({exc}); "
                             f"pass --db PATH to another file") from exc
        if read_only:
            self._check_version()
        else:
            self._migrate()

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _query(self, sql: str, params: list[Any] | None = None) -> "_Rows":
        """Run a statement and fetch it completely.

        DuckDB keeps a connection busy until a result is fully fetched; a half-read
        ``fetchone()`` would block the next query, so every result is drained here.
        """
        cur = self.con.execute(sql, params or [])
        rows = cur.fetchall() if cur.description else []
        return _Rows(rows, cur.description)

    # -- schema -----------------------------------------------------------------------
    def _version(self) -> int | None:
        try:
            row = self._query("SELECT value FROM meta WHERE key = 'schema_version'"
                                   ).fetchone()
        except duckdb.CatalogException:
            return None
        return int(row[0]) if row else None

    def _check_version(self) -> None:
        ver = self._version()
        if ver is None:
            raise StoreError(f"{self.path} is not an irqlab database (no schema version); "
                             f"pass --db PATH to the right file")
        if ver > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema v{ver}, newer than this irqlab "
                             f"(v{SCHEMA_VERSION}): upgrade irqlab")

    def _migrate(self) -> None:
        """Bring the file to SCHEMA_VERSION, one version at a time, in one transaction."""
        ver = self._version()
        if ver is not None and ver > SCHEMA_VERSION:
            self._check_version()
        if ver is None:
            tables = self._query("SELECT count(*) FROM information_schema.tables"
                                 ).fetchone()[0]
            if tables:
                raise StoreError(f"{self.path} already holds tables that are not irqlab's; "
                                 f"pass --db PATH to a new file")
            ver = 0
        if ver == SCHEMA_VERSION:
            return
        self.con.execute("BEGIN TRANSACTION")
        try:
            for v in range(ver + 1, SCHEMA_VERSION + 1):
                for stmt in MIGRATIONS[v]:
                    self.con.execute(stmt)
            self.con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                             [str(SCHEMA_VERSION)])
            self.con.execute("COMMIT")
        except duckdb.Error as exc:
            self.con.execute("ROLLBACK")
            raise StoreError(f"cannot upgrade {self.path} from schema v{ver}: {exc}") from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All-or-nothing writes (an import either lands whole or not at all)."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    # -- writing ----------------------------------------------------------------------
    def create_run(self, name: str, target: str, params: dict[str, Any],
                   metadata: dict[str, Any], *, kind: str = "latency",
                   source: str = "irqlab", tags: dict[str, str] | None = None,
                   suite: str | None = None, cell: dict[str, Any] | None = None,
                   status: str = "running", started_at: dt.datetime | None = None) -> int:
        """Insert a run (status ``running`` unless told) and return its id."""
        row = self._query(
            "INSERT INTO runs (name, target, status, started_at, params, metadata, kind, "
            "source, tags, suite, cell) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "RETURNING run_id",
            [name, target, status, started_at or _utcnow(), json.dumps(params),
             json.dumps(metadata), kind, source, json.dumps(tags or {}), suite,
             None if cell is None else json.dumps(cell)]).fetchone()
        return int(row[0])

    def update_run(self, run_id: int, **fields: Any) -> None:
        """Set columns of a run; dict values are stored as JSON."""
        if not fields:
            return
        cols, vals = [], []
        for key, val in fields.items():
            cols.append(f"{key} = ?")
            vals.append(json.dumps(val) if isinstance(val, dict) else val)
        vals.append(run_id)
        self._query(f"UPDATE runs SET {', '.join(cols)} WHERE run_id = ?", vals)

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any] | None,
                   message: str | None = None) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"bad run status {status!r}")
        self.update_run(run_id, status=status, summary=summary, message=message,
                        ended_at=_utcnow())

    def add_windows(self, run_id: int, windows: list[dict[str, Any]]) -> None:
        """Insert window rows (dicts with the window JSON keys)."""
        if not windows:
            return
        self.con.executemany(
            "INSERT INTO windows (run_id, idx, start_s, samples, mean_ns, stddev_ns, min_ns, "
            "max_ns, above_threshold, global_min_ns, global_max_ns, extra) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [[run_id, w["index"], w["start_s"], w["samples"], w["mean_ns"], w["stddev_ns"],
              w["min_ns"], w["max_ns"], w["above_threshold"], w["global_min_ns"],
              w["global_max_ns"], json.dumps(w["extra"]) if w.get("extra") else None]
             for w in windows])

    def add_histogram(self, run_id: int, series: str,
                      buckets: list[tuple[int, int | None, int]]) -> None:
        """Store ``(lower_ns, upper_ns, count)`` buckets; upper_ns None = overflow."""
        rows = [[run_id, series, lo, hi, n] for lo, hi, n in buckets if n]
        if rows:
            self.con.executemany("INSERT INTO histograms VALUES (?, ?, ?, ?, ?)", rows)

    def add_samples(self, run_id: int, records: np.ndarray) -> None:
        """Append raw records (RECORD_DTYPE array) losslessly."""
        if len(records) == 0:
            return
        table = pa.table({
            "run_id": pa.array(np.full(len(records), run_id, dtype=np.int64)),
            "seq": records["seq"], "deadline_tick": records["deadline_tick"],
            "entry_tick": records["entry_tick"], "flags": records["flags"],
            "cpu": records["cpu"],
        })
        self.con.register("_irqlab_batch", table)
        try:
            self._query("INSERT INTO samples SELECT * FROM _irqlab_batch")
        finally:
            self.con.unregister("_irqlab_batch")

    # -- reading ----------------------------------------------------------------------
    def runs(self) -> list[RunRow]:
        rows = self._query(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY run_id").fetchall()
        return [_row(r) for r in rows]

    def resolve(self, ref: str) -> RunRow:
        """A run by id, or the latest run of that name."""
        if ref.isdigit():
            raw = self._query(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?",
                                   [int(ref)]).fetchone()
            if raw:
                return _row(raw)
        raw = self._query(f"SELECT {_RUN_COLUMNS} FROM runs WHERE name = ? "
                               f"ORDER BY run_id DESC LIMIT 1", [ref]).fetchone()
        if raw:
            return _row(raw)
        raise StoreError(f"no run {ref!r} in {self.path}: `irqlab list` shows the run ids "
                         f"and names")

    def windows(self, run_id: int) -> list[dict[str, Any]]:
        cur = self._query(
            "SELECT idx AS index, start_s, samples, mean_ns, stddev_ns, min_ns, max_ns, "
            "above_threshold, global_min_ns, global_max_ns, extra FROM windows "
            "WHERE run_id = ? ORDER BY idx", [run_id])
        names = [d[0] for d in cur.description]
        out = []
        for r in cur.fetchall():
            w = dict(zip(names, r))
            extra = w.pop("extra")
            if extra is not None:
                w["extra"] = json.loads(extra)
            out.append(w)
        return out

    def histogram(self, run_id: int) -> dict[str, list[tuple[int, int | None, int]]]:
        """Stored histogram buckets by series."""
        rows = self._query("SELECT series, lower_ns, upper_ns, count FROM histograms "
                           "WHERE run_id = ? ORDER BY series, lower_ns", [run_id]).fetchall()
        out: dict[str, list[tuple[int, int | None, int]]] = {}
        for series, lo, hi, n in rows:
            out.setdefault(series, []).append((lo, hi, int(n)))
        return out

    def sample_count(self, run_id: int) -> int:
        return int(self._query("SELECT count(*) FROM samples WHERE run_id = ?",
                                    [run_id]).fetchone()[0])

    def iter_samples(self, run_id: int, batch: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        """Raw records of a run in sequence order, as Arrow record batches."""
        rel = self.con.sql("SELECT seq, deadline_tick, entry_tick, flags, cpu FROM samples "
                           f"WHERE run_id = {int(run_id)} ORDER BY seq")
        reader = rel.to_arrow_reader(batch)
        yield from reader
