"""The lab store on PostgreSQL: runs pushed from many hosts' stores, read by every command.

A lab has one DuckDB file per host; ``irqlab push RUN… --to postgresql://…`` copies runs
into one shared PostgreSQL database, and every read command (``list``, ``show``,
``compare``, ``report``, ``check``, ``explain``) takes ``--db postgresql://…`` as it takes a
file. A run keeps a globally unique id (``run_uuid``, a UUID), so two hosts' run 1 never
collide and a run pushed twice is stored once; the lab store numbers runs for typing
(``run_id``) in its own sequence, and remembers where each came from (host, file, id).

Why psycopg and not DuckDB's postgres extension: the extension must match DuckDB's
version, and the PyPI packages of DuckDB extensions stop at 1.5 while irqlab runs
DuckDB 2.0; irqlab never downloads extensions (the store turns autoloading off).

Raw samples live in PostgreSQL by default (table ``samples``, written with COPY): one
server to back up and grant, and a read command needs nothing but the URL. ``push
--samples-dir DIR`` puts them instead in one Parquet file per run in a directory every
host mounts (irqlab.store.samples_file), referenced by ``runs.samples_uri``: ~10x faster
exact percentiles and ~6x smaller (docs/formats.md §3a, `irqlab bench lab-read`).
"""

from __future__ import annotations

import contextlib
import glob
import datetime as dt
import json
import socket
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from irqlab.store.arrow import numeric_array, numeric_view
from irqlab.store.db import RunRow, Store, StoreError, StoreWriteError
from irqlab.store.interface import NewRun, RunSamples
# is_url and URL_PREFIXES live in the light irqlab.store.location (kept importable here).
from irqlab.store.location import URL_PREFIXES, is_url, redact  # noqa: F401
from irqlab.store.quantiles import (LATENCY_SQL, StoredFigures, postgres_quantiles,
                                    stored_figures)
from irqlab.store.samples_file import (SamplesFile, remove_unpublished, samples_path,
                                       write_samples_file)

PG_SCHEMA_VERSION = 2
# Where a run's uuid comes from when its metadata has none (runs recorded before uuids,
# imports): derived from where it was made, so pushing it again finds it.
_UUID_NAMESPACE = uuid.UUID("6f1c9e0a-3b1e-4a7e-9d0c-2f4f1f8a6b10")

_DDL = [
    """CREATE TABLE IF NOT EXISTS irqlab_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id BIGSERIAL PRIMARY KEY,
        run_uuid UUID NOT NULL UNIQUE,
        name TEXT NOT NULL,
        target TEXT NOT NULL,
        arch TEXT,
        accel TEXT,
        emulated BOOLEAN,
        status TEXT NOT NULL,
        started_at TIMESTAMP NOT NULL,
        ended_at TIMESTAMP,
        tick_hz BIGINT,
        period_ns BIGINT,
        threshold_ns BIGINT,
        message TEXT,
        params JSONB,
        metadata JSONB,
        summary JSONB,
        kind TEXT NOT NULL DEFAULT 'latency',
        source TEXT NOT NULL DEFAULT 'irqlab',
        tags JSONB NOT NULL DEFAULT '{}',
        suite TEXT,
        cell JSONB,
        origin_host TEXT NOT NULL,
        origin_db TEXT NOT NULL,
        origin_run_id BIGINT NOT NULL,
        pushed_at TIMESTAMP NOT NULL DEFAULT now())""",
    """CREATE TABLE IF NOT EXISTS windows (
        run_id BIGINT NOT NULL REFERENCES runs ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        start_s DOUBLE PRECISION NOT NULL,
        samples BIGINT,
        mean_ns BIGINT,
        stddev_ns BIGINT,
        min_ns BIGINT,
        max_ns BIGINT,
        above_threshold BIGINT,
        global_min_ns BIGINT,
        global_max_ns BIGINT,
        extra JSONB,
        PRIMARY KEY (run_id, idx))""",
    """CREATE TABLE IF NOT EXISTS histograms (
        run_id BIGINT NOT NULL REFERENCES runs ON DELETE CASCADE,
        series TEXT NOT NULL,
        lower_ns BIGINT NOT NULL,
        upper_ns BIGINT,
        count BIGINT NOT NULL)""",
    # Ticks are u64 counters in the probe; PostgreSQL has no unsigned type, so they are
    # stored as the same 64 bits, signed (push refuses nothing: a tick >= 2^63 reads back
    # equal through the same reinterpretation). No foreign key here: its per-row check
    # made COPY 9x slower (`irqlab bench push`), and only push and a run write samples,
    # both after their run row exists.
    """CREATE TABLE IF NOT EXISTS samples (
        run_id BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        deadline_tick BIGINT NOT NULL,
        entry_tick BIGINT NOT NULL,
        flags INTEGER NOT NULL,
        cpu INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS samples_run ON samples (run_id, seq)",
    # v2: a run's samples in a Parquet file instead of the samples table (push
    # --samples-dir); NULL: in the table.
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS samples_uri TEXT",
]
# The advisory lock key of schema creation (any constant; 'irqlab' in ASCII).
SCHEMA_LOCK_KEY = 0x6972716C6162
_SAMPLE_COLUMNS = ("seq", "deadline_tick", "entry_tick", "flags", "cpu")
_RUN_COLUMNS = ("run_id, name, target, arch, accel, emulated, status, started_at, ended_at, "
                "tick_hz, period_ns, threshold_ns, message, params, metadata, summary, "
                "kind, source, tags, suite, cell")


def pg_bindir() -> Path | None:
    """Debian's PostgreSQL server binaries (postgresql-NN), newest first; None if absent."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                  key=lambda d: int(Path(d).parent.name), reverse=True)
    return next((Path(d) for d in dirs if (Path(d) / "pg_ctl").exists()), None)


def safe_url(url: str) -> str:
    """The URL without its password, for messages (irqlab.store.location.redact)."""
    return redact(url)


def _reason(exc: BaseException) -> str:
    """A driver error's first line, any password it quotes redacted."""
    text = str(exc).strip()
    return redact(text.splitlines()[0] if text else type(exc).__name__)


class _CommitUnknown(Exception):
    """The connection broke during COMMIT: the run may or may not be stored."""


def run_uuid(row: RunRow, origin_db: str, host: str | None = None) -> uuid.UUID:
    """A run's global id: the one recorded with it, else one derived from its origin."""
    recorded = row.metadata.get("run_uuid") if row.metadata else None
    if recorded:
        return uuid.UUID(str(recorded))
    where = f"{host or socket.gethostname()}:{origin_db}:{row.run_id}:{row.started_at}"
    return uuid.uuid5(_UUID_NAMESPACE, where)


def _utcnow() -> dt.datetime:
    """Naive UTC, as the DuckDB store keeps its timestamps."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def _json(val: Any) -> str | None:
    return None if val is None else json.dumps(val, default=str)


class PgStore:
    """A lab store: the store interface's reader (irqlab.store.interface.RunReader), and
    push()."""

    sql_dialect = "postgres"
    holder_pid: int | None = None      # a server: never lent by another process

    def __init__(self, url: str, read_only: bool = False) -> None:
        try:
            import psycopg
        except ImportError:
            raise StoreError("a postgresql:// store needs psycopg: run ./setup.sh "
                             "--install-only (or pip install 'psycopg[binary]')") from None
        self.url = url
        self.path = safe_url(url)          # what messages name (as Store's path)
        self._in_tx = False
        self.raced = False          # the last push lost to a concurrent push of its run
        self.write_failed: str | None = None     # the first failed write's reason
        try:
            self.con = psycopg.connect(url, autocommit=False)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to {self.path}: {_reason(exc)}"
                             f" (is the server running and the URL right?)") from None
        except UnicodeError as exc:     # a host name IDNA refuses (a label over 63 chars)
            raise StoreError(f"cannot connect to {self.path}: its host name: {exc}; check "
                             f"the URL") from None
        self._init_schema(read_only)
        self.closed_dead: list[str] = []
        self._files: dict[int, SamplesFile | None] = {}
        self._close_dead_runs()        # read-only opens too, as the DuckDB store's do

    def _close_dead_runs(self) -> None:
        """Runs a writer left ``running`` and that writer is gone: ``died``, as the DuckDB
        store does. Many hosts write here, so only a writer of this host's current boot
        can be judged (irqlab.store.recover.writer_gone); others stay as they are. A
        role that may not write leaves them for another open."""
        from irqlab.store import location
        from irqlab.store.recover import close_dead_run, writer_gone

        with self.con.cursor() as cur:
            cur.execute("SELECT run_id, metadata FROM runs WHERE status = 'running'")
            rows = cur.fetchall()
        self.con.commit()
        for run_id, meta in rows:
            meta = meta if isinstance(meta, dict) else {}
            if not writer_gone(meta.get("writer")):
                continue
            try:
                msg = f"run {run_id}: {close_dead_run(self, int(run_id), meta)}"
            except StoreWriteError:
                return               # e.g. a full disk on the server: next time
            self.closed_dead.append(msg)
            if location.notice is not None:
                location.notice(msg)

    def iter_samples_by_deadline(self, run_id: int, batch: int = 1_000_000
                                 ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(deadline_tick, entry_tick, flags) in deadline order, batch by batch (as
        Store.iter_samples_by_deadline)."""
        yield from self._samples(run_id).iter_by_deadline(batch)

    def _init_schema(self, read_only: bool) -> None:
        with self.con.cursor() as cur:
            cur.execute("SELECT to_regclass('irqlab_meta')")
            exists = cur.fetchone()[0] is not None
            if exists:
                cur.execute("SELECT value FROM irqlab_meta WHERE key = 'schema_version'")
                row = cur.fetchone()
                version = int(row[0]) if row else 0
                if version > PG_SCHEMA_VERSION:
                    raise StoreError(f"{self.path} has lab-store schema v{version}, newer "
                                     f"than this irqlab's v{PG_SCHEMA_VERSION}: upgrade "
                                     f"irqlab")
                if version == PG_SCHEMA_VERSION:
                    # Nothing to create: a role that may only read (and may not ALTER)
                    # opens it too.
                    self.con.commit()
                    return
            elif read_only:
                raise StoreError(f"{self.path} is not an irqlab lab store yet: `irqlab push "
                                 f"RUN --to {self.path}` creates it")
            # Two first pushes at once would both create the schema: PostgreSQL's
            # IF NOT EXISTS is not safe against a concurrent CREATE (a duplicate key in
            # pg_type), so creators take one advisory lock, held to this commit; the
            # second then finds every object made and creates nothing.
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
            for stmt in _DDL:
                cur.execute(stmt)
            # Migrations are the idempotent DDL above; the version only goes up.
            cur.execute("INSERT INTO irqlab_meta VALUES ('schema_version', %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value "
                        "WHERE irqlab_meta.value::int < EXCLUDED.value::int",
                        (str(PG_SCHEMA_VERSION),))
        self.con.commit()

    def release_memory(self) -> None:
        """Nothing to give back: the server keeps the data (Store.release_memory)."""

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "PgStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading (the interface of irqlab.store.Store) ---------------------------------
    def _run_rows(self, where: str = "", args: tuple = ()) -> list[RunRow]:
        with self.con.cursor() as cur:
            cur.execute(f"SELECT {_RUN_COLUMNS} FROM runs {where}", args)
            rows = cur.fetchall()
        self.con.rollback()           # read-only: end the snapshot
        out = []
        for r in rows:
            vals = list(r)
            for i in (13, 14, 18):    # params, metadata, tags: never None
                vals[i] = vals[i] or {}
            out.append(RunRow(*vals))
        return out

    def runs(self) -> list[RunRow]:
        return self._run_rows("ORDER BY run_id")

    def resolve(self, ref: str) -> RunRow:
        """A run by lab-store id, by uuid, or the latest run of that name."""
        if ref.isascii() and ref.isdigit() and len(ref) <= 18:
            rows = self._run_rows("WHERE run_id = %s", (int(ref),))
            if rows:
                return rows[0]
        try:
            rows = self._run_rows("WHERE run_uuid = %s", (uuid.UUID(ref),))
            if rows:
                return rows[0]
        except ValueError:
            pass
        rows = self._run_rows("WHERE name = %s ORDER BY run_id DESC LIMIT 1", (ref,))
        if rows:
            return rows[0]
        raise StoreError(f"no run {ref!r} in {self.path}: `irqlab list --db URL` shows the "
                         f"run ids and names")

    def windows(self, run_id: int) -> list[dict[str, Any]]:
        with self.con.cursor() as cur:
            cur.execute("SELECT idx, start_s, samples, mean_ns, stddev_ns, min_ns, max_ns, "
                        "above_threshold, global_min_ns, global_max_ns, extra FROM windows "
                        "WHERE run_id = %s ORDER BY idx", (run_id,))
            rows = cur.fetchall()
        self.con.rollback()
        keys = ("index", "start_s", "samples", "mean_ns", "stddev_ns", "min_ns", "max_ns",
                "above_threshold", "global_min_ns", "global_max_ns")
        out = []
        for r in rows:
            w = dict(zip(keys, r[:10]))
            if r[10] is not None:
                w["extra"] = r[10]
            out.append(w)
        return out

    def sample_parts(self, run_id: int) -> dict[tuple[int, int], int]:
        """A run's IRQ/thread split: the lab store does not hold it (push carries the
        samples, not the split; docs/formats.md section 3a), so always {}."""
        return {}

    def histogram(self, run_id: int) -> dict[str, list[tuple[int, int | None, int]]]:
        with self.con.cursor() as cur:
            cur.execute("SELECT series, lower_ns, upper_ns, count FROM histograms "
                        "WHERE run_id = %s ORDER BY series, lower_ns", (run_id,))
            rows = cur.fetchall()
        self.con.rollback()
        out: dict[str, list[tuple[int, int | None, int]]] = {}
        for series, lo, hi, n in rows:
            out.setdefault(series, []).append((lo, hi, int(n)))
        return out

    def _samples(self, run_id: int) -> RunSamples:
        """The run's samples, in its file or in the table: every sample reader below
        reads through this, never asking which."""
        f = self._samples_file(run_id)
        return f if f is not None else TableSamples(self, run_id)

    def _samples_file(self, run_id: int) -> SamplesFile | None:
        """The run's samples file when push put its samples in one (runs.samples_uri)."""
        if run_id not in self._files:
            with self.con.cursor() as cur:
                cur.execute("SELECT samples_uri FROM runs WHERE run_id = %s", (run_id,))
                row = cur.fetchone()
            if not self._in_tx:
                self.con.rollback()
            uri = row[0] if row else None
            self._files[run_id] = SamplesFile(uri) if uri else None
        return self._files[run_id]

    def samples_uri(self, run_id: int) -> str | None:
        """Where the run's samples file is, or None when its samples are in the table."""
        f = self._samples_file(run_id)
        return str(f.path) if f is not None else None

    def sample_count(self, run_id: int) -> int:
        return self._samples(run_id).count()

    def sample_figures(self, run_id: int, quantiles: list[float],
                       threshold_tick: int | None = None,
                       histogram: Any = None) -> StoredFigures:
        """Exact count, min, max, count above `threshold_tick` and nearest-rank quantiles
        of a run's stored latencies, computed by the server (as Store.sample_figures;
        `histogram` is not needed here); from a samples file, by the same bounded-memory
        selection as the DuckDB store."""
        return self._samples(run_id).figures(quantiles, threshold_tick, histogram)

    def _sample_query(self, select: str, run_id: int, tail: str = "") -> list[tuple]:
        """``SELECT {select} FROM (latency AS lat of the run's samples) {tail}``."""
        with self.con.cursor() as cur:
            cur.execute(f"SELECT {select} FROM (SELECT {LATENCY_SQL} AS lat FROM samples "
                        f"WHERE run_id = %s) AS s {tail}", (run_id,))
            rows = cur.fetchall()
        if not self._in_tx:
            self.con.rollback()
        return rows

    def iter_latency(self, run_id: int, batch: int = 1 << 20, with_deadline: bool = False,
                     in_sequence: bool = False) -> Iterator[Any]:
        """As Store.iter_latency; always in sequence order (the samples_run index)."""
        yield from self._samples(run_id).iter_latency(batch, with_deadline)

    iter_latency_sorted = iter_latency

    def add_sample_stream(self, run_id: int, batches: Iterator[np.ndarray]) -> None:
        """As Store.add_sample_stream: one COPY per batch (the server keeps a big
        transaction on disk)."""
        for records in batches:
            self.add_samples(run_id, records)

    def add_latency_stream(self, run_id: int,
                           batches: Iterator[tuple[int, int, np.ndarray]]) -> None:
        """As Store.add_latency_stream: one COPY per batch."""
        for first, origin, lat in batches:
            n = lat.size
            cols = [np.arange(first, first + n, dtype=np.uint64),
                    np.full(n, origin, dtype=np.uint64), (lat + origin).astype(np.uint64),
                    np.zeros(n, np.uint32), np.zeros(n, np.uint32)]
            if n:
                self._copy_batch(run_id, cols)

    def _copy_batch(self, run_id: int, cols: list[np.ndarray]) -> None:
        import psycopg
        try:
            with self.con.cursor() as cur:
                self._copy_arrays(cur, run_id, cols)
            if not self._in_tx:
                self.con.commit()
        except psycopg.Error as exc:
            self.con.rollback()
            raise StoreWriteError(f"cannot write samples to {self.path}: "
                                  f"{_reason(exc)}") from None

    def shift_sample_origin(self, run_id: int, delta_tick: int, first_seq: int,
                            end_seq: int) -> None:
        """As Store.shift_sample_origin."""
        self._write("UPDATE samples SET deadline_tick = deadline_tick + %s, "
                    "entry_tick = entry_tick + %s WHERE run_id = %s AND seq >= %s "
                    "AND seq < %s", (delta_tick, delta_tick, run_id, first_seq, end_seq))

    def iter_samples(self, run_id: int, batch: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        """Raw records of a run in sequence order, typed as the DuckDB store gives them."""
        yield from self._samples(run_id).iter_samples(batch)

    # -- writing (what a run or an import does, straight into the lab store) ------------
    # Each call commits at once, as the DuckDB store's autocommit does, so a run that
    # dies keeps what was written; transaction() groups an import's writes.
    def _write(self, sql: str, args: Any = (), many: bool = False) -> Any:
        import psycopg
        try:
            with self.con.cursor() as cur:
                if many:
                    cur.executemany(sql, args)
                    out = None
                else:
                    cur.execute(sql, args)
                    out = cur.fetchone() if cur.description else None
            if not self._in_tx:
                self.con.commit()
            return out
        except psycopg.Error as exc:
            self.con.rollback()
            reason = _reason(exc)
            self.write_failed = self.write_failed or reason
            raise StoreWriteError(f"cannot write to {self.path}: {reason}") from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All-or-nothing writes (an import lands whole or not at all)."""
        self._in_tx = True
        try:
            yield
        except BaseException:
            self.con.rollback()
            raise
        finally:
            self._in_tx = False
        self.con.commit()

    def create_run(self, run: NewRun) -> int:
        """Insert a run made on this host (its origin: this store) and return its id;
        ``run.run_id`` (from :meth:`next_run_id`) and ``run.columns`` as
        irqlab.store.Store's."""
        metadata = run.metadata
        rid = uuid.UUID(str(metadata["run_uuid"])) if metadata.get("run_uuid") \
            else uuid.uuid4()
        cols: dict[str, Any] = {
            "run_uuid": rid, "name": run.name, "target": run.target, "status": run.status,
            "started_at": run.started_at or _utcnow(), "params": _json(run.params),
            "metadata": _json({**metadata, "run_uuid": str(rid)}), "kind": run.kind,
            "source": run.source, "tags": _json(run.tags or {}), "suite": run.suite,
            "cell": _json(run.cell), "origin_host": socket.gethostname(),
            "origin_db": self.path, "origin_run_id": 0}
        if run.run_id is not None:
            cols["run_id"] = run.run_id
        for key, val in run.columns.items():
            cols[key] = _json(val) if isinstance(val, dict) else val
        row = self._write(f"INSERT INTO runs ({', '.join(cols)}) VALUES "
                          f"({', '.join(['%s'] * len(cols))}) RETURNING run_id",
                          tuple(cols.values()))
        new_id = int(row[0])
        self._write("UPDATE runs SET origin_run_id = %s WHERE run_id = %s", (new_id, new_id))
        return new_id

    def next_run_id(self) -> int:
        """A fresh run id, for :meth:`create_run`'s ``run_id``."""
        return int(self._write("SELECT nextval(pg_get_serial_sequence('runs', 'run_id'))")[0])

    def update_run(self, run_id: int, **fields: Any) -> None:
        """Set columns of a run; dict values are stored as JSON."""
        if not fields:
            return
        cols = ", ".join(f"{key} = %s" for key in fields)
        vals = [_json(v) if isinstance(v, dict) else v for v in fields.values()]
        self._write(f"UPDATE runs SET {cols} WHERE run_id = %s", (*vals, run_id))

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any] | None,
                   message: str | None = None) -> None:
        self.update_run(run_id, status=status, summary=summary, message=message,
                        ended_at=_utcnow())

    def add_windows(self, run_id: int, windows: list[dict[str, Any]]) -> None:
        if windows:
            self._write(
                "INSERT INTO windows VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(run_id, w["index"], w["start_s"], w["samples"], w["mean_ns"],
                  w["stddev_ns"], w["min_ns"], w["max_ns"], w["above_threshold"],
                  w["global_min_ns"], w["global_max_ns"], _json(w.get("extra") or None))
                 for w in windows], many=True)

    def add_histogram(self, run_id: int, series: str,
                      buckets: list[tuple[int, int | None, int]]) -> None:
        self.add_histograms(run_id, {series: buckets})

    def add_histograms(self, run_id: int,
                       by_series: dict[str, list[tuple[int, int | None, int]]]) -> None:
        rows = [(run_id, series, lo, hi, n) for series, buckets in by_series.items()
                for lo, hi, n in buckets if n]
        if rows:
            self._write("INSERT INTO histograms VALUES (%s, %s, %s, %s, %s)", rows,
                        many=True)

    def keep_samples_in_files(self, run_id: int) -> bool:
        """As Store.keep_samples_in_files: the lab store keeps samples in its table (or
        in a --samples-dir file written at push), so never."""
        return False

    def add_samples(self, run_id: int, records: np.ndarray) -> None:
        """Append raw records (RECORD_DTYPE array) losslessly, with COPY."""
        if len(records) == 0:
            return
        self._copy_batch(run_id, [records[k] for k in _SAMPLE_COLUMNS])

    def _copy_arrays(self, cur: Any, run_id: int, cols: list[np.ndarray]) -> None:
        """COPY one batch of sample columns (seq, deadline, entry, flags, cpu) as text
        formatted by Arrow's CSV writer (C++: np.savetxt formats row by row in Python and
        made push 15x slower than the server); u64 ticks go in as the same 64 bits,
        signed (see the samples table)."""
        ints = [np.asarray(c).astype(np.uint64).view(np.int64) for c in cols]
        table = pa.table([numeric_array(c) for c in (np.full(len(ints[0]), run_id, np.int64),
                                                     *ints)],
                         names=["run_id", *_SAMPLE_COLUMNS])
        buf = pa.BufferOutputStream()
        pa_csv.write_csv(table, buf, pa_csv.WriteOptions(include_header=False,
                                                         delimiter="\t"))
        with cur.copy("COPY samples (run_id, seq, deadline_tick, entry_tick, flags, cpu) "
                      "FROM STDIN") as copy:
            copy.write(buf.getvalue().to_pybytes())

    # -- pushing --------------------------------------------------------------------------
    def push(self, src: Store, row: RunRow, origin_db: str,
             samples_dir: Path | None = None) -> tuple[int, bool]:
        """Copy run ``row`` of ``src`` here in one transaction: (lab run id, added?).
        A run already here (same uuid) is not copied again; ``raced`` tells whether
        another push of it committed while this one ran (this one then keeps nothing).
        With `samples_dir`, the raw samples go to a Parquet file there, under a name of
        this push's own, instead of the samples table: written whole before the run row
        that names it commits, removed if this push fails or loses (journalled, so a
        killed push's file is removed at the next start)."""
        import psycopg
        self.raced = False
        rid = run_uuid(row, origin_db)
        try:
            found = self._pushed_as(rid)
        except psycopg.Error as exc:
            raise self._push_failed(exc) from None
        if found is not None:
            return found, False
        if samples_dir is None:
            try:
                return self._push_guarded(src, row, rid, origin_db, None)
            except _CommitUnknown as exc:
                raise self._commit_unknown(exc, row.run_id, None) from None
        from irqlab.journal import journal
        file = samples_path(samples_dir.resolve(), rid)
        # Journalled before the file exists: a push killed from here on leaves an entry
        # whose undo, at the next irqlab start, removes the file unless a committed run
        # names it (the push died just after its commit).
        entry = journal().add("samples_file", path=str(file), url=self.path)
        try:
            write_samples_file(src.iter_samples(row.run_id), file)
            lab_id, added = self._push_guarded(src, row, rid, origin_db, file)
        except _CommitUnknown as exc:
            # The entry stays open: the next start asks the store and removes the file
            # only if no run names it.
            raise self._commit_unknown(exc, row.run_id, file) from None
        except BaseException:
            remove_unpublished(file)
            journal().done(entry)
            raise
        if not added:
            remove_unpublished(file)          # lost to a concurrent push of the run
        journal().done(entry)
        return lab_id, added

    def _pushed_as(self, rid: uuid.UUID) -> int | None:
        """The lab run id of run `rid`, if it is here."""
        with self.con.cursor() as cur:
            cur.execute("SELECT run_id FROM runs WHERE run_uuid = %s", (rid,))
            found = cur.fetchone()
        self.con.rollback()
        return int(found[0]) if found else None

    def _push_guarded(self, src: Store, row: RunRow, rid: uuid.UUID, origin_db: str,
                      file: Path | None) -> tuple[int, bool]:
        """_push_rows, with a concurrent push of the same run (its row committed first:
        UniqueViolation on run_uuid) reported as that push's run, and a lost server as
        one line naming the fix."""
        import psycopg
        try:
            lab_id = self._push_rows(src, row, rid, origin_db, file)
        except psycopg.errors.UniqueViolation:
            self._rollback_quietly()
            try:
                winner = self._pushed_as(rid)
            except psycopg.Error as exc:
                raise self._push_failed(exc) from None
            if winner is None:         # a unique key other than run_uuid: not a race
                raise StoreWriteError(f"cannot push to {self.path}: run uuid {rid} "
                                      f"conflicts with a run there") from None
            self.raced = True
            return winner, False
        except psycopg.Error as exc:
            self._rollback_quietly()
            raise self._push_failed(exc) from None
        except BaseException:
            self._rollback_quietly()
            raise
        try:
            self.con.commit()
        except psycopg.OperationalError as exc:
            # The server may have committed before the connection broke.
            raise _CommitUnknown(_reason(exc)) from None
        except psycopg.Error as exc:
            self._rollback_quietly()
            raise self._push_failed(exc) from None
        return lab_id, True

    def _rollback_quietly(self) -> None:
        """Roll back; on a lost connection there is nothing to roll back (the server
        drops the transaction), and raising here would skip the caller's clean-up."""
        import psycopg
        with contextlib.suppress(psycopg.Error):
            self.con.rollback()

    def _commit_unknown(self, exc: _CommitUnknown, run_id: int,
                        file: Path | None) -> StoreWriteError:
        then = (f" (the next irqlab command removes {file.name} if the run was not stored)"
                if file is not None else "")
        return StoreWriteError(
            f"lost the connection to the lab store {self.path} while committing ({exc}): "
            f"whether run {run_id} was stored is unknown; check that the server is "
            f"running, then push again{then}")

    def _push_failed(self, exc: Exception) -> StoreWriteError:
        """One line for a push the store failed: the problem and what to do."""
        import psycopg
        if self.con.closed or isinstance(exc, psycopg.OperationalError):
            return StoreWriteError(
                f"lost the connection to the lab store {self.path} during the push "
                f"({_reason(exc)}): nothing of this run was kept there; check that the "
                f"server is running and reachable, then push again")
        return StoreWriteError(f"cannot push to {self.path}: {_reason(exc)}")

    def _push_rows(self, src: Store, row: RunRow, rid: uuid.UUID,
                   origin_db: str, file: Path | None) -> int:
        """The run's rows (and its samples when `file` is None), in one transaction that
        the caller commits."""
        with self.con.cursor() as cur:
            meta = dict(row.metadata or {})
            meta.setdefault("run_uuid", str(rid))
            cur.execute(
                "INSERT INTO runs (run_uuid, name, target, arch, accel, emulated, status, "
                "started_at, ended_at, tick_hz, period_ns, threshold_ns, message, params, "
                "metadata, summary, kind, source, tags, suite, cell, origin_host, origin_db, "
                "origin_run_id, samples_uri) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING run_id",
                (rid, row.name, row.target, row.arch, row.accel, row.emulated, row.status,
                 row.started_at, row.ended_at, row.tick_hz, row.period_ns, row.threshold_ns,
                 row.message, _json(row.params), _json(meta), _json(row.summary), row.kind,
                 row.source, _json(row.tags or {}), row.suite, _json(row.cell),
                 socket.gethostname(), origin_db, row.run_id,
                 str(file.resolve()) if file is not None else None))
            lab_id = int(cur.fetchone()[0])
            wins = src.windows(row.run_id)
            if wins:
                cur.executemany(
                    "INSERT INTO windows VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [(lab_id, w["index"], w["start_s"], w["samples"], w["mean_ns"],
                      w["stddev_ns"], w["min_ns"], w["max_ns"], w["above_threshold"],
                      w["global_min_ns"], w["global_max_ns"], _json(w.get("extra")))
                     for w in wins])
            hist = [(lab_id, series, lo, hi, n)
                    for series, buckets in src.histogram(row.run_id).items()
                    for lo, hi, n in buckets]
            if hist:
                cur.executemany("INSERT INTO histograms VALUES (%s, %s, %s, %s, %s)", hist)
            if file is None:
                self._copy_samples(cur, src, row.run_id, lab_id)
        return lab_id

    def _copy_samples(self, cur: Any, src: Store, run_id: int, lab_id: int) -> None:
        """Copy a run's samples a batch at a time (memory bounded by one batch)."""
        for batch in src.iter_samples(run_id):
            self._copy_arrays(cur, lab_id, [numeric_view(batch.column(k))
                                            for k in _SAMPLE_COLUMNS])


class TableSamples:
    """One run's samples in the lab store's ``samples`` table (RunSamples): the server
    computes the figures; records are read through a named (server-side) cursor."""

    def __init__(self, store: PgStore, run_id: int) -> None:
        self.store = store
        self.run_id = run_id

    def count(self) -> int:
        con = self.store.con
        with con.cursor() as cur:
            cur.execute("SELECT count(*) FROM samples WHERE run_id = %s", (self.run_id,))
            n = int(cur.fetchone()[0])
        con.rollback()
        return n

    def figures(self, quantiles: list[float], threshold_tick: int | None = None,
                histogram: Any = None) -> StoredFigures:
        return stored_figures(self.store._sample_query, postgres_quantiles, self.run_id,
                              quantiles, threshold_tick)

    def _columns(self, cursor: str, columns: str, order: str, batch: int
                 ) -> Iterator[np.ndarray]:
        """The run's ``columns`` in ``order``, ``batch`` rows at a time, as int64
        columns (rows transposed), through a named (server-side) cursor."""
        con = self.store.con
        with con.cursor(name=f"irqlab_{cursor}_{self.run_id}") as cur:
            cur.itersize = batch
            cur.execute(f"SELECT {columns} FROM samples WHERE run_id = %s ORDER BY {order}",
                        (self.run_id,))
            while rows := cur.fetchmany(batch):
                yield np.array(rows, dtype=np.int64).T
        con.rollback()

    def iter_samples(self, batch: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        for cols in self._columns("samples", "seq, deadline_tick, entry_tick, flags, cpu",
                                  "seq", batch):
            yield pa.record_batch(
                [numeric_array(cols[0].view(np.uint64)),
                 numeric_array(cols[1].view(np.uint64)),
                 numeric_array(cols[2].view(np.uint64)),
                 numeric_array(cols[3].astype(np.uint32)),
                 numeric_array(cols[4].astype(np.uint32))],
                names=["seq", "deadline_tick", "entry_tick", "flags", "cpu"])

    def iter_latency(self, batch: int = 1 << 20, with_deadline: bool = False
                     ) -> Iterator[Any]:
        for rb in self.iter_samples(batch):
            entry = numeric_view(rb.column("entry_tick")).view(np.int64)
            deadline = numeric_view(rb.column("deadline_tick")).view(np.int64)
            lat = entry - deadline
            yield (lat, deadline) if with_deadline else lat

    def iter_by_deadline(self, batch: int = 1_000_000
                         ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for cols in self._columns("by_deadline", "deadline_tick, entry_tick, flags",
                                  "deadline_tick, seq", batch):
            yield cols[0], cols[1], cols[2]
