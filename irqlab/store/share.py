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

Protocol (version 1; both ends are this module): frames of a 4-byte little-endian length
and a body. A request is one JSON frame ``{"op": ..., ...}``, plus one Arrow IPC frame for
``register``; a reply is one JSON frame (``{"ok": true, ...}`` or ``{"error": CLASS,
"message": TEXT}``), plus Arrow IPC frames for ``arrow`` ended by an empty frame. Row
values travel as tagged JSON so ``fetchall()`` returns the same Python types as DuckDB's
(int for HUGEINT, Decimal, datetime, UUID).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import os
import socket
import struct
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import duckdb

from irqlab.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
else:
    # numpy and pyarrow on first use (irqlab/lazy.py): `irqlab list` needs neither.
    np = lazy_import("numpy")
    pa = lazy_import("pyarrow")

PROTOCOL_VERSION = 1
_SOCKET_PREFIX = "irqlab-store-"
_LEN = struct.Struct("<I")
_MAX_FRAME = 1 << 31
_BATCH_ROWS = 1 << 20


def socket_address(path: str | os.PathLike) -> str:
    """The abstract socket name of a database file (its device and inode)."""
    st = os.stat(path)
    digest = hashlib.sha256(f"{st.st_dev}:{st.st_ino}".encode()).hexdigest()[:32]
    return "\0" + _SOCKET_PREFIX + digest


# -- framing and values -------------------------------------------------------------------
def _send(sock: socket.socket, body: bytes) -> None:
    sock.sendall(_LEN.pack(len(body)) + body)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the other end closed the connection")
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket) -> bytes:
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if n > _MAX_FRAME:
        raise ConnectionError(f"frame of {n} bytes refused")
    return _recv_exact(sock, n)


def _send_json(sock: socket.socket, obj: dict[str, Any]) -> None:
    _send(sock, json.dumps(obj, default=_tag).encode())


def _recv_json(sock: socket.socket) -> dict[str, Any]:
    return json.loads(_recv(sock), object_hook=_untag)


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


def _ipc(batch_or_table: pa.RecordBatch | pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch_or_table.schema) as writer:
        writer.write(batch_or_table)
    return sink.getvalue().to_pybytes()


def _ipc_schema(schema: pa.Schema) -> bytes:
    sink = pa.BufferOutputStream()
    pa.ipc.new_stream(sink, schema).close()
    return sink.getvalue().to_pybytes()


def _from_ipc(body: bytes) -> pa.Table:
    return pa.ipc.open_stream(body).read_all()


# -- the holder's side --------------------------------------------------------------------
class StoreServer:
    """Serves a writable DuckDB connection to other irqlab processes (one thread each)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path) -> None:
        self.con = con
        self.path = path
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(socket_address(path))
        except OSError:
            # The name is taken (only by something else: a second holder of this file
            # cannot exist, DuckDB's lock forbids it): serve no one.
            self._listener.close()
            self._listener = None
            return
        self._listener.listen(16)
        self._clients: set[socket.socket] = set()
        self._writers: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._thread = threading.Thread(target=self._accept, name="irqlab-store-server",
                                        daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return                                  # closed by stop()
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                    struct.calcsize("3i"))
            _pid, uid, _gid = struct.unpack("3i", creds)
            if uid != os.getuid():
                conn.close()
                continue
            with self._lock:
                self._clients.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="irqlab-store-client").start()

    def _serve(self, conn: socket.socket) -> None:
        cur = self.con.cursor()
        registered: dict[str, pa.Table] = {}
        result: Any = None
        try:
            _send_json(conn, {"ok": True, "version": PROTOCOL_VERSION, "pid": os.getpid()})
            while True:
                try:
                    req = _recv_json(conn)
                except (ConnectionError, OSError, ValueError):
                    return
                op = req.get("op")
                try:
                    if op == "execute":
                        result = cur.execute(req["sql"], req.get("params") or [])
                        cols = [d[0] for d in result.description] if result.description \
                            else None
                        if not req["sql"].lstrip().upper().startswith(("SELECT", "WITH",
                                                                      "PRAGMA", "SHOW",
                                                                      "DESCRIBE")):
                            self._mark_writer(conn)
                        _send_json(conn, {"ok": True, "columns": cols})
                    elif op == "executemany":
                        cur.executemany(req["sql"], req.get("params") or [])
                        result = None
                        self._mark_writer(conn)
                        _send_json(conn, {"ok": True, "columns": None})
                    elif op == "rows":
                        rows = result.fetchall() if result is not None and \
                            result.description else []
                        result = None
                        _send_json(conn, {"ok": True, "rows": rows})
                    elif op in ("arrow", "sql_arrow"):
                        if op == "sql_arrow":
                            reader = cur.sql(req["sql"]).to_arrow_reader(
                                int(req.get("batch") or _BATCH_ROWS))
                        else:
                            reader = result.to_arrow_reader(_BATCH_ROWS)
                            result = None
                        _send_json(conn, {"ok": True})
                        _send(conn, _ipc_schema(reader.schema))
                        for batch in reader:
                            _send(conn, _ipc(batch))
                        _send(conn, b"")
                    elif op == "register":
                        table = _from_ipc(_recv(conn))
                        registered[req["name"]] = table
                        cur.register(req["name"], table)
                        _send_json(conn, {"ok": True})
                    elif op == "unregister":
                        cur.unregister(req["name"])
                        registered.pop(req["name"], None)
                        _send_json(conn, {"ok": True})
                    else:
                        _send_json(conn, {"error": "Error", "message": f"unknown op {op!r}"})
                except duckdb.Error as exc:
                    result = None
                    _send_json(conn, {"error": type(exc).__name__, "message": str(exc)})
        except (ConnectionError, OSError):
            return
        finally:
            cur.close()
            conn.close()
            with self._lock:
                self._clients.discard(conn)
                self._writers.discard(conn)
                self._idle.notify_all()

    def _mark_writer(self, conn: socket.socket) -> None:
        with self._lock:
            self._writers.add(conn)

    def clients(self) -> int:
        """Processes connected now (readers and writers)."""
        with self._lock:
            return len(self._clients) if self._listener is not None else 0

    def writers(self) -> int:
        """Clients that have written (another run): the holder waits for them."""
        with self._lock:
            return len(self._writers)

    def stop(self, on_wait: Any = None, reader_grace_s: float = 5.0) -> None:
        """Stop accepting; let writing clients finish (however long: their runs must
        land), give readers ``reader_grace_s``, then close what is left."""
        if self._listener is None:
            return
        try:
            self._listener.shutdown(socket.SHUT_RDWR)   # wakes accept(); close() does not
        except OSError:
            pass
        self._listener.close()
        self._listener = None
        self._thread.join(5.0)
        with self._lock:
            if self._writers and on_wait is not None:
                on_wait(len(self._writers))
            while self._writers:
                self._idle.wait(1.0)
            self._idle.wait_for(lambda: not self._clients, reader_grace_s)
            for conn in list(self._clients):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._idle.wait_for(lambda: not self._clients, 5.0)
        self.con = None           # the holder closes its connection next


# -- the other processes' side ------------------------------------------------------------
class HolderGone(ConnectionError):
    """The process lending the database ended (or broke the connection)."""


class RemoteResult:
    """What ``RemoteConnection.execute`` returns: DB-API ``description``/``fetch*``, and
    Arrow/numpy as DuckDB's own result offers them."""

    def __init__(self, con: "RemoteConnection", columns: list[str] | None) -> None:
        self._con = con
        self.description = [(c, None, None, None, None, None, None) for c in columns] \
            if columns is not None else None
        self._rows: list[tuple] | None = None

    def fetchall(self) -> list[tuple]:
        if self._rows is None:
            self._rows = [tuple(r) for r in self._con._call({"op": "rows"})["rows"]] \
                if self.description else []
        rows, self._rows = self._rows, []
        return rows

    def fetchone(self) -> tuple | None:
        if self._rows is None:
            self.fetchall_into()
        assert self._rows is not None
        return self._rows.pop(0) if self._rows else None

    def fetchall_into(self) -> None:
        self._rows = self.fetchall()

    def to_arrow_table(self) -> pa.Table:
        return self._con._arrow({"op": "arrow"}).read_all()

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        table = self.to_arrow_table()
        return {name: table.column(name).to_numpy() for name in table.column_names}


class RemoteRelation:
    """``RemoteConnection.sql(query)``: read lazily as Arrow (``to_arrow_reader``)."""

    def __init__(self, con: "RemoteConnection", sql: str) -> None:
        self._con, self._sql = con, sql

    def to_arrow_reader(self, batch: int = _BATCH_ROWS) -> pa.RecordBatchReader:
        return self._con._arrow({"op": "sql_arrow", "sql": self._sql, "batch": batch})

    def to_arrow_table(self) -> pa.Table:
        return self.to_arrow_reader().read_all()

    arrow = to_arrow_table
    fetch_arrow_table = to_arrow_table

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        table = self.to_arrow_table()
        return {name: table.column(name).to_numpy() for name in table.column_names}

    def fetchall(self) -> list[tuple]:
        return self._con.execute(self._sql).fetchall()


class RemoteConnection:
    """The DuckDB connection methods irqlab's Store uses, carried out by the holder."""

    def __init__(self, sock: socket.socket, holder_pid: int) -> None:
        self._sock = sock
        self.holder_pid = holder_pid
        self._lock = threading.Lock()

    def _call(self, req: dict[str, Any], payload: bytes | None = None) -> dict[str, Any]:
        with self._lock:
            try:
                _send_json(self._sock, req)
                if payload is not None:
                    _send(self._sock, payload)
                reply = _recv_json(self._sock)
            except (ConnectionError, OSError) as exc:
                raise self._gone(exc) from None
        return self._check(reply)

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

    def _arrow(self, req: dict[str, Any]) -> pa.RecordBatchReader:
        """Arrow batches streamed by the holder; the connection is busy until read."""
        self._lock.acquire()
        try:
            _send_json(self._sock, req)
            self._check(_recv_json(self._sock))
            schema = pa.ipc.open_stream(_recv(self._sock)).schema
        except BaseException as exc:
            self._lock.release()
            if isinstance(exc, (ConnectionError, OSError)):
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
            except (ConnectionError, OSError) as exc:
                done = True
                raise self._gone(exc) from None
            finally:
                try:
                    while not done and _recv(self._sock):   # left early: skip the rest
                        pass
                except (ConnectionError, OSError):
                    pass
                finally:
                    self._lock.release()

        return pa.RecordBatchReader.from_batches(schema, batches())

    def execute(self, sql: str, params: list[Any] | None = None) -> RemoteResult:
        reply = self._call({"op": "execute", "sql": sql, "params": list(params or [])})
        return RemoteResult(self, reply.get("columns"))

    def executemany(self, sql: str, params: list[Any] | None = None) -> None:
        self._call({"op": "executemany", "sql": sql,
                    "params": [list(p) for p in params or []]})

    def sql(self, query: str) -> RemoteRelation:
        return RemoteRelation(self, query)

    def register(self, name: str, table: pa.Table) -> None:
        self._call({"op": "register", "name": name}, _ipc(table))

    def unregister(self, name: str) -> None:
        self._call({"op": "unregister", "name": name})

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


def connect(path: str | os.PathLike, timeout_s: float = 5.0) -> RemoteConnection | None:
    """A connection lent by the process holding ``path``, or None if none serves it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(socket_address(path))
        hello = _recv_json(sock)
    except (OSError, ConnectionError, ValueError):
        sock.close()
        return None
    if hello.get("version") != PROTOCOL_VERSION:
        sock.close()
        return None
    sock.settimeout(None)
    return RemoteConnection(sock, int(hello.get("pid", 0)))
