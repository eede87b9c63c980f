"""One DuckDB file, many irqlab processes: the process holding it writable serves the others.

DuckDB lets one process open a file for writing and no one else open it at all while it
does ("Could not set lock on file"). A run holds its store for the whole run, so without
this ``irqlab list`` fails during a run and a second run on the same file cannot start
(issue 18). Closing the file between batches was tried and measured: a run with 10 ms
windows spent most of its time reopening, and reopening after a full disk could not write
the run's final status (the log replay needs space). So the holder stays the one writer
and lends its database: every writable :class:`~irqlab.store.db.Store` listens on a Unix
socket, and a process that finds the file locked talks to that socket instead. Each
client gets its own DuckDB connection (``cursor()``) in the holder, so its transactions
are its own, exactly as if it had opened the file: readers see committed data while the
run writes, and a second run's inserts land beside the first's (DuckDB appends from
several connections without conflict).

The socket is in the abstract namespace (no file to leave behind after ``kill -9``), named
after the database file's device and inode, so every path to the same file finds it. Only
a peer with the holder's uid (``SO_PEERCRED``) is served: the same user could open the
file anyway.

Protocol (version 2; both ends are this module; docs/formats.md section 11): frames of a
4-byte little-endian length and a body, at most MAX_FRAME_BYTES. A request names one of
the store's own operations with typed arguments (``{"op": NAME, "args": ...}``); the
holder checks them and runs its own fixed SQL: no SQL text crosses the socket, since a
peer that could send it could make the run's process read or write any file
(``COPY ... TO``, ``read_text``), attach or install anything (issue 30). Samples travel
as raw little-endian records, so the holder never parses Arrow from a peer. Row values
travel as tagged JSON so rows keep DuckDB's Python types (Decimal, datetime, UUID). A
peer that breaks the framing, stays silent or exceeds a limit costs one logged line and
its connection, never a traceback or the run.

When the holder dies, a writable borrower takes the file over (store/db.py,
``Store._take_over``): DuckDB's file lock goes with the process, and opening the file
replays the log the holder left.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import datetime as dt
import decimal
import errno
import hashlib
import json
import math
import operator
import os
import re
import socket
import struct
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import duckdb

from irqlab.lazy import lazy_import
from irqlab.store import location, sample_files
from irqlab.store.tag_keys import TAG_KEY_RULE, valid_tag_key
from irqlab.store.arrow import numeric_array, numeric_view

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
else:
    # numpy and pyarrow on first use (irqlab/lazy.py): `irqlab list` needs neither.
    np = lazy_import("numpy")
    pa = lazy_import("pyarrow")

PROTOCOL_VERSION = 2
_SOCKET_PREFIX = "irqlab-store-"
_LEN = struct.Struct("<I")

# Limits of the socket (docs/formats.md, "The store's lending socket"). A frame is refused
# before any of it is read when it declares more; bulk data travels in frames of at most
# half of it, so the holder never buffers more than one frame per connection.
MAX_FRAME_BYTES = 8 << 20
MAX_CLIENTS = 64
# A connection's first request comes within this (a borrower asks at once); silent ones
# are dropped, and when MAX_CLIENTS are connected the one idle longest makes room.
FIRST_REQUEST_S = 10.0
# Frame bodies the holder receives and decodes at once, over all connections
# (FrameBudget): two whole frames (decoding one costs about its size again); a frame
# waits at most FRAME_WAIT_S for room and arrives within FRAME_S.
FRAMES_TOTAL_BYTES = 2 * MAX_FRAME_BYTES
FRAME_WAIT_S = 10.0
FRAME_S = 10.0
# A peer's transaction lasts at most IRQLAB_SHARE_TRANSACTION_S (default below): then it
# is rolled back and the peer disconnected. A run's borrowed transaction is one window's
# writes (well under a second); the holder's own writes never wait on a peer's.
TRANSACTION_S = 60.0
_MAX_BATCH_ROWS = 1 << 20
_ROWS_PER_REPLY = 2_000          # result rows per reply frame (~200 bytes each for runs)
_ROWS_PER_REQUEST = 2_000        # rows of sample_files / windows / histograms per request
_MAX_QUANTILES = 1_000
_ACTIVE_WRITER_S = 10.0          # a writer idle longer than this is not waited for
_LOG_LINES_PER_10_S = 10         # a flood of bad peers is summed up, not echoed

RUN_COLUMNS = ("run_id, name, target, arch, accel, emulated, status, started_at, ended_at, "
               "tick_hz, period_ns, threshold_ns, message, params, metadata, summary, "
               "kind, source, tags, suite, cell")


def _env_s(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 and value != float("inf") else default


def socket_address(path: str | os.PathLike) -> str:
    """The abstract socket name of a database file (its device and inode)."""
    st = os.stat(path)
    digest = hashlib.sha256(f"{st.st_dev}:{st.st_ino}".encode()).hexdigest()[:32]
    return "\0" + _SOCKET_PREFIX + digest


class BadRequest(duckdb.InvalidInputException):
    """A well-framed request the holder refuses (an error reply; the connection stays);
    in the holder's own process, a bad value passed to an operation (a bug)."""


class ProtocolError(Exception):
    """Framing broken or a limit exceeded: the holder closes the connection."""


class _TransactionTooLong(Exception):
    """A peer kept a transaction open past the holder's bound: rolled back, dropped."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(f"transaction open longer than {limit_s:g} s "
                         f"(IRQLAB_SHARE_TRANSACTION_S), rolled back")


# -- framing and values -------------------------------------------------------------------
def _send(sock: socket.socket, body: bytes) -> None:
    sock.sendall(_LEN.pack(len(body)) + body)


class FrameBudget:
    """Bytes of frame bodies the holder is receiving at once, over all its connections.

    A frame's body is read into a buffer of its declared size; 64 connections each
    sending an 8 MiB frame cost the holder ~524 MB (issue 47). A frame now waits for its
    bytes to be free (at most ``wait_s``, then its connection is dropped) and hands them
    back once read, so receiving costs at most ``total`` bytes however many peers send.
    """

    def __init__(self, total: int, wait_s: float) -> None:
        self.total, self.wait_s = total, wait_s
        self._free = total
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def hold(self, n: int) -> Iterator[None]:
        with self._cond:
            if not self._cond.wait_for(lambda: self._free >= n, self.wait_s):
                raise ProtocolError(f"a frame of {n} bytes waited {self.wait_s:g} s for "
                                    f"the {self.total >> 20} MiB the holder receives at "
                                    f"once; disconnected")
            self._free -= n
        try:
            yield
        finally:
            with self._cond:
                self._free += n
                self._cond.notify_all()


def _recv_exact(sock: socket.socket, n: int, within_s: float | None = None) -> bytearray:
    """``n`` bytes into one buffer of that size (no second copy); with ``within_s``,
    all of them within that time (a peer trickling a frame does not hold its bytes)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    deadline = None if within_s is None else time.monotonic() + within_s
    timeout = sock.gettimeout()
    try:
        while got < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProtocolError(f"a frame of {n} bytes not sent within "
                                        f"{within_s:g} s")
                sock.settimeout(left if timeout is None else min(left, timeout))
            k = sock.recv_into(view[got:], min(n - got, 1 << 20))
            if not k:
                raise ConnectionError("the other end closed the connection")
            got += k
    except TimeoutError:
        if deadline is not None and time.monotonic() >= deadline:
            raise ProtocolError(f"a frame of {n} bytes not sent within {within_s:g} s"
                                ) from None
        raise
    finally:
        view.release()
        if deadline is not None:
            sock.settimeout(timeout)
    return buf


@contextlib.contextmanager
def _received(sock: socket.socket, budget: FrameBudget | None) -> Iterator[bytearray]:
    """One frame's body, for the time of the ``with``: the holder passes its budget, and
    a peer's frame is then received within FRAME_S and decoded (JSON, records) inside
    the budget's bytes, the copies decoding makes included."""
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if n > MAX_FRAME_BYTES:
        # Refused before reading: a declared 4 GiB costs nothing.
        raise ProtocolError(f"frame of {n} bytes refused (limit {MAX_FRAME_BYTES})")
    if budget is None or n == 0:
        yield _recv_exact(sock, n)
        return
    with budget.hold(n):
        yield _recv_exact(sock, n, FRAME_S)


def _recv(sock: socket.socket) -> bytearray:
    """One frame's body (a borrower reading the holder's replies)."""
    with _received(sock, None) as body:
        return body


def _send_json(sock: socket.socket, obj: dict[str, Any]) -> None:
    _send(sock, json.dumps(obj, default=_tag).encode())


def _recv_json(sock: socket.socket, budget: FrameBudget | None = None) -> dict[str, Any]:
    try:
        with _received(sock, budget) as body:
            obj = json.loads(body, object_hook=_untag)
    except (ValueError, RecursionError, ArithmeticError, TypeError) as exc:
        raise ProtocolError(f"not a JSON request ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise ProtocolError("a request is a JSON object")
    return obj


def _tag(value: Any) -> Any:
    """JSON for the values DuckDB takes as parameters and returns in rows."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, decimal.Decimal):
        return {"$": "decimal", "v": str(value)}
    if isinstance(value, dt.datetime):
        return {"$": "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$": "date", "v": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"$": "timedelta", "v": value.total_seconds()}
    if isinstance(value, uuid.UUID):
        return {"$": "uuid", "v": str(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$": "bytes", "v": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot send a {type(value).__name__} to the store's holder")


_UNTAG = {"decimal": decimal.Decimal, "datetime": dt.datetime.fromisoformat,
          "date": dt.date.fromisoformat, "timedelta": lambda s: dt.timedelta(seconds=s),
          "uuid": uuid.UUID, "bytes": base64.b64decode}


def _untag(obj: dict[str, Any]) -> Any:
    if len(obj) == 2 and "$" in obj and "v" in obj and obj["$"] in _UNTAG:
        return _UNTAG[obj["$"]](obj["v"])
    return obj


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write(batch)
    return sink.getvalue().to_pybytes()


def _ipc_schema(schema: pa.Schema) -> bytes:
    sink = pa.BufferOutputStream()
    pa.ipc.new_stream(sink, schema).close()
    return sink.getvalue().to_pybytes()


def _slices(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """A batch cut into pieces of at most half a frame (bulk data's frame size)."""
    per_row = max(1, batch.nbytes // max(1, batch.num_rows))
    rows = max(1, (MAX_FRAME_BYTES // 2) // per_row)
    for start in range(0, batch.num_rows, rows):
        yield batch.slice(start, rows)


# -- the operations: typed arguments, fixed SQL -------------------------------------------
def _int(v: Any) -> int:
    if isinstance(v, (bool, np.bool_)) if "numpy" in sys.modules else isinstance(v, bool):
        raise BadRequest("expected an integer, got a boolean")
    try:
        v = operator.index(v)                 # int, numpy integers; not float or str
    except TypeError:
        raise BadRequest(f"expected an integer, got {type(v).__name__}") from None
    if not -(1 << 63) <= v < (1 << 64):
        raise BadRequest("an integer out of 64-bit range")
    return v


def _number(v: Any) -> int | float:
    """An integer column's value as the run flow passes it (an int, or a float DuckDB
    rounds, as ``_int_or_none`` in store/db.py does)."""
    if isinstance(v, float) and math.isfinite(v):
        return v
    return _int(v)


def _text(v: Any, limit: int = 1 << 20) -> str:
    if not isinstance(v, str) or len(v) > limit:
        raise BadRequest(f"expected a string of at most {limit} characters")
    return v


def _name(v: Any) -> str:
    """A sample file's name (sample_files.py): a plain file name, no path."""
    v = _text(v, 255)
    if not v or "/" in v or "\0" in v or v in (".", ".."):
        raise BadRequest("a sample file's name is a plain file name")
    return v


def _file_name(v: Any) -> str:
    """A new sample file's name: the shape the store gives them, nothing else."""
    v = _text(v, 255)
    if not sample_files.is_file_name(v):
        raise BadRequest("a sample file's name is <32 hex digits>.parquet (or kept-...)")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool) and type(v).__name__ != "bool_":
        raise BadRequest("expected true or false")
    return bool(v)


def _time(v: Any) -> dt.datetime:
    if not isinstance(v, dt.datetime):
        raise BadRequest("expected a timestamp")
    return v


def _status(v: Any) -> str:
    """A run status's shape (store/db.py's RUN_STATUSES names them; a list here would
    import db.py, which imports this module)."""
    if not isinstance(v, str) or not re.fullmatch(r"[a-z][a-z-]{0,31}", v):
        raise BadRequest("a run's status is a lower-case word such as running or ok")
    return v


def _opt(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else check(v)


def _list(v: Any, most: int) -> list[Any]:
    if not isinstance(v, list) or len(v) > most:
        raise BadRequest(f"expected a list of at most {most} items")
    return v


def _args(v: Any, n: int, op: str) -> list[Any]:
    if not isinstance(v, list) or len(v) != n:
        raise BadRequest(f"{op} takes {n} arguments")
    return v


# The columns of ``runs`` a borrower may set, with their checks (JSON columns travel as
# JSON text; DuckDB's JSON type refuses text that is not JSON).
_RUN_FIELDS: dict[str, Callable[[Any], Any]] = {
    "run_id": _int, "name": _text, "target": _text, "arch": _opt(_text),
    "accel": _opt(_text), "emulated": _opt(_bool), "status": _status,
    "started_at": _time, "ended_at": _opt(_time), "tick_hz": _opt(_number),
    "period_ns": _opt(_number), "threshold_ns": _opt(_number), "message": _opt(_text),
    "params": _opt(_text), "metadata": _opt(_text), "summary": _opt(_text),
    "kind": _text, "source": _text, "tags": _opt(_text), "suite": _opt(_text),
    "cell": _opt(_text)}


def _run_fields(v: Any) -> tuple[list[str], list[Any]]:
    if not isinstance(v, dict) or not v:
        raise BadRequest("expected an object of run columns")
    unknown = [k for k in v if k not in _RUN_FIELDS]
    if unknown:
        raise BadRequest(f"runs has no settable column {str(unknown[0])[:40]!r}")
    return list(v), [_RUN_FIELDS[k](val) for k, val in v.items()]


class Op:
    """A named operation: a borrower sends the name and the arguments; ``build`` checks
    them and gives the holder's own SQL and parameters (the same on both sides)."""

    def __init__(self, name: str, build: Callable[[Any], tuple[str, list[Any]]], *,
                 write: bool = False, many: bool = False) -> None:
        self.name, self.build, self.write, self.many = name, build, write, many
        OPS[name] = self

    def __repr__(self) -> str:
        return f"Op({self.name!r})"


OPS: dict[str, Op] = {}


def _fixed(name: str, sql: str, *checks: Callable[[Any], Any], write: bool = False) -> Op:
    def build(args: Any) -> tuple[str, list[Any]]:
        args = _args(list(args) if isinstance(args, tuple) else args or [], len(checks),
                     name)
        return sql, [check(a) for check, a in zip(checks, args)]
    return Op(name, build, write=write)


BEGIN = _fixed("begin", "BEGIN TRANSACTION", write=True)
COMMIT = _fixed("commit", "COMMIT", write=True)
ROLLBACK = _fixed("rollback", "ROLLBACK", write=True)
SCHEMA_VERSION = _fixed("schema_version",
                        "SELECT value FROM meta WHERE key = 'schema_version'")
RUNS = _fixed("runs", f"SELECT {RUN_COLUMNS} FROM runs ORDER BY run_id")
RUN_BY_ID = _fixed("run_by_id", f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", _int)
RUN_BY_NAME = _fixed("run_by_name", f"SELECT {RUN_COLUMNS} FROM runs WHERE name = ? "
                     f"ORDER BY run_id DESC LIMIT 1", _text)
NEXT_RUN_ID = _fixed("next_run_id", "SELECT nextval('run_id_seq')", write=True)
WINDOWS = _fixed("windows", "SELECT idx AS index, start_s, samples, mean_ns, stddev_ns, "
                 "min_ns, max_ns, above_threshold, global_min_ns, global_max_ns, extra "
                 "FROM windows WHERE run_id = ? ORDER BY idx", _int)
HISTOGRAMS = _fixed("histograms", "SELECT series, lower_ns, upper_ns, count FROM "
                    "histograms WHERE run_id = ? ORDER BY series, lower_ns", _int)
FILES_OF_RUN = _fixed("files_of_run", "SELECT first_seq, samples, name FROM sample_files "
                      "WHERE run_id = ? ORDER BY first_seq", _int)
FILE_DELETE = _fixed("file_delete", "DELETE FROM sample_files WHERE run_id = ? AND "
                     "name = ?", _int, _name, write=True)
SAMPLE_PARTS = _fixed("sample_parts", "SELECT seq, cpu, irq_tick FROM sample_parts WHERE "
                      "run_id = ? ORDER BY seq, cpu", _int)
SAMPLE_COUNT = _fixed("sample_count", "SELECT count(*) FROM samples WHERE run_id = ?",
                      _int)
SAMPLES_IN_RANGE = _fixed("samples_in_range", "SELECT count(*) FROM samples WHERE "
                          "run_id = ? AND cpu = ? AND seq >= ? AND seq <= ?",
                          _int, _int, _int, _int)
SAMPLES_SHIFT = _fixed("samples_shift", "UPDATE samples SET deadline_tick = deadline_tick "
                       "+ ?, entry_tick = entry_tick + ? WHERE run_id = ? AND seq >= ? "
                       "AND seq < ?", _int, _int, _int, _int, _int, write=True)


def _build_run_insert(args: Any) -> tuple[str, list[Any]]:
    cols, vals = _run_fields(args)
    return (f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
            f"RETURNING run_id", vals)


def _build_run_update(args: Any) -> tuple[str, list[Any]]:
    run_id, fields = _args(args, 2, "run_update")
    cols, vals = _run_fields(fields)
    return (f"UPDATE runs SET {', '.join(c + ' = ?' for c in cols)} WHERE run_id = ?",
            [*vals, _int(run_id)])


def _build_files_insert(args: Any) -> tuple[str, list[Any]]:
    rows = []
    for row in _list(args, _ROWS_PER_REQUEST):
        row = _list(row, 4)
        if len(row) != 4:
            raise BadRequest("a sample_files row is (run_id, first_seq, samples, name)")
        rows.append([_int(row[0]), _int(row[1]), _int(row[2]), _file_name(row[3])])
    return "INSERT INTO sample_files VALUES (?, ?, ?, ?)", rows


RUN_INSERT = Op("run_insert", _build_run_insert, write=True)
RUN_UPDATE = Op("run_update", _build_run_update, write=True)
FILES_INSERT = Op("files_insert", _build_files_insert, write=True, many=True)

# `irqlab serve`'s runs page (irqlab/serve/runs_query.py): the count and one page of run
# ids under filters and an order given as typed arguments, and those runs' rows, so the
# page is cut by the database even while a run lends the file (its summary figures and
# tags read by DuckDB's JSON functions; nothing but checked values crosses the socket).
RUNS_PAGE_SORTS = ("run_id", "name", "started_at", "target", "status",
                   "samples", "p50_ns", "p99_ns", "p999_ns", "max_ns")
RUNS_PAGE_FIGURES = RUNS_PAGE_SORTS[5:]         # summary keys: None sorts last
RUNS_BY_IDS_MAX = 500


def figure_sql(key: str) -> str:
    """A summary figure of a runs row as a DOUBLE (NULL when the run has none)."""
    if key not in RUNS_PAGE_FIGURES:
        raise BadRequest(f"no page figure {str(key)[:40]!r}")
    return f"TRY_CAST(json_extract_string(summary, '$.{key}') AS DOUBLE)"


def runs_page_where(filters: Any) -> tuple[str, list[Any]]:
    """`` WHERE ...`` (or "") and its parameters of the runs page's filters: name (a
    substring, any case), target, status, host (metadata.host.hostname), tag_key with
    tag_value, since (started at or after)."""
    if not isinstance(filters, dict):
        raise BadRequest("the runs page's filters are an object")
    text = {k: _text(v, 1000) for k, v in filters.items() if k != "since"}
    unknown = set(text) - {"name", "target", "status", "host", "tag_key", "tag_value"}
    if unknown:
        raise BadRequest(f"no runs page filter {sorted(unknown)[0][:40]!r}")
    clauses, args = [], []
    if text.get("name"):
        clauses.append("contains(lower(name), ?)")
        args.append(text["name"].lower())
    for column in ("target", "status"):
        if text.get(column):
            clauses.append(f"{column} = ?")
            args.append(text[column])
    if text.get("host"):
        clauses.append("json_extract_string(metadata, '$.host.hostname') = ?")
        args.append(text["host"])
    if "tag_key" in text:
        key = text["tag_key"]
        if not valid_tag_key(key) or "tag_value" not in text:
            raise BadRequest(f"a tag filter is a key and a value: {TAG_KEY_RULE}")
        clauses.append("json_extract_string(tags, ?) = ?")
        args += [f'$."{key}"', text["tag_value"]]
    if filters.get("since") is not None:
        clauses.append("started_at >= ?")
        args.append(_time(filters["since"]))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def _build_run_ids_page(args: Any) -> tuple[str, list[Any]]:
    if not isinstance(args, dict):
        raise BadRequest("run_ids_page takes {filters, sort, desc, limit, offset}")
    where, params = runs_page_where(args.get("filters", {}))
    sort = args.get("sort")
    if sort not in RUNS_PAGE_SORTS:
        raise BadRequest(f"sort by one of {', '.join(RUNS_PAGE_SORTS)}")
    way = "DESC" if _bool(args.get("desc")) else "ASC"
    column = figure_sql(sort) if sort in RUNS_PAGE_FIGURES else sort
    limit, offset = _int(args.get("limit")), _int(args.get("offset"))
    if not 0 <= limit <= RUNS_BY_IDS_MAX or offset < 0:
        raise BadRequest(f"a page is at most {RUNS_BY_IDS_MAX} runs from offset >= 0")
    return (f"SELECT run_id FROM runs{where} ORDER BY {column} {way} NULLS LAST, "
            f"run_id {way} LIMIT {limit} OFFSET {offset}", params)


def _build_run_count(args: Any) -> tuple[str, list[Any]]:
    where, params = runs_page_where(args)
    return f"SELECT count(*) FROM runs{where}", params


def _build_runs_by_ids(args: Any) -> tuple[str, list[Any]]:
    ids = [_int(i) for i in _list(args, RUNS_BY_IDS_MAX)]
    marks = ", ".join("?" * len(ids)) or "NULL"
    return f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id IN ({marks})", ids


RUN_IDS_PAGE = Op("run_ids_page", _build_run_ids_page)
RUN_COUNT = Op("run_count", _build_run_count)
RUNS_BY_IDS = Op("runs_by_ids", _build_runs_by_ids)

# Reading a run's samples: which columns, in which order (store/db.py's readers).
SAMPLE_COLUMNS = {"latency": "entry_tick, deadline_tick",
                  "latency_seq": "entry_tick, deadline_tick, seq",
                  "by_deadline": "deadline_tick, entry_tick, flags",
                  "records": "seq, deadline_tick, entry_tick, flags, cpu"}
SAMPLE_ORDERS = {"storage": "", "seq": " ORDER BY seq",
                 "deadline": " ORDER BY deadline_tick, seq"}


def samples_select(columns: str, order: str, from_item: str) -> str:
    """The SQL reading a run's samples (``from_item``: store/db.py's _samples_from)."""
    if columns not in SAMPLE_COLUMNS or order not in SAMPLE_ORDERS:
        raise BadRequest("unknown sample columns or order")
    return f"SELECT {SAMPLE_COLUMNS[columns]} FROM {from_item}{SAMPLE_ORDERS[order]}"


def samples_from(db_path: Path, run_id: int, names: list[str]) -> str:
    """A FROM item of a run's raw records: its files, or its rows of the samples table."""
    if names:
        return sample_files.read_sql(db_path, run_id, names)
    return f"(SELECT * FROM samples WHERE run_id = {int(run_id)})"


# Bulk rows a borrower inserts: fixed tables, columns and types.
_ROW_TABLES: dict[str, list[tuple[str, str]]] = {
    "windows": [("run_id", "int64"), ("idx", "int32"), ("start_s", "float64"),
                ("samples", "int64"), ("mean_ns", "int64"), ("stddev_ns", "int64"),
                ("min_ns", "int64"), ("max_ns", "int64"), ("above_threshold", "int64"),
                ("global_min_ns", "int64"), ("global_max_ns", "int64"),
                ("extra", "string")],
    "histograms": [("run_id", "int64"), ("series", "string"), ("lower_ns", "int64"),
                   ("upper_ns", "int64"), ("count", "uint64")],
    "sample_parts": [("run_id", "int64"), ("seq", "uint64"), ("cpu", "uint32"),
                     ("irq_tick", "uint64")]}

# Samples a borrower appends: raw little-endian records, no Arrow parsing of its bytes.
_FRAME_DTYPES = {
    "records": [("run_id", "<i8"), ("seq", "<u8"), ("deadline_tick", "<u8"),
                ("entry_tick", "<u8"), ("flags", "<u4"), ("cpu", "<u4")],
    "latency": [("seq", "<u8"), ("deadline_tick", "<u8"), ("entry_tick", "<u8")]}
_ABORT = b"!"


def _latency_select(run_id: int) -> str:
    return (f"{int(run_id)}::BIGINT, seq, deadline_tick, entry_tick, 0::UINTEGER, "
            f"0::UINTEGER")


# -- the holder's side --------------------------------------------------------------------
_M_MMAP_THRESHOLD = -3          # glibc's malloc.h
_MMAP_THRESHOLD_BYTES = 1 << 20


def _keep_big_buffers_out_of_the_heap() -> None:
    """Make glibc map every allocation of 1 MiB or more on its own (returned to the
    system when freed). Its default starts at 128 KiB but rises to the size of the
    largest block freed (up to 32 MiB), after which peers' 8 MiB frames, received by
    up to 64 threads, stayed in per-thread heaps: measured +223 MiB of the holder's RSS
    for 64 x 8 MiB frames with the FrameBudget alone, +26 MiB with this (mallopt(3),
    M_MMAP_THRESHOLD: setting it turns the rise off). Not glibc: nothing to do."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        pass


class _Client:
    """One connection's state in the holder."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.conn, self.pid = conn, pid
        self.busy = False
        self.in_transaction = False
        self.transaction_began = 0.0
        self.last_write = float("-inf")
        self.last_request = time.monotonic()      # its connection, until it asks

    def idle(self) -> bool:
        """Between requests and outside a transaction: dropping it loses nothing."""
        return not self.busy and not self.in_transaction

    def writing(self, now: float) -> bool:
        """Whether the holder's exit waits for it: a writer in a request, or one that
        wrote a moment ago (a run between two batches). A transaction left silent is not
        waited for (issue 47): it is rolled back when the holder closes."""
        return self.last_write > float("-inf") and (
            self.busy or now - self.last_write < _ACTIVE_WRITER_S)


class StoreServer:
    """Serves named store operations on a writable DuckDB connection to other irqlab
    processes (one thread and one DuckDB cursor each, at most MAX_CLIENTS)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path) -> None:
        self.con = con
        self.path = path
        self.idle_s = _env_s("IRQLAB_SHARE_IDLE_S", 300.0)
        self.grace_s = _env_s("IRQLAB_SHARE_GRACE_S", 30.0)
        self.transaction_s = _env_s("IRQLAB_SHARE_TRANSACTION_S", TRANSACTION_S)
        self._frames = FrameBudget(FRAMES_TOTAL_BYTES, FRAME_WAIT_S)
        self._log_window = (0.0, 0, 0)          # (start, lines shown, lines held back)
        self._log_lock = threading.Lock()
        self._clients: dict[socket.socket, _Client] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._listener: socket.socket | None = socket.socket(socket.AF_UNIX,
                                                             socket.SOCK_STREAM)
        try:
            self._listener.bind(socket_address(path))
        except OSError:
            # The name is taken (only by something else: a second holder of this file
            # cannot exist, DuckDB's lock forbids it): serve no one.
            self._listener.close()
            self._listener = None
            return
        self._listener.listen(64)
        _keep_big_buffers_out_of_the_heap()
        self._thread = threading.Thread(target=self._accept, name="irqlab-store-server",
                                        daemon=True)
        self._thread.start()

    # Every problem a peer causes is one line (never a traceback), and a flood of them a
    # few lines plus a count: the holder's stderr belongs to its run.
    def _log(self, text: str) -> None:
        now = time.monotonic()
        with self._log_lock:
            start, shown, held = self._log_window
            if now - start >= 10.0:
                if held:
                    self._emit(f"store socket: {held} more refused request(s) not shown")
                start, shown, held = now, 0, 0
            if shown < _LOG_LINES_PER_10_S:
                shown += 1
                self._emit(f"store socket: {text}")
            else:
                held += 1
            self._log_window = (start, shown, held)

    @staticmethod
    def _emit(line: str) -> None:
        try:
            if location.notice is not None:
                location.notice(line)
            else:
                print(f"irqlab: {line}", file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass                                  # stderr gone: nothing to tell

    def _accept(self) -> None:
        while True:
            listener = self._listener
            if listener is None:
                return
            try:
                conn, _ = listener.accept()
            except OSError as exc:
                if self._listener is None or exc.errno in (errno.EBADF, errno.EINVAL):
                    return                          # closed by stop()
                self._log(f"cannot accept a connection ({exc.strerror}); retrying")
                time.sleep(0.1)                     # e.g. out of file descriptors
                continue
            try:
                self._admit(conn)
            except Exception as exc:               # noqa: BLE001 - one line, never a trace
                self._log(f"connection dropped ({type(exc).__name__}: {exc})")
                conn.close()

    def _admit(self, conn: socket.socket) -> None:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            conn.close()
            return
        with self._lock:
            evicted = self._evict_idle() if len(self._clients) >= MAX_CLIENTS else None
            full = len(self._clients) >= MAX_CLIENTS and evicted is None
            if not full:
                client = _Client(conn, pid)
                self._clients[conn] = client
        if evicted is not None:
            # Silent connections must not starve a new client (issue 47: 64 of them made
            # `irqlab list` fail after 10 s): the one idle longest makes room.
            self._log(f"pid {evicted.pid}: idle connection dropped to serve pid {pid} "
                      f"({MAX_CLIENTS} connections)")
            with contextlib.suppress(OSError):
                evicted.conn.shutdown(socket.SHUT_RDWR)   # its thread forgets it
        if full:
            self._log(f"pid {pid} refused: {MAX_CLIENTS} connections already busy")
            conn.close()
            return
        try:
            threading.Thread(target=self._serve, args=(client,), daemon=True,
                             name="irqlab-store-client").start()
        except RuntimeError:                        # no thread to be had: refuse it
            self._forget(client)
            raise

    def _evict_idle(self) -> _Client | None:
        """(Lock held) The idle client that asked last the longest ago among those of
        the process with the most idle connections (one peer's flood evicts its own
        first), out of the table (its thread still closes its socket), or None when
        every one is busy."""
        idle = [c for c in self._clients.values() if c.idle()]
        if not idle:
            return None
        per_pid = collections.Counter(c.pid for c in idle)
        most = max(per_pid.values())
        oldest = min((c for c in idle if per_pid[c.pid] == most),
                     key=lambda c: c.last_request)
        del self._clients[oldest.conn]
        return oldest

    def _forget(self, client: _Client) -> None:
        client.conn.close()
        with self._lock:
            self._clients.pop(client.conn, None)
            self._idle.notify_all()

    def _serve(self, client: _Client) -> None:
        conn = client.conn
        cur = None
        try:
            cur = self.con.cursor()
            # A peer that connects and says nothing gets FIRST_REQUEST_S, then idle_s
            # between its requests.
            conn.settimeout(min(FIRST_REQUEST_S, self.idle_s))
            _send_json(conn, {"ok": True, "version": PROTOCOL_VERSION, "pid": os.getpid()})
            while True:
                if client.in_transaction:
                    # Its transaction's time runs between requests too (issue 47: one
                    # left open past the holder's end made the holder's last write fail).
                    left = client.transaction_began + self.transaction_s - time.monotonic()
                    if left <= 0:
                        raise _TransactionTooLong(self.transaction_s)
                    conn.settimeout(min(self.idle_s, left))
                try:
                    req = _recv_json(conn, self._frames)
                except TimeoutError:
                    if client.in_transaction and conn.gettimeout() < self.idle_s:
                        raise _TransactionTooLong(self.transaction_s) from None
                    raise
                conn.settimeout(self.idle_s)
                with self._lock:
                    client.busy = True
                    client.last_request = time.monotonic()
                try:
                    self._handle(client, cur, req)
                finally:
                    with self._lock:
                        client.busy = False
                        self._idle.notify_all()
        except ConnectionError:
            pass                                    # the peer is done
        except TimeoutError:
            self._log(f"pid {client.pid}: idle for {conn.gettimeout():g} s, disconnected")
        except (ProtocolError, _TransactionTooLong) as exc:
            self._log(f"pid {client.pid}: {exc}; disconnected")
        except OSError:
            pass                                    # the peer went away mid-reply
        except Exception as exc:                   # noqa: BLE001 - one line, never a trace
            self._log(f"pid {client.pid}: {type(exc).__name__}: {_first_line(exc)}; "
                      f"disconnected")
        finally:
            if cur is not None:
                with contextlib.suppress(Exception):
                    cur.close()                     # an open transaction rolls back
            self._forget(client)

    def _handle(self, client: _Client, cur: Any, req: dict[str, Any]) -> None:
        op_name = req.get("op")
        args = req.get("args")
        try:
            if op_name == "read_samples":
                self._read_samples(client, cur, args)
                return
            if op_name == "insert_samples":
                self._insert_samples(client, cur, args)
            elif op_name == "insert_rows":
                self._insert_rows(client, cur, args)
            elif op_name == "figures":
                self._figures(client, cur, args)
            elif isinstance(op_name, str) and op_name in OPS:
                self._run_op(client, cur, OPS[op_name], args)
            else:
                raise BadRequest(f"no operation {str(op_name)[:40]!r}")
        except BadRequest as exc:
            self._log(f"pid {client.pid}: request refused: {exc}")
            _send_json(client.conn, {"error": "InvalidInputException",
                                     "message": f"refused by the holder: {exc}"})
        except duckdb.Error as exc:
            # The borrower's own error (a constraint, a full disk): its to report.
            _send_json(client.conn, {"error": type(exc).__name__, "message": str(exc)})

    def _run_op(self, client: _Client, cur: Any, op: Op, args: Any) -> None:
        sql, params = op.build(args)
        if op.write:
            self._wrote(client)
        if op is BEGIN and not client.in_transaction:
            client.transaction_began = time.monotonic()
        if op is BEGIN:
            client.in_transaction = True
        elif op in (COMMIT, ROLLBACK):
            client.in_transaction = False
        if op.many:
            cur.executemany(sql, params)
            self._send_rows(client.conn, None, [])
            return
        result = cur.execute(sql, params)
        if result.description is None:
            self._send_rows(client.conn, None, [])
            return
        self._send_rows(client.conn, [d[0] for d in result.description], result.fetchall())

    def _wrote(self, client: _Client) -> None:
        with self._lock:
            client.last_write = time.monotonic()

    @staticmethod
    def _send_rows(conn: socket.socket, columns: list[str] | None, rows: list[Any]) -> None:
        """Rows in replies of at most _ROWS_PER_REPLY rows ("more": another follows)."""
        for start in range(0, max(1, len(rows)), _ROWS_PER_REPLY):
            chunk = rows[start:start + _ROWS_PER_REPLY]
            _send_json(conn, {"ok": True, "columns": columns, "rows": chunk,
                              "more": start + _ROWS_PER_REPLY < len(rows)})

    def _from_item(self, cur: Any, run_id: int) -> str:
        names = [r[0] for r in cur.execute("SELECT name FROM sample_files WHERE run_id = ? "
                                           "ORDER BY first_seq", [run_id]).fetchall()]
        return samples_from(self.path, run_id, names)

    def _read_samples(self, client: _Client, cur: Any, args: Any) -> None:
        if not isinstance(args, dict):
            raise BadRequest("read_samples takes an object")
        run_id = _int(args.get("run_id"))
        batch = _int(args.get("batch", _MAX_BATCH_ROWS))
        if not 1 <= batch <= _MAX_BATCH_ROWS:
            raise BadRequest(f"a batch is 1 to {_MAX_BATCH_ROWS} rows")
        sql = samples_select(str(args.get("columns")), str(args.get("order")),
                             self._from_item(cur, run_id))
        reader = cur.sql(sql).to_arrow_reader(batch)
        _send_json(client.conn, {"ok": True})
        _send(client.conn, _ipc_schema(reader.schema))
        for rb in reader:
            for piece in _slices(rb):
                _send(client.conn, _ipc(piece))
        _send(client.conn, b"")

    def _figures(self, client: _Client, cur: Any, args: Any) -> None:
        from irqlab.store.quantiles import LATENCY_SQL, duckdb_quantiles, stored_figures

        run_id, quantiles, threshold = _args(args, 3, "figures")
        run_id = _int(run_id)
        qs = [float(q) for q in _list(quantiles, _MAX_QUANTILES)
              if isinstance(q, (int, float)) and not isinstance(q, bool) and 0 <= q <= 1]
        if len(qs) != len(quantiles):
            raise BadRequest("quantiles are numbers from 0 to 1")
        threshold = _opt(_int)(threshold)
        from_item = self._from_item(cur, run_id)

        def query(select: str, _rid: int, tail: str = "") -> list[tuple]:
            return cur.execute(f"SELECT {select} FROM (SELECT {LATENCY_SQL} AS lat FROM "
                               f"{from_item}) AS s {tail}").fetchall()
        got = stored_figures(query, duckdb_quantiles, run_id, qs, threshold)
        _send_json(client.conn, {"ok": True, "figures": [
            got.count, got.min_tick, got.max_tick, got.above, got.quantile_tick]})

    def _insert_rows(self, client: _Client, cur: Any, args: Any) -> None:
        if not isinstance(args, dict) or args.get("table") not in _ROW_TABLES:
            raise BadRequest(f"insert_rows takes a table: {', '.join(_ROW_TABLES)}")
        spec = _ROW_TABLES[args["table"]]
        rows = _list(args.get("rows"), _ROWS_PER_REQUEST)
        if any(not isinstance(r, list) or len(r) != len(spec) for r in rows):
            raise BadRequest(f"a {args['table']} row has {len(spec)} values")
        try:
            table = pa.table({name: pa.array([r[i] for r in rows], type=getattr(pa, kind)())
                              for i, (name, kind) in enumerate(spec)})
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise BadRequest(f"bad {args['table']} values ({type(exc).__name__})") from None
        self._wrote(client)
        cols = ", ".join(name for name, _ in spec)
        cur.register("_irqlab_rows", table)
        try:
            cur.execute(f"INSERT INTO {args['table']} ({cols}) SELECT {cols} "
                        f"FROM _irqlab_rows")
        finally:
            with contextlib.suppress(duckdb.Error):
                cur.unregister("_irqlab_rows")
        self._send_rows(client.conn, None, [])

    def _insert_samples(self, client: _Client, cur: Any, args: Any) -> None:
        """Frames of raw records follow the request, ended by an empty frame (or _ABORT:
        the borrower's own source failed); one INSERT pulls them as they come."""
        if not isinstance(args, dict) or args.get("kind") not in _FRAME_DTYPES:
            raise ProtocolError("insert_samples takes a kind: records or latency")
        kind = args["kind"]
        try:
            run_id = _int(args.get("run_id")) if kind == "latency" else None
        except BadRequest as exc:
            raise ProtocolError(f"insert_samples: {exc}") from None
        dtype = np.dtype(_FRAME_DTYPES[kind])
        state = {"ended": False, "aborted": False, "broken": None}

        def batches() -> Iterator[pa.RecordBatch]:
            while True:
                with _received(client.conn, self._frames) as body:
                    if not body or body == _ABORT:
                        state["ended"] = True
                        state["aborted"] = body == _ABORT
                        if state["aborted"]:
                            raise ProtocolError("aborted by the borrower")
                        return
                    if len(body) % dtype.itemsize:
                        raise ProtocolError(f"a {kind} frame holds whole "
                                            f"{dtype.itemsize}-byte records")
                    recs = np.frombuffer(body, dtype)
                    batch = pa.record_batch([numeric_array(np.ascontiguousarray(recs[n]))
                                             for n in dtype.names], names=list(dtype.names))
                    del recs
                self._wrote(client)
                yield batch

        def guarded() -> Iterator[pa.RecordBatch]:
            try:
                yield from batches()
            except (ProtocolError, ConnectionError, OSError) as exc:
                state["broken"] = exc
                raise
        schema = pa.schema([(n, pa.from_numpy_dtype(dtype[n])) for n in dtype.names])
        reader = pa.RecordBatchReader.from_batches(schema, guarded())
        self._wrote(client)
        cur.register("_irqlab_stream", reader)
        select = "*" if run_id is None else _latency_select(run_id)
        error: duckdb.Error | None = None
        try:
            cur.execute(f"INSERT INTO samples SELECT {select} FROM _irqlab_stream")
        except duckdb.Error as exc:
            error = exc
        finally:
            with contextlib.suppress(duckdb.Error):
                cur.unregister("_irqlab_stream")
        broken = state["broken"]
        if state["aborted"]:
            _send_json(client.conn, {"error": "InvalidInputException",
                                     "message": "aborted by the borrower"})
            return
        if broken is not None:
            raise broken                              # framing broken: disconnect
        while not state["ended"]:                     # failed early: skip the rest
            with _received(client.conn, self._frames) as body:
                state["ended"] = not body or body == _ABORT
        if error is not None:
            raise error
        self._send_rows(client.conn, None, [])

    def end_transactions(self, wait_s: float = 10.0) -> int:
        """Roll back every peer's open transaction (its connection is closed: its thread
        closes its cursor, which rolls back) and wait for them, at most ``wait_s``; the
        number ended. The holder calls this when its own write conflicts with a peer's
        (store/db.py): the holder's run comes first."""
        with self._lock:
            held = [c for c in self._clients.values() if c.in_transaction]
            for client in held:
                with contextlib.suppress(OSError):
                    client.conn.shutdown(socket.SHUT_RDWR)
            self._idle.wait_for(lambda: not any(c.conn in self._clients for c in held),
                                wait_s)
        for client in held:
            self._log(f"pid {client.pid}: its transaction rolled back for the holder's "
                      f"own write; disconnected")
        return len(held)

    def clients(self) -> int:
        """Processes connected now (readers and writers)."""
        with self._lock:
            return len(self._clients) if self._listener is not None else 0

    def writers(self) -> int:
        """Clients writing now (another run): the holder's exit waits for them a while."""
        now = time.monotonic()
        with self._lock:
            return sum(c.writing(now) for c in self._clients.values())

    def stop(self, on_wait: Any = None, reader_grace_s: float = 5.0) -> None:
        """Stop accepting; let clients that are writing finish for up to ``grace_s``
        (a writer idle for _ACTIVE_WRITER_S is not waited for), give the rest
        ``reader_grace_s``, then close what is left."""
        if self._listener is None:
            return
        listener, self._listener = self._listener, None
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)     # wakes accept(); close() does not
        listener.close()
        self._thread.join(5.0)
        deadline = time.monotonic() + self.grace_s
        with self._lock:
            def writing() -> int:
                now = time.monotonic()
                return sum(c.writing(now) for c in self._clients.values())
            if writing() and on_wait is not None:
                on_wait(writing())
            while writing() and time.monotonic() < deadline:
                self._idle.wait(0.5)
            self._idle.wait_for(lambda: not self._clients, reader_grace_s)
            for conn in list(self._clients):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self._idle.wait_for(lambda: not self._clients, 5.0)
        self.con = None           # the holder closes its connection next


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""


# -- the other processes' side ------------------------------------------------------------
class HolderGone(ConnectionError):
    """The process lending the database ended (or broke the connection)."""


class NotLent(duckdb.InvalidInputException):
    """SQL text asked of a borrowed connection: only named operations cross the socket."""


class RemoteConnection:
    """The store's operations carried out by the holder (named, typed: no SQL text)."""

    def __init__(self, sock: socket.socket, holder_pid: int) -> None:
        self._sock = sock
        self.holder_pid = holder_pid
        self._lock = threading.Lock()
        # Inside BEGIN ... COMMIT: the transaction lives in the holder, and dies with it
        # (store/db.py's hand-over then begins it again and redoes its writes).
        self.in_transaction = False

    def _gone(self, exc: BaseException) -> HolderGone:
        return HolderGone(f"the irqlab process holding the database (pid "
                          f"{self.holder_pid}) is gone ({exc})")

    @staticmethod
    def _check(reply: dict[str, Any]) -> dict[str, Any]:
        if "error" in reply:
            cls = getattr(duckdb, str(reply["error"]), None)
            if not (isinstance(cls, type) and issubclass(cls, duckdb.Error)):
                cls = duckdb.Error
            raise cls(reply.get("message", ""))
        return reply

    def _request(self, op: str, args: Any) -> dict[str, Any]:
        """One request and its (first) reply; the caller holds the lock."""
        try:
            _send_json(self._sock, {"op": op, "args": args})
            return _recv_json(self._sock)
        except (ConnectionError, OSError, ProtocolError) as exc:
            raise self._gone(exc) from None

    def _more(self) -> dict[str, Any]:
        try:
            return _recv_json(self._sock)
        except (ConnectionError, OSError, ProtocolError) as exc:
            raise self._gone(exc) from None

    def call(self, op: Op, args: Any = None) -> tuple[list[tuple], Any]:
        """Rows and DB-API ``description`` of a named operation."""
        if op.many and args and len(args) > _ROWS_PER_REQUEST:
            for start in range(0, len(args), _ROWS_PER_REQUEST):
                self.call(op, list(args[start:start + _ROWS_PER_REQUEST]))
            return [], None
        with self._lock:
            reply = self._request(op.name, list(args) if isinstance(args, tuple) else args)
            rows = list(reply.get("rows") or [])
            while reply.get("more"):
                reply = self._more()
                rows += reply.get("rows") or []
        self._check(reply)
        if op is BEGIN:
            self.in_transaction = True
        elif op in (COMMIT, ROLLBACK):
            self.in_transaction = False
        cols = reply.get("columns")
        desc = [(c, None, None, None, None, None, None) for c in cols] \
            if cols is not None else None
        return [tuple(r) for r in rows], desc

    def figures(self, run_id: int, quantiles: list[float], threshold_tick: int | None
                ) -> list[Any]:
        with self._lock:
            reply = self._request("figures", [int(run_id), [float(q) for q in quantiles],
                                              threshold_tick])
        return self._check(reply)["figures"]

    def insert_rows(self, table_name: str, table: pa.Table) -> None:
        """Rows of windows, histograms or sample parts (the columns of _ROW_TABLES, in that
        order)."""
        names = [name for name, _ in _ROW_TABLES[table_name]]
        rows = [[row[n] for n in names] for row in table.select(names).to_pylist()]
        for start in range(0, len(rows), _ROWS_PER_REQUEST):
            with self._lock:
                reply = self._request("insert_rows", {
                    "table": table_name, "rows": rows[start:start + _ROWS_PER_REQUEST]})
            self._check(reply)

    def insert_samples(self, kind: str, run_id: int | None,
                       batches: Iterator[pa.RecordBatch]) -> None:
        """Append batches (the columns of _FRAME_DTYPES[kind]) with one INSERT in the
        holder; an exception of ``batches`` aborts it and is raised as it is."""
        dtype = np.dtype(_FRAME_DTYPES[kind])
        with self._lock:
            try:
                _send_json(self._sock, {"op": "insert_samples",
                                        "args": {"kind": kind, "run_id": run_id}})
                try:
                    for batch in batches:
                        for piece in _slices(batch):
                            recs = np.empty(piece.num_rows, dtype)
                            for name in dtype.names:
                                recs[name] = numeric_view(piece.column(name))
                            _send(self._sock, recs.tobytes())
                except (ConnectionError, OSError):
                    raise
                except BaseException:
                    _send(self._sock, _ABORT)
                    _recv_json(self._sock)
                    raise
                _send(self._sock, b"")
                reply = _recv_json(self._sock)
            except (ConnectionError, OSError, ProtocolError) as exc:
                raise self._gone(exc) from None
        self._check(reply)

    def read_samples(self, run_id: int, columns: str, order: str, batch: int
                     ) -> pa.RecordBatchReader:
        """A run's samples streamed by the holder; the connection is busy until read."""
        self._lock.acquire()
        try:
            reply = self._request("read_samples", {
                "run_id": int(run_id), "columns": columns, "order": order,
                "batch": max(1, min(int(batch), _MAX_BATCH_ROWS))})
            self._check(reply)
            schema = pa.ipc.open_stream(_recv(self._sock)).schema
        except BaseException as exc:
            self._lock.release()
            if isinstance(exc, (ConnectionError, OSError, ProtocolError)) and \
                    not isinstance(exc, HolderGone):
                raise self._gone(exc) from None
            raise

        def batches() -> Iterator[pa.RecordBatch]:
            done = False
            try:
                while True:
                    body = _recv(self._sock)
                    if not body:
                        done = True
                        return
                    yield from pa.ipc.open_stream(body)
            except (ConnectionError, OSError, ProtocolError) as exc:
                done = True
                raise self._gone(exc) from None
            finally:
                try:
                    while not done and _recv(self._sock):   # left early: skip the rest
                        pass
                except (ConnectionError, OSError, ProtocolError):
                    pass
                finally:
                    self._lock.release()

        return pa.RecordBatchReader.from_batches(schema, batches())

    def execute(self, sql: str, params: Any = None) -> Any:
        raise NotLent("SQL text is not lent through the store's socket: only the store's "
                      "named operations are (irqlab/store/share.py)")

    sql = executemany = execute

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


def connect(path: str | os.PathLike, timeout_s: float = 5.0) -> RemoteConnection | None:
    """A connection lent by the process holding ``path``, or None if none serves it.
    A full accept queue (a burst of connections the holder has not taken yet: Linux
    answers EAGAIN at once) is retried until ``timeout_s``, not taken for "no holder"."""
    deadline = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(socket_address(path))
            break
        except BlockingIOError:
            sock.close()
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)
        except OSError:
            sock.close()
            return None
    try:
        hello = _recv_json(sock)
    except (OSError, ConnectionError, ProtocolError):
        sock.close()
        return None
    if hello.get("version") != PROTOCOL_VERSION:
        sock.close()
        return None
    sock.settimeout(None)
    return RemoteConnection(sock, int(hello.get("pid", 0)))
