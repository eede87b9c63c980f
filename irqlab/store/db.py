"""DuckDB-backed run store.

DuckDB is embedded (one file, no server), stores the raw samples column-wise and compressed,
and answers quantiles in SQL, which later reports and ad-hoc user queries rely on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from functools import cache
from typing import TYPE_CHECKING, Any, Iterator

import duckdb

from irqlab.lazy import lazy_import
from irqlab.store import location, sample_files, share
# default_db_path moved to the light irqlab.store.location; kept importable from here.
from irqlab.store.location import default_db_path  # noqa: F401
from irqlab.store.errors import StoreError, StoreWriteError
# RunRow: the record every reader gets, defined with the interface (and named here,
# where readers have always imported it from).
from irqlab.store.interface import NewRun, RunRow
from irqlab.store.arrow import numeric_array, numeric_view
from irqlab.store.quantiles import (LATENCY_SQL, StoredFigures, duckdb_quantiles,
                                    stored_figures)
from irqlab.store.schema import MIGRATIONS, SCHEMA_VERSION
from irqlab.store.share import StoreServer

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from irqlab.stats import LogHistogram
else:
    # numpy and pyarrow on first use (irqlab/lazy.py): `irqlab list` and `show` read
    # through DuckDB alone and must not pay for them (docs/design.md, "Start-up").
    np = lazy_import("numpy")
    pa = lazy_import("pyarrow")
    pq = lazy_import("pyarrow.parquet")
parquet = lazy_import("irqlab.store.parquet")    # pyarrow.parquet again

RUN_STATUSES = ("running", "ok", "failed", "interrupted", "died", "stopped-at-break")

# DuckDB must never fetch or load code it was not asked for: a foreign file (SQLite, ...)
# opened as a database would otherwise make it download an extension over the network.
_DUCKDB_CONFIG = {"autoload_known_extensions": False, "autoinstall_known_extensions": False}


def _utcnow() -> dt.datetime:
    """Naive UTC timestamp (the schema stores UTC in TIMESTAMP columns)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def _file_kind(path: Path) -> str:
    """What a file that DuckDB cannot open looks like, for the message."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
        size = path.stat().st_size
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    if head.startswith(b"SQLite format 3"):
        return "a SQLite file"
    if size == 0:
        return "an empty file"
    if head[8:12] == b"DUCK":
        return f"a truncated or damaged DuckDB file of {size} bytes"
    return f"not a DuckDB file, {size} bytes"


def _int_or_none(value: Any) -> int | None:
    """A stored integer: floats round like DuckDB's DOUBLE -> BIGINT cast did."""
    if value is None:
        return None
    if isinstance(value, float):
        return int(round(value))
    return int(value)


def _one_line(exc: BaseException) -> str:
    """DuckDB's messages run over several lines (hints, stack); the first says it."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class _Locked(Exception):
    """DuckDB's file lock is held by another process (``holder`` says which)."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def _lock_holder(message: str) -> str:
    """'pid 1234 (irqlab run ...)' from DuckDB's "Conflicting lock is held in X (PID N)"."""
    m = re.search(r"\(PID (\d+)\)", message)
    if not m:
        return "another process"
    pid = int(m.group(1))
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cmd = " ".join(a.decode(errors="replace") for a in argv if a)
        # `python .../irqlab run ...` reads better as `irqlab run ...`.
        cmd = re.sub(r"^\S*python[\d.]*\s+\S*/(irqlab)\b", r"\1", cmd)
        return f"pid {pid} ({cmd[:120]})"
    except OSError:
        return f"pid {pid}"


_CHECKPOINT_BYTES = 2 << 20
_RELEASE_EVERY_S = 10.0


def _wait_s() -> float:
    """How long a writer waits for a holder that does not share the file."""
    try:
        return max(0.0, float(os.environ.get("IRQLAB_DB_WAIT_S", "10")))
    except ValueError:
        return 10.0


_RUN_COLUMNS = share.RUN_COLUMNS
_JSON_COLUMNS = (13, 14, 15, 18, 20)


def _row(raw: tuple) -> RunRow:
    vals = list(raw)
    for i in _JSON_COLUMNS:
        vals[i] = json.loads(vals[i]) if vals[i] is not None else None
    for i in (13, 14, 18):
        vals[i] = vals[i] or {}
    return RunRow(*vals)


@cache
def _sample_schema() -> pa.Schema:
    """The samples table's columns as Arrow gives them to DuckDB."""
    return pa.schema([("run_id", pa.int64()), ("seq", pa.uint64()),
                      ("deadline_tick", pa.uint64()), ("entry_tick", pa.uint64()),
                      ("flags", pa.uint32()), ("cpu", pa.uint32())])


@cache
def _latency_schema() -> pa.Schema:
    return pa.schema([("seq", pa.uint64()), ("deadline_tick", pa.uint64()),
                      ("entry_tick", pa.uint64())])


def _sample_columns(run_id: int, records: np.ndarray) -> list[pa.Array]:
    """The samples table's columns of raw records (RECORD_DTYPE) of one run."""
    return [numeric_array(np.full(len(records), run_id, dtype=np.int64)),
            *(numeric_array(records[k]) for k in ("seq", "deadline_tick", "entry_tick",
                                             "flags", "cpu"))]



# Borrowed operations a hand-over does not repeat: they may have landed, and nothing
# tells (a second run row, a skipped sequence number), or they belong to a transaction.
_NOT_RETRIED = (share.RUN_INSERT, share.NEXT_RUN_ID, share.COMMIT, share.ROLLBACK,
                share.FILE_DELETE, share.SAMPLES_SHIFT)
_TRANSACTION_OPS = (share.BEGIN, share.COMMIT, share.ROLLBACK)


class SamplesUnordered(StoreError):
    """A run's samples are not stored in sequence order (read them sorted instead)."""


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
    """A DuckDB file holding runs; open with ``Store(path)``, close with ``close()``. The
    store interface's reader and writer (irqlab.store.interface)."""

    sql_dialect = "duckdb"

    def __init__(self, path: str | os.PathLike, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        # Why a write failed, once one has (the run then stops writing, see measure.run).
        self.write_failed: str | None = None
        # Messages of the dead runs this open closed (``died``), for the user.
        self.closed_dead: list[str] = []
        if read_only and not self.path.exists():
            raise StoreError(f"no database at {self.path}: run `irqlab run` first or pass "
                             f"--db PATH to the database you used")
        if not read_only and str(self.path) != ":memory:":
            self._make_parent()
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory, not a database: pass --db FILE")
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"{self.path} is not a regular file (a FIFO or a device): pass "
                             f"--db FILE")
        # Set when another irqlab process holds the file and lends it (store/share.py);
        # ``_server`` when this one holds it and lends it to others.
        self.holder_pid: int | None = None
        self._server: StoreServer | None = None
        self._in_transaction = False      # inside transaction(): a failed write is final
        self._released_at = float("-inf")
        self._memory_limit: str | None = None
        # Runs whose samples this process writes to files (store/sample_files.py).
        self._file_runs: set[int] = set()
        # Their files being written in the background, listed at the next settle point.
        self._files_writer = sample_files.Writer(self.path)
        # Inside a borrowed transaction: its writes, to do again after a hand-over (the
        # holder's end lost them), with a check of whether each landed (None: no check);
        # ``_redo_broken`` when one cannot be done again (a streamed insert).
        self._redo: list[tuple[Any, Any]] | None = None
        self._redo_broken = False
        self._connect(read_only)
        try:
            if read_only or self.holder_pid is not None:
                self._check_version()     # the holder migrated and closed dead runs
            else:
                self._migrate()
            if self.holder_pid is None:
                self._close_dead_runs()
            if not read_only and self.holder_pid is None:
                self._remove_orphan_files()
            if not read_only and self.holder_pid is None and str(path) != ":memory:":
                self._server = StoreServer(self.con, self.path)
            if not read_only and self.holder_pid is None:
                # Data appended since the last checkpoint stays in memory (DuckDB's
                # IN_MEMORY_TABLE); at the default 16 MB a long run's RSS saw-tooths by
                # that much. A small threshold keeps it to about one 60 s window at 1 ms.
                self.con.execute(f"SET checkpoint_threshold = '{_CHECKPOINT_BYTES}B'")
        except StoreError:
            self.con.close()
            raise
        except (duckdb.Error, OSError, ValueError, TypeError) as exc:
            self.con.close()
            raise StoreError(f"{self.path} is not a usable irqlab database "
                             f"({_one_line(exc)}); pass --db PATH to another file") from None

    def _connect(self, read_only: bool, wait: bool = True) -> None:
        """Open the file, or, while another irqlab process holds it, borrow that process's
        connection (store/share.py); a file held by a process that does not lend it (a
        reader, an older irqlab) is retried for ``IRQLAB_DB_WAIT_S`` (default 10 s)."""
        deadline = time.monotonic() + (_wait_s() if wait else 0.0)
        while True:
            try:
                self._connect_local(read_only)
                return
            except _Locked as locked:
                remote = share.connect(self.path)
                if remote is not None:
                    self.con = remote           # type: ignore[assignment]
                    self.holder_pid = remote.holder_pid
                    return
                if time.monotonic() >= deadline:
                    raise StoreError(f"cannot open database {self.path}: {locked.holder} "
                                     f"has it open and does not share it; wait for it, or "
                                     f"use --db OTHER_PATH") from None
                time.sleep(0.2)

    def _connect_local(self, read_only: bool) -> None:
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only,
                                      config=_DUCKDB_CONFIG)
        except duckdb.IOException as exc:
            msg = _one_line(exc)
            if ("not a valid DuckDB database" in msg or "Extension" in msg
                    or "Could not read enough bytes" in msg):
                raise StoreError(f"{self.path} is not an irqlab database "
                                 f"({_file_kind(self.path)}): pass --db PATH to an irqlab "
                                 f"database file") from None
            if "lock" in msg.lower():
                raise _Locked(_lock_holder(msg)) from None
            raise StoreError(f"cannot open database {self.path}: {msg}; pass --db PATH to "
                             f"an irqlab database") from None
        except (duckdb.Error, OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"{self.path} is not a usable irqlab database "
                             f"({_one_line(exc)}); pass --db PATH to another file") from None

    def _close_dead_runs(self, gone_only: bool = False) -> None:
        """Mark runs left ``running`` by a process that is gone as ``died`` (see
        irqlab.store.recover); a read-only open reopens writable for it, if it can.
        ``gone_only``: only runs whose writer is known gone (a hand-over: other
        borrowers of the dead holder may still be writing theirs)."""
        from irqlab.store.recover import close_dead_run, dead_running_runs, writer_gone

        dead = dead_running_runs(self)
        if gone_only:
            dead = [(r, m) for r, m in dead if writer_gone(m.get("writer"))]
        if not dead:
            return
        if self.read_only:
            self.con.close()
            try:
                self._connect(read_only=False, wait=False)
            except StoreError:
                self._connect(read_only=True)   # another reader: leave them for later
                return
            if self.holder_pid is not None:     # a writer came meanwhile: it closes them
                return
        try:
            for run_id, meta in dead:
                msg = f"run {run_id}: {close_dead_run(self, run_id, meta)}"
                self.closed_dead.append(msg)
                if location.notice is not None:
                    location.notice(msg)
        except StoreWriteError:
            pass                     # e.g. a full disk: they stay `running` until next time
        finally:
            if self.read_only:
                self.con.close()
                self._connect(read_only=True)

    def _take_over(self) -> bool:
        """The holder this process borrowed from is gone (killed, crashed, or ended while
        this process was not writing): open the file itself (DuckDB replays the log the
        holder left) and lend it in turn, or borrow from whoever took it over first.
        False inside a borrowed transaction: the holder's end lost it, the caller's
        error stands."""
        if self.holder_pid is None or self.con.in_transaction:
            return False
        gone = self.holder_pid
        self.con.close()
        self.holder_pid = None
        try:
            self._connect(self.read_only)
        except StoreError as exc:
            raise StoreError(f"the irqlab process holding {self.path} (pid {gone}) is "
                             f"gone and the file cannot be taken over: {exc}") from None
        if self.holder_pid is None and not self.read_only:
            self._close_dead_runs(gone_only=True)
            self._server = StoreServer(self.con, self.path)
            self.con.execute(f"SET checkpoint_threshold = '{_CHECKPOINT_BYTES}B'")
        if location.notice is not None:
            location.notice(f"the irqlab process holding {self.path} (pid {gone}) is gone; "
                            f"this process " + ("took the file over" if self.holder_pid
                                                is None else f"now works through pid "
                                                f"{self.holder_pid}"))
        return True

    def _files_not_listed(self, rows: list[list[Any]]) -> list[list[Any]]:
        """Sample-file rows the dead holder had not committed (a retry must not list a
        file twice)."""
        listed = {(int(r[0]), str(n)) for r in rows
                  for _f, _c, n in self._files_listed(int(r[0]))}
        return [r for r in rows if (int(r[0]), str(r[3])) not in listed]

    def _files_listed(self, run_id: int) -> list[tuple[int, int, str]]:
        return [(int(f), int(n), str(name)) for f, n, name in self._query(
            share.FILES_OF_RUN, [run_id]).fetchall()]

    def _remove_orphan_files(self) -> None:
        """Sample files no committed row names (store/sample_files.py): this process is
        the one writer now, so none of them can still be on its way in."""
        if str(self.path) == ":memory:":
            return
        rows = self._query("SELECT run_id, name FROM sample_files").fetchall()
        sample_files.remove_orphans(self.path, {(int(r), str(n)) for r, n in rows})

    def release_memory(self) -> None:
        """Give back what DuckDB caches of data already written: it keeps every block a
        checkpoint wrote in its buffer pool until the memory limit is reached, so a long
        run's memory grew with its samples (~4 bytes a sample, 256 KiB per 60 s window
        at 1 ms: ``duckdb_memory()``, tag BASE_TABLE, read during a run through
        store/share.py). Lowering the limit for a moment evicts them (they are on disk). At most every ``_RELEASE_EVERY_S``, and
        never while another process works through this one (its queries need the
        memory): the run flow calls this after each window."""
        now = time.monotonic()
        if (self.holder_pid is not None or self.read_only or str(self.path) == ":memory:"
                or now - self._released_at < _RELEASE_EVERY_S
                or (self._server is not None and self._server.clients())):
            return
        self._released_at = now
        try:
            # The setting reads back rounded ('18.8 GiB'): always restore the first
            # reading, or every round trip would shrink it.
            if self._memory_limit is None:
                self._memory_limit = str(self.con.execute(
                    "SELECT current_setting('memory_limit')").fetchone()[0])
            self.con.execute("SET memory_limit = '8MB'")
        except duckdb.Error:
            pass                  # could not evict that far: whatever it did is fine
        finally:
            if self._memory_limit is not None:
                with contextlib.suppress(duckdb.Error):
                    self.con.execute(f"SET memory_limit = '{self._memory_limit}'")

    def close(self) -> None:
        try:
            self._list_files()
        finally:
            self._files_writer.close()
            self._close_connection()

    def _close_connection(self) -> None:
        if self._server is not None:
            # Another run writing through this process must land before the file closes.
            self._server.stop(on_wait=lambda n: location.notice and location.notice(
                f"waiting for {n} other irqlab run(s) writing to {self.path} through this "
                f"process"))
            self._server = None
        self.con.close()

    def _make_parent(self) -> None:
        """The default store's directory is made (~/.local/share/irqlab on first use);
        a --db in a directory that does not exist is an error naming it: a typo is not
        made into directories (as root, `--db /nonexistent/dir/x.duckdb` made
        /nonexistent, issue 47)."""
        parent = self.path.parent
        if parent.is_dir():
            return
        if self.path != location.default_db_path():
            raise StoreError(f"{parent} does not exist: create it first, or pass --db "
                             f"PATH in an existing directory")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {parent}: {exc.strerror}; pass --db PATH to "
                             f"a writable place") from exc

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _query(self, sql: str, params: list[Any] | None = None) -> "_Rows":
        """Run a statement and fetch it completely.

        DuckDB keeps a connection busy until a result is fully fetched; a half-read
        ``fetchone()`` would block the next query, so every result is drained here.
        """
        try:
            return self._query_raw(sql, params)
        except (duckdb.ConversionException, duckdb.InvalidInputException,
                duckdb.BinderException, duckdb.ParserException, duckdb.CatalogException):
            raise              # a bad value or a bug: the caller knows which
        except share.HolderGone as exc:
            raise StoreError(f"cannot read {self.path}: {exc}; run the command again"
                             ) from None
        except duckdb.Error as exc:
            # A damaged file shows itself only when a page is read.
            raise StoreError(f"cannot read {self.path} ({_one_line(exc)}): the file is "
                             f"damaged; pass --db PATH to another database") from None

    def _query_raw(self, sql: "str | share.Op", params: Any = None) -> "_Rows":
        """Statements that may run through a borrowed connection are named operations
        (share.Op): only the name and typed arguments go to the holder."""
        if isinstance(sql, share.Op):
            if self.holder_pid is not None:
                in_redo = self._redo is not None and sql not in _TRANSACTION_OPS
                if in_redo and sql.write:
                    op, args = sql, params
                    self._redo.append((lambda: self._query_raw(op, args), None))
                try:
                    return _Rows(*self.con.call(sql, params))
                except share.HolderGone as exc:
                    if in_redo:
                        done = self._handover_in_transaction(exc)
                        return done if sql.write else self._query_raw(sql, params)
                    if sql in _NOT_RETRIED or not self._take_over():
                        raise
                    if sql is share.FILES_INSERT:
                        params = self._files_not_listed(params)
                        if not params:
                            return _Rows([], None)
                return self._query_raw(sql, params)
            op, (sql, params) = sql, sql.build(params)
            if op.many:
                self.con.executemany(sql, params)
                return _Rows([], None)
        cur = self.con.execute(sql, params or [])
        rows = cur.fetchall() if cur.description else []
        return _Rows(rows, cur.description)

    # -- schema -----------------------------------------------------------------------
    def _version(self) -> int | None:
        try:
            row = self._query(share.SCHEMA_VERSION).fetchone()
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
        """All-or-nothing writes (an import either lands whole or not at all). Sample
        files written before it are listed before it begins; those written inside it
        are listed in it, or discarded with it."""
        self._list_files()
        self._begin()
        self._in_transaction = True
        try:
            yield
            self._list_files()
        except BaseException:
            self._in_transaction = False
            self._redo = None
            self._files_writer.discard()
            with contextlib.suppress(duckdb.Error, share.HolderGone):
                self._query_raw(share.ROLLBACK)
            raise
        self._in_transaction = False
        try:
            self._commit()
        except StoreWriteError:
            self._redo = None
            with contextlib.suppress(duckdb.Error, share.HolderGone):
                self._query_raw(share.ROLLBACK)  # DuckDB may have rolled back already
            raise

    def _begin(self) -> None:
        self._write(share.BEGIN)
        if self.holder_pid is not None:
            self._redo, self._redo_broken = [], False

    def _commit(self) -> None:
        """COMMIT; borrowed, a holder that dies meanwhile leaves it unknown whether the
        transaction landed: after the hand-over its writes are looked for, and done
        again when none landed."""
        redo, self._redo = self._redo, None
        if self.holder_pid is None or redo is None:
            self._write(share.COMMIT)
            return
        try:
            self.con.call(share.COMMIT)
            return
        except duckdb.Error as exc:
            self._borrowed_write_failed(exc)
        except share.HolderGone as exc:
            gone = exc
        self.con.in_transaction = False
        if self._redo_broken or not self._take_over():
            self._borrowed_write_failed(gone)
        landed = [check() for _do, check in redo if check is not None]
        if landed and all(landed):
            return                                  # the holder committed it, then died
        if not landed or any(landed):
            self._borrowed_write_failed(gone)       # cannot tell: say so
        self._begin()
        for do, _check in redo:
            do()
        self._commit()

    def _handover_in_transaction(self, exc: BaseException) -> Any:
        """The holder died inside this process's borrowed transaction, which died with
        it: take the file over, begin again and do its writes again (the result of the
        last one is returned: the write being made when the holder died)."""
        redo, self._redo = self._redo or [], None
        self.con.in_transaction = False
        if self._redo_broken or not self._take_over():
            self._borrowed_write_failed(exc)
        self._begin()
        result = None
        for do, _check in redo:
            result = do()
        return result

    def _write(self, sql: "str | share.Op", params: Any = None, many: bool = False
               ) -> "_Rows":
        """A write; a failure (disk full, I/O error) becomes StoreWriteError, once noted
        in ``write_failed``."""
        try:
            try:
                if many:
                    self.con.executemany(sql, params or [])
                    return _Rows([], None)
                return self._query_raw(sql, params)
            except duckdb.TransactionException:
                # A peer's transaction (store/share.py) touching the same row: the
                # holder's own write comes first (issue 47: a peer's open run_update made
                # the run's final status fail). Outside a transaction of its own, the
                # statement alone failed: end the peers' transactions, write again.
                if (self._server is None or self._in_transaction
                        or not self._server.end_transactions()):
                    raise
            if many:
                self.con.executemany(sql, params or [])
                return _Rows([], None)
            return self._query_raw(sql, params)
        except (duckdb.Error, OSError) as exc:
            if isinstance(exc, (duckdb.ConversionException, duckdb.InvalidInputException,
                                duckdb.ConstraintException, duckdb.BinderException,
                                duckdb.CatalogException, duckdb.ParserException)):
                raise          # a bad value or a bug, not the disk: the caller says which
            reason = _one_line(exc)
            self.write_failed = self.write_failed or reason
            raise StoreWriteError(f"cannot write to {self.path}: {reason}") from None

    # -- writing ----------------------------------------------------------------------
    def create_run(self, run: NewRun) -> int:
        """Insert a run (status ``running`` unless its record says) and return its id.

        ``run.run_id`` from :meth:`next_run_id` and ``run.columns`` (tick_hz, summary,
        ended_at ...) let a finished run go in with one statement (imports)."""
        cols = {"name": run.name, "target": run.target, "status": run.status,
                "started_at": run.started_at or _utcnow(), "params": json.dumps(run.params),
                "metadata": json.dumps(run.metadata), "kind": run.kind,
                "source": run.source, "tags": json.dumps(run.tags or {}),
                "suite": run.suite, "cell": None if run.cell is None else json.dumps(run.cell)}
        if run.run_id is not None:
            cols["run_id"] = run.run_id
        for key, val in run.columns.items():
            cols[key] = json.dumps(val) if isinstance(val, dict) else val
        row = self._write(share.RUN_INSERT, cols).fetchone()
        return int(row[0])

    def next_run_id(self) -> int:
        """A fresh run id (from the sequence), for :meth:`create_run`'s ``run_id``."""
        return int(self._write(share.NEXT_RUN_ID).fetchone()[0])

    def update_run(self, run_id: int, **fields: Any) -> None:
        """Set columns of a run; dict values are stored as JSON."""
        if not fields:
            return
        cols = {key: json.dumps(val) if isinstance(val, dict) else val
                for key, val in fields.items()}
        self._write(share.RUN_UPDATE, [run_id, cols])

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any] | None,
                   message: str | None = None) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"bad run status {status!r}")
        self._list_files()                  # its last samples land before its status
        self.update_run(run_id, status=status, summary=summary, message=message,
                        ended_at=_utcnow())

    def add_windows(self, run_id: int, windows: list[dict[str, Any]]) -> None:
        """Insert window rows (dicts with the window JSON keys), in one batch."""
        if not windows:
            return
        def ints(key: str) -> pa.Array:
            return pa.array([_int_or_none(w.get(key)) for w in windows], type=pa.int64())
        table = pa.table({
            "run_id": pa.array([run_id] * len(windows), type=pa.int64()),
            "idx": pa.array([w["index"] for w in windows], type=pa.int32()),
            "start_s": pa.array([w["start_s"] for w in windows], type=pa.float64()),
            "samples": ints("samples"), "mean_ns": ints("mean_ns"),
            "stddev_ns": ints("stddev_ns"), "min_ns": ints("min_ns"),
            "max_ns": ints("max_ns"), "above_threshold": ints("above_threshold"),
            "global_min_ns": ints("global_min_ns"), "global_max_ns": ints("global_max_ns"),
            "extra": pa.array([json.dumps(w["extra"]) if w.get("extra") else None
                               for w in windows], type=pa.string()),
        })
        self._insert_arrow("windows", table)

    def add_histogram(self, run_id: int, series: str,
                      buckets: list[tuple[int, int | None, int]]) -> None:
        """Store ``(lower_ns, upper_ns, count)`` buckets; upper_ns None = overflow."""
        self.add_histograms(run_id, {series: buckets})

    def add_histograms(self, run_id: int,
                       by_series: dict[str, list[tuple[int, int | None, int]]]) -> None:
        """Buckets of several series in one batch."""
        rows = [(name, lo, hi, n) for name, buckets in by_series.items()
                for lo, hi, n in buckets if n]
        if not rows:
            return
        table = pa.table({
            "run_id": pa.array([run_id] * len(rows), type=pa.int64()),
            "series": pa.array([r[0] for r in rows], type=pa.string()),
            "lower_ns": pa.array([int(r[1]) for r in rows], type=pa.int64()),
            "upper_ns": pa.array([_int_or_none(r[2]) for r in rows], type=pa.int64()),
            "count": pa.array([int(r[3]) for r in rows], type=pa.uint64()),
        })
        self._insert_arrow("histograms", table)

    def add_sample_parts(self, run_id: int, seq: np.ndarray, cpu: np.ndarray,
                         irq_tick: np.ndarray) -> None:
        """A run's IRQ/thread split (schema v5, docs/formats.md section 3): per split
        sample (seq, cpu), the tick its timer's hard IRQ was entered."""
        if not len(seq):
            return
        self._insert_arrow("sample_parts", pa.table({
            "run_id": pa.array(np.full(len(seq), run_id, np.int64)),
            "seq": pa.array(np.asarray(seq, np.uint64)),
            "cpu": pa.array(np.asarray(cpu, np.uint32)),
            "irq_tick": pa.array(np.asarray(irq_tick, np.uint64))}))

    def sample_parts(self, run_id: int) -> dict[tuple[int, int], int]:
        """{(seq, cpu): irq_tick} of a run's split samples ({} when it has none)."""
        return {(int(s), int(c)): int(t) for s, c, t in
                self._query(share.SAMPLE_PARTS, [run_id]).fetchall()}

    def _insert_arrow(self, table_name: str, table: pa.Table) -> None:
        """One INSERT for a whole Arrow table (row-by-row executemany took seconds for a
        few thousand rows); borrowed, the holder inserts the rows into its fixed table."""
        if self.holder_pid is not None:
            if self._redo is not None:
                self._redo.append((lambda: self._insert_arrow(table_name, table),
                                   lambda: self._rows_landed(table_name, table)))
            try:
                self.con.insert_rows(table_name, table)
            except share.HolderGone as exc:
                if self._redo is not None:
                    self._handover_in_transaction(exc)
                    return
                if not self._take_over():
                    self._borrowed_write_failed(exc)
                if not self._rows_landed(table_name, table):
                    self._insert_arrow(table_name, table)
            except duckdb.Error as exc:
                self._borrowed_write_failed(exc)
            return
        columns = ", ".join(table.column_names)
        self.con.register("_irqlab_rows", table)
        try:
            self._write(f"INSERT INTO {table_name} ({columns}) SELECT {columns} "
                        f"FROM _irqlab_rows")
        finally:
            self.con.unregister("_irqlab_rows")

    def keep_samples_in_files(self, run_id: int) -> bool:
        """Write this run's samples to Parquet files beside the database instead of the
        samples table (store/sample_files.py: for runs that write big batches). Call
        before its first sample; returns False where files cannot be (in memory)."""
        if str(self.path) == ":memory:":
            return False
        self._file_runs.add(int(run_id))
        return True

    def _add_files(self, run_id: int, batches: Iterator[pa.RecordBatch]) -> None:
        """Write each batch (RECORD_SCHEMA) as a file of the run, then list them in
        sample_files in one INSERT (the caller's transaction decides whether they land).
        Files are encoded on the writer's threads while the iterator makes the next
        batch (an import parsing its file); memory stays bounded by FILES_IN_FLIGHT."""
        self._list_files()
        rows: list[sample_files.FileRow] = []
        try:
            for batch in batches:
                if batch.num_rows:
                    self._files_writer.submit(run_id, batch)
                    rows += self._settle_files(sample_files.FILES_IN_FLIGHT)
            rows += self._settle_files(0)
        except BaseException:
            self._files_writer.discard()   # the iterator failed: stop what waits
            raise
        if rows:
            self._write(share.FILES_INSERT, [list(r) for r in rows])

    def _settle_files(self, keep: int) -> list[sample_files.FileRow]:
        """Rows of the sample files written, waiting until at most ``keep`` are still
        being written; a failed write (disk full) is raised as StoreWriteError."""
        rows, failure = self._files_writer.settle(keep)
        if failure is not None:
            raise self._files_failed(failure)
        return rows

    def _files_failed(self, failure: BaseException) -> StoreWriteError:
        reason = _one_line(failure)
        self.write_failed = self.write_failed or reason
        return StoreWriteError(f"cannot write to {sample_files.files_root(self.path)}: "
                               f"{reason}")

    def _list_files(self, keep: int = 0) -> None:
        """List the sample files written since the last call (settle point: before a
        transaction and its commit, a run's end, any read of samples, close); files
        written before a failed one are listed, then the failure is raised."""
        if not len(self._files_writer):
            return
        rows, failure = self._files_writer.settle(keep)
        if rows:
            self._write(share.FILES_INSERT, [list(r) for r in rows])
        if failure is not None:
            raise self._files_failed(failure)

    def add_samples(self, run_id: int, records: np.ndarray) -> None:
        """Append raw records (RECORD_DTYPE array) losslessly."""
        if len(records) == 0:
            return
        if run_id in self._file_runs:
            # Written in the background: the caller polls and computes the next batch
            # meanwhile; listed at the next settle point (one batch may wait here).
            self._files_writer.submit(run_id, sample_files.record_batch(records))
            self._list_files(keep=1)
            return
        table = pa.table(_sample_columns(run_id, records), schema=_sample_schema())
        if self.holder_pid is not None:
            self._insert_borrowed("records", None, iter(table.to_batches()), [],
                                  (run_id, records))
            return
        self.con.register("_irqlab_batch", table)
        try:
            self._write("INSERT INTO samples SELECT * FROM _irqlab_batch")
        finally:
            self.con.unregister("_irqlab_batch")

    def add_sample_stream(self, run_id: int, batches: Iterator[np.ndarray]) -> None:
        """Append raw records (RECORD_DTYPE arrays) read from an iterator, with one
        INSERT that pulls them as it goes: inside a transaction, memory stays bounded
        (an INSERT per batch keeps every uncommitted row in memory, ~35 bytes each).
        An exception of the iterator is raised as it is."""
        if run_id in self._file_runs:
            self._add_files(run_id, (sample_files.record_batch(r) for r in batches))
            return
        failure: list[BaseException] = []

        def arrow() -> Iterator[pa.RecordBatch]:
            try:
                for records in batches:
                    if len(records):
                        yield pa.record_batch(_sample_columns(run_id, records),
                                              schema=_sample_schema())
            except BaseException as exc:
                failure.append(exc)
                raise
        self._insert_stream(pa.RecordBatchReader.from_batches(_sample_schema(), arrow()),
                            None, failure)

    def add_latency_stream(self, run_id: int,
                           batches: Iterator[tuple[int, int, np.ndarray]]) -> None:
        """Append samples of a source without deadlines (an import): batches of
        (first seq, origin, latencies) become records with seq counting from first seq,
        deadline_tick = origin, entry_tick = latency + origin, flags and cpu 0 (what
        ingest._records builds), in one streamed INSERT as add_sample_stream; the
        constant columns come from SQL, which saves DuckDB a fifth of the work."""
        if run_id in self._file_runs:
            self._add_files(run_id, (
                pa.record_batch([numeric_array(c) for c in (
                    np.arange(first, first + lat.size, dtype=np.uint64),
                    np.full(lat.size, origin, dtype=np.uint64),
                    (lat + origin).astype(np.uint64),
                    np.zeros(lat.size, np.uint32), np.zeros(lat.size, np.uint32))],
                    schema=parquet.RECORD_SCHEMA)
                for first, origin, lat in batches))
            return
        failure: list[BaseException] = []

        def arrow() -> Iterator[pa.RecordBatch]:
            try:
                for first, origin, lat in batches:
                    if lat.size:
                        seq = np.arange(first, first + lat.size, dtype=np.uint64)
                        yield pa.record_batch([numeric_array(c) for c in (
                            seq, np.full(lat.size, origin, dtype=np.uint64),
                            (lat + origin).astype(np.uint64))], schema=_latency_schema())
            except BaseException as exc:
                failure.append(exc)
                raise
        self._insert_stream(pa.RecordBatchReader.from_batches(_latency_schema(), arrow()),
                            run_id, failure)

    def _insert_stream(self, reader: pa.RecordBatchReader, latency_run_id: int | None,
                       failure: list[BaseException]) -> None:
        """One INSERT INTO samples pulling `reader` (records, or with `latency_run_id`
        latencies of that run); the reader's own exception (recorded in `failure`) is
        raised as it is."""
        if self.holder_pid is not None:
            self._insert_borrowed("records" if latency_run_id is None else "latency",
                                  latency_run_id, iter(reader), failure)
            return
        select = "*" if latency_run_id is None else share._latency_select(latency_run_id)
        self.con.register("_irqlab_stream", reader)
        try:
            self._write(f"INSERT INTO samples SELECT {select} FROM _irqlab_stream")
        except (duckdb.Error, StoreWriteError):
            if failure:
                raise failure[0] from None
            raise
        finally:
            # After a failed INSERT the transaction is aborted: unregistering may refuse.
            with contextlib.suppress(duckdb.Error):
                self.con.unregister("_irqlab_stream")

    def _insert_borrowed(self, kind: str, run_id: int | None,
                         batches: Iterator[pa.RecordBatch],
                         failure: list[BaseException],
                         records: tuple[int, np.ndarray] | None = None) -> None:
        """Samples sent to the holder, which inserts them with one INSERT. `records`
        (run id, RECORD_DTYPE array: a batch the caller still has) are written again
        after a hand-over unless the dead holder committed them."""
        if self._redo is not None:
            if records is None:
                self._redo_broken = True            # a stream cannot be read again
            else:
                rid, recs = records
                self._redo.append((lambda: self.add_samples(rid, recs),
                                   lambda: self._samples_landed(rid, recs) == len(recs)))
        try:
            self.con.insert_samples(kind, run_id, batches)
        except share.HolderGone as exc:
            if failure:
                raise failure[0] from None
            if self._redo is not None:
                self._handover_in_transaction(exc)
                return
            if records is None or not self._take_over():
                self._borrowed_write_failed(exc)
            rid, recs = records
            landed = self._samples_landed(rid, recs)
            if landed == 0:
                self.add_samples(rid, recs)
            elif landed != len(recs):
                self._borrowed_write_failed(exc)
        except duckdb.Error as exc:
            if failure:
                raise failure[0] from None
            self._borrowed_write_failed(exc)

    def _samples_landed(self, run_id: int, records: np.ndarray) -> int:
        """How many of a run's samples with the records' sequence numbers are stored
        (sequence numbers count per CPU: each CPU's range is looked up)."""
        landed = 0
        for cpu in np.unique(records["cpu"]):
            seq = records["seq"][records["cpu"] == cpu]
            landed += int(self._query(share.SAMPLES_IN_RANGE, [
                run_id, int(cpu), int(seq.min()), int(seq.max())]).fetchone()[0])
        return landed

    def _rows_landed(self, table_name: str, table: pa.Table) -> bool:
        """Whether the dead holder committed rows of windows or histograms (one INSERT:
        all of them or none) before it died."""
        run_id = int(table.column("run_id")[0].as_py())
        if table_name == "windows":
            have = {w["index"] for w in self.windows(run_id)}
            return table.column("idx")[0].as_py() in have
        return table.column("series")[0].as_py() in self.histogram(run_id)

    def _borrowed_write_failed(self, exc: BaseException) -> None:
        """A write the holder did not make: a bad value or a bug is raised as it is, the
        holder's disk or its end become StoreWriteError (as ``_write`` does)."""
        if isinstance(exc, (duckdb.ConversionException, duckdb.InvalidInputException,
                            duckdb.ConstraintException, duckdb.BinderException,
                            duckdb.CatalogException, duckdb.ParserException)):
            raise exc
        reason = _one_line(exc)
        self.write_failed = self.write_failed or reason
        raise StoreWriteError(f"cannot write to {self.path}: {reason}") from None

    def shift_sample_origin(self, run_id: int, delta_tick: int, first_seq: int,
                            end_seq: int) -> None:
        """Add `delta_tick` to the deadline and entry of a run's samples with
        first_seq <= seq < end_seq (latencies unchanged): a streamed import met a lower
        latency than the origin it wrote them with allowed for. Sample files are
        rewritten: the new file replaces the old one's row, the old file is left to the
        orphan sweep (the caller's transaction may still roll back)."""
        files = self._files(run_id)
        if files:
            for first, n, name in files:
                if first >= end_seq or first + n <= first_seq:
                    continue
                path = sample_files.file_path(self.path, run_id, name)
                table = pq.read_table(path)
                seq = numeric_view(table.column("seq"))
                inside = (seq >= first_seq) & (seq < end_seq)
                shift = np.where(inside, np.uint64(delta_tick % (1 << 64)), np.uint64(0))
                cols = [numeric_view(table.column(k))
                        for k in parquet.RECORD_SCHEMA.names]
                cols[1] = cols[1] + shift            # u64 wrap-around: two's complement
                cols[2] = cols[2] + shift
                batch = pa.record_batch([numeric_array(c) for c in cols],
                                        schema=parquet.RECORD_SCHEMA)
                self._write(share.FILE_DELETE, [run_id, name])
                self._add_files(run_id, iter([batch]))
            return
        self._write(share.SAMPLES_SHIFT,
                    [delta_tick, delta_tick, run_id, first_seq, end_seq])

    def drop_sample_files(self, run_id: int, names: list[str],
                          kept: pa.RecordBatch | None = None) -> None:
        """Retention (store/retention.py): the run's files ``names`` go, and ``kept`` (the
        records of theirs kept for good) becomes one new file in their place. Crash-safe
        without a journal: the new file is whole on disk before the one transaction that
        swaps the rows; a crash before the commit leaves it unnamed, after the commit
        leaves the old files unnamed, and the next writable open removes unnamed files
        (_remove_orphan_files)."""
        row = None
        if kept is not None and kept.num_rows:
            name = sample_files.write_file(self.path, run_id, kept,
                                           prefix=sample_files.KEPT_PREFIX)
            row = [int(run_id), int(kept.column(0)[0].as_py()), kept.num_rows, name]
        try:
            with self.transaction():
                for old in names:
                    self._write(share.FILE_DELETE, [run_id, old])
                if row is not None:
                    self._write(share.FILES_INSERT, [row])
        except BaseException:
            if row is not None:       # no committed row names it
                sample_files.file_path(self.path, run_id, row[3]).unlink(missing_ok=True)
            raise
        for old in names:
            sample_files.file_path(self.path, run_id, old).unlink(missing_ok=True)

    def sample_file_rows(self, run_id: int) -> list[tuple[int, int, str]]:
        """(first_seq, samples, name) of a run's sample files, in sequence order ([] for
        a run whose samples are in the table)."""
        return self._files(run_id)

    # -- reading ----------------------------------------------------------------------
    def runs(self) -> list[RunRow]:
        rows = self._query(share.RUNS).fetchall()
        return [_row(r) for r in rows]

    def resolve(self, ref: str) -> RunRow:
        """A run by id, or the latest run of that name."""
        # ASCII digits only: str.isdigit() also takes '²' (int() refuses it) and '١' (int()
        # reads it as 1), so such a reference is a name.
        if ref.isascii() and ref.isdigit() and len(ref) <= 18:
            raw = self._query(share.RUN_BY_ID, [int(ref)]).fetchone()
            if raw:
                return _row(raw)
        raw = self._query(share.RUN_BY_NAME, [ref]).fetchone()
        if raw:
            return _row(raw)
        raise StoreError(f"no run {ref!r} in {self.path}: `irqlab list` shows the run ids "
                         f"and names")

    def windows(self, run_id: int) -> list[dict[str, Any]]:
        cur = self._query(share.WINDOWS, [run_id])
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
        rows = self._query(share.HISTOGRAMS, [run_id]).fetchall()
        out: dict[str, list[tuple[int, int | None, int]]] = {}
        for series, lo, hi, n in rows:
            out.setdefault(series, []).append((lo, hi, int(n)))
        return out

    def _files(self, run_id: int) -> list[tuple[int, int, str]]:
        """(first_seq, samples, name) of the run's sample files in sequence order."""
        self._list_files()
        return [(int(f), int(n), str(name)) for f, n, name in self._query(
            share.FILES_OF_RUN, [run_id]).fetchall()]

    def _samples_from(self, run_id: int) -> str:
        """A FROM item of the run's raw records (seq, deadline_tick, entry_tick, flags,
        cpu), in storage order: its files, or its rows of the samples table."""
        files = self._files(run_id)
        if files:
            for _f, _c, name in files:
                path = sample_files.file_path(self.path, run_id, name)
                if not path.is_file():
                    raise StoreError(
                        f"run {run_id}'s samples file {path} is missing: "
                        f"{sample_files.files_root(self.path)} belongs to {self.path}; "
                        f"copy or restore it with the database file")
                problem = sample_files.parquet_problem(path)
                if problem:
                    raise self._damaged_file(run_id, f"{path} {problem}")
        return share.samples_from(self.path, run_id, [n for _f, _c, n in files])

    def _damaged_file(self, run_id: int, what: str) -> StoreError:
        """The one line for a run whose sample file cannot be read: the user's file, not
        a bug in irqlab (a truncated copy, a disk error)."""
        return StoreError(f"run {run_id}'s samples file is damaged ({what}): restore "
                          f"{sample_files.files_root(self.path)} from a backup made with "
                          f"{self.path}, or remove the run")

    def _checked_batches(self, run_id: int, reader: Any) -> Iterator[Any]:
        """``reader``'s batches; DuckDB's error on a damaged sample file (found only when
        its pages are decoded) becomes _damaged_file's line."""
        try:
            yield from reader
        except duckdb.Error as exc:
            if not self._files(run_id):
                raise
            raise self._damaged_file(run_id, _one_line(exc)) from None

    def sample_count(self, run_id: int) -> int:
        files = self._files(run_id)
        if files:
            return sum(n for _f, n, _name in files)
        return int(self._query(share.SAMPLE_COUNT, [run_id]).fetchone()[0])

    def sample_figures(self, run_id: int, quantiles: list[float],
                       threshold_tick: int | None = None,
                       histogram: LogHistogram | None = None) -> StoredFigures:
        """Exact count, min, max, count above `threshold_tick` and nearest-rank quantiles
        of a run's stored latencies in ticks, in bounded memory: DuckDB streams the
        samples in batches through irqlab.stats.select (a few passes; measured faster
        than DuckDB's own quantile_disc, which holds every value). `histogram`: theirs,
        when the caller built it while writing them (saves a pass)."""
        from irqlab.stats.select import exact_figures

        got = exact_figures(lambda: self.iter_latency(run_id), quantiles, threshold_tick,
                            histogram)
        return StoredFigures(got.count, got.min_tick, got.max_tick, got.above,
                             got.quantile_tick)

    def sample_figures_sql(self, run_id: int, quantiles: list[float],
                           threshold_tick: int | None = None) -> StoredFigures:
        """`sample_figures` computed by DuckDB's quantile_disc, proved exact (the way the
        PostgreSQL store computes them; tests compare the ways)."""
        if self.holder_pid is not None:
            self._samples_from(run_id)           # its files are here: or say which not
            try:
                return StoredFigures(*self.con.figures(run_id, quantiles, threshold_tick))
            except share.HolderGone as exc:
                raise StoreError(f"cannot read {self.path}: {exc}; run the command again"
                                 ) from None
        return stored_figures(self._sample_query, duckdb_quantiles, run_id, quantiles,
                              threshold_tick)

    def iter_latency(self, run_id: int, batch: int = 1 << 20,
                     with_deadline: bool = False, in_sequence: bool = False
                     ) -> Iterator[Any]:
        """A run's latencies in ticks (int64) batch by batch, in storage order; with
        `with_deadline`, pairs (latency, deadline_tick as int64 bits).

        `in_sequence`: in sequence (seq) order. Runs are stored in that order, so the
        storage order is read and checked (an ORDER BY would sort every sample);
        SamplesUnordered is raised at the first sample out of it, and the caller reads
        again with `iter_latency_sorted`."""
        yield from self._iter_latency(run_id, batch, with_deadline, in_sequence, "storage")

    def iter_latency_sorted(self, run_id: int, batch: int = 1 << 20,
                            with_deadline: bool = False) -> Iterator[Any]:
        """`iter_latency` in sequence order by sorting (when the storage order is not)."""
        yield from self._iter_latency(run_id, batch, with_deadline, False, "seq")

    def _iter_latency(self, run_id: int, batch: int, with_deadline: bool, check: bool,
                      order: str) -> Iterator[Any]:
        last_seq = -1
        for rb in self._read_samples(run_id, "latency_seq" if check else "latency",
                                     order, batch):
            entry = numeric_view(rb.column(0)).view(np.int64)
            deadline = numeric_view(rb.column(1)).view(np.int64)
            if check and rb.num_rows:
                seq = numeric_view(rb.column(2))
                if int(seq[0]) < last_seq or (seq[1:] < seq[:-1]).any():
                    raise SamplesUnordered(f"run {run_id}: samples not stored in "
                                           f"sequence order")
                last_seq = int(seq[-1])
            # Two's complement difference of the u64 counters (docs/formats.md section 2).
            lat = entry - deadline
            yield (lat, deadline) if with_deadline else lat

    def _sample_query(self, select: str, run_id: int, tail: str = "") -> list[tuple]:
        """``SELECT {select} FROM (latency AS lat of the run's samples) {tail}``."""
        from_item = self._samples_from(run_id)
        try:
            return self._query(f"SELECT {select} FROM (SELECT {LATENCY_SQL} AS lat FROM "
                               f"{from_item}) AS s {tail}").fetchall()
        except (duckdb.Error, StoreError) as exc:
            if self.holder_pid is not None or not self._files(run_id):
                raise
            raise self._damaged_file(run_id, _one_line(exc)) from None

    def iter_samples_by_deadline(self, run_id: int, batch: int = 1_000_000
                                 ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(deadline_tick, entry_tick, flags) as int64, in deadline order (the order the
        run's windows were made in), batch by batch: recomputing a dead run's figures."""
        for rb in self._read_samples(run_id, "by_deadline", "deadline", batch):
            yield (numeric_view(rb.column(0)).astype(np.int64),
                   numeric_view(rb.column(1)).astype(np.int64),
                   numeric_view(rb.column(2)).astype(np.int64))

    def iter_samples(self, run_id: int, batch: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        """Raw records of a run in sequence order, as Arrow record batches."""
        yield from self._read_samples(run_id, "records", "seq", batch)

    def _read_samples(self, run_id: int, columns: str, order: str, batch: int
                      ) -> pa.RecordBatchReader:
        """A run's samples (share.SAMPLE_COLUMNS, share.SAMPLE_ORDERS) batch by batch;
        borrowed, the holder builds the same SQL from its own list of the run's files."""
        from_item = self._samples_from(run_id)
        if self.holder_pid is not None:
            try:
                return self.con.read_samples(run_id, columns, order, batch)
            except share.HolderGone:
                if not self._take_over():
                    raise
                return self._read_samples(run_id, columns, order, batch)
        try:
            reader = self.con.sql(share.samples_select(columns, order, from_item)
                                  ).to_arrow_reader(batch)
        except duckdb.Error as exc:        # a damaged footer fails here, at binding
            if not self._files(run_id):
                raise
            raise self._damaged_file(run_id, _one_line(exc)) from None
        return self._checked_batches(run_id, reader)
