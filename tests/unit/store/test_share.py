"""One DuckDB file, several processes (irqlab/store/share.py): the holder lends its
connection; readers and a second writer work through it; a holder that does not lend is
waited for and named; a holder that dies is one clean error."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import signal
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest

from irqlab.samples.record import RECORD_DTYPE
from irqlab.store import Store, StoreError
from irqlab.store import share
from irqlab.store.interface import NewRun

# Nothing host-wide: "native" here is a run record's target, no probe runs (the word
# alone had put it in the host group, tests/conftest.py).
XDIST_GROUP = ""

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _child(code: str, **kw) -> subprocess.Popen:
    """A Python child that prints 'ready' when it holds the file, and ends on a line in."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, **kw)


def _holder(db) -> subprocess.Popen:
    proc = _child(f"""
        import sys
        from irqlab.store import Store
        from irqlab.store.interface import NewRun
        s = Store({str(db)!r})
        s.create_run(NewRun('first', 'native'))
        print('ready', flush=True)
        sys.stdin.readline()
        s.close()
        print('closed', flush=True)
        """)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _end(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate("\n", timeout=60)
    return out.strip()


@pytest.mark.parametrize("in_files", [False, True])
def test_reader_and_second_writer_work_through_the_holder(tmp_path, monkeypatch, in_files):
    db = tmp_path / "x.duckdb"
    holder = _holder(db)
    if in_files:
        # The holder runs our queries in its own cwd: sample files are named absolutely.
        monkeypatch.chdir(tmp_path)
    try:
        with Store(db, read_only=True) as reader:
            assert reader.holder_pid == holder.pid
            assert [r.name for r in reader.runs()] == ["first"]
        with Store("x.duckdb" if in_files else db) as writer:
            assert writer.holder_pid == holder.pid
            rid = writer.create_run(NewRun("second", "native", {"period_ns": 1000}, {"x": 1}))
            if in_files:
                assert writer.keep_samples_in_files(rid)
            recs = np.zeros(50_000, RECORD_DTYPE)
            recs["seq"] = np.arange(50_000)
            recs["entry_tick"] = np.arange(50_000) * 3
            with writer.transaction():
                writer.add_samples(rid, recs)
            got = np.concatenate([b.column("entry_tick").to_numpy()
                                  for b in writer.iter_samples(rid, batch=7_000)])
            assert np.array_equal(got, recs["entry_tick"])
            # A reader that stops early leaves the connection usable.
            it = writer.iter_samples(rid, batch=1_000)
            next(iter(it))
            it.close()
            assert writer.resolve(str(rid)).params == {"period_ns": 1000}
            # A failed transaction rolls back on the holder's side too.
            with pytest.raises(RuntimeError):
                with writer.transaction():
                    writer.add_samples(rid, recs[:10])
                    raise RuntimeError("abort")
            assert writer.sample_count(rid) == 50_000
    finally:
        assert _end(holder) == "closed"
    with Store(db, read_only=True) as after:
        assert after.holder_pid is None
        assert [r.name for r in after.runs()] == ["first", "second"]
        assert after.sample_count(2) == 50_000 and bool(after._files(2)) == in_files


def test_rows_keep_duckdb_types_through_the_holder(tmp_path):
    db = tmp_path / "x.duckdb"
    holder = _holder(db)
    try:
        with Store(db) as writer:
            assert writer.holder_pid == holder.pid
            rid = writer.create_run(NewRun(
                "typed", "native", {"a": [1, 2]}, {"b": None}, tags={"k": "é"},
                columns={"tick_hz": 10**9, "emulated": True, "arch": None,
                         "threshold_ns": np.int64(5000)}))
            writer.finish_run(rid, "ok", {"p99_ns": 12}, message="done")
            borrowed = writer.resolve(str(rid))
    finally:
        _end(holder)
    with Store(db, read_only=True) as local:
        assert local.holder_pid is None
        assert local.resolve(str(rid)) == borrowed
    assert isinstance(borrowed.started_at, dt.datetime) and borrowed.emulated is True
    assert borrowed.tags == {"k": "é"} and borrowed.threshold_ns == 5000


def test_sql_text_is_not_lent(tmp_path):
    db = tmp_path / "x.duckdb"
    holder = _holder(db)
    try:
        with Store(db, read_only=True) as reader:
            assert reader.holder_pid == holder.pid
            for sql in ("SELECT 1", "DROP TABLE runs", "INSTALL httpfs"):
                with pytest.raises(share.NotLent):
                    reader._query(sql)
                with pytest.raises(share.NotLent):
                    reader.con.sql(sql)
            assert [r.name for r in reader.runs()] == ["first"]
    finally:
        _end(holder)


def test_holder_that_does_not_share_is_waited_for_then_named(tmp_path, monkeypatch):
    db = tmp_path / "x.duckdb"
    Store(db).close()
    raw = _child(f"""
        import sys, duckdb
        con = duckdb.connect({str(db)!r})
        print('ready', flush=True)
        sys.stdin.readline()
        """)
    assert raw.stdout.readline().strip() == "ready"
    monkeypatch.setenv("IRQLAB_DB_WAIT_S", "0.5")
    try:
        with pytest.raises(StoreError) as exc:
            Store(db)
    finally:
        _end(raw)
    msg = str(exc.value)
    assert f"pid {raw.pid} (" in msg and "does not share it" in msg, msg
    Store(db).close()                # free again: opens at once


def test_reader_reconnects_when_the_holder_is_killed(tmp_path):
    db = tmp_path / "x.duckdb"
    holder = _holder(db)
    reader = Store(db, read_only=True)
    try:
        assert reader.holder_pid == holder.pid
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
        # The socket went with the process: the reader opens the file itself.
        assert [r.name for r in reader.runs()] == ["first"]
        assert reader.holder_pid is None
    finally:
        reader.close()


def test_a_borrowed_stream_lost_with_the_holder_is_one_clean_error(tmp_path):
    db = tmp_path / "x.duckdb"
    holder = _holder(db)
    writer = Store(db)
    try:
        assert writer.holder_pid == holder.pid
        rid = writer.create_run(NewRun("second", "native", {}, {}))

        def batches():
            recs = np.zeros(1_000, RECORD_DTYPE)
            recs["seq"] = np.arange(1_000)
            yield recs
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(30)
            yield recs
        # A streamed insert in a transaction cannot be read again: not redone.
        with pytest.raises(StoreError, match=f"pid {holder.pid}.* is gone"):
            with writer.transaction():
                writer.add_sample_stream(rid, batches())
    finally:
        writer.close()
    with Store(db, read_only=True) as after:
        assert after.sample_count(rid) == 0        # the transaction is gone whole


def test_other_users_are_not_served(tmp_path):
    if os.getuid() != 0:
        pytest.skip("needs root to run a client as another user")
    db = tmp_path / "x.duckdb"
    holder = _holder(db)

    def connect_as(uid: int) -> int:
        pid = os.fork()
        if pid == 0:                     # the child: same code loaded, maybe another user
            code = 1
            try:
                os.setuid(uid)
                code = 0 if share.connect(db, timeout_s=2) is None else 3
            finally:
                os._exit(code)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    try:
        assert connect_as(os.getuid()) == 3      # served: the check below can fail
        assert connect_as(65534) == 0            # nobody: refused
    finally:
        _end(holder)


def test_the_socket_is_named_after_the_file_not_the_path(tmp_path):
    db = tmp_path / "x.duckdb"
    db.write_bytes(b"")
    link = tmp_path / "link.duckdb"
    link.symlink_to(db)
    assert share.socket_address(db) == share.socket_address(link)
    assert share.socket_address(db).startswith("\0irqlab-store-")


@pytest.mark.slow
def test_an_idle_borrower_does_not_keep_the_holder_open(tmp_path):
    """Issue 30: an idle "writer" kept a finished holder alive (72 s; before, for ever
    inside a transaction). Writing, it is waited for at most IRQLAB_SHARE_GRACE_S."""
    db = tmp_path / "x.duckdb"
    holder = _child(f"""
        import sys
        from irqlab.store import Store
        s = Store({str(db)!r})
        print('ready', flush=True)
        sys.stdin.readline()
        s.close()
        print('closed', flush=True)
        """, env={**os.environ, "IRQLAB_SHARE_GRACE_S": "1"}, stderr=subprocess.PIPE)
    assert holder.stdout.readline().strip() == "ready"
    remote = share.connect(db)
    assert remote is not None
    remote.call(share.BEGIN)                  # a transaction left open, then silence
    remote.call(share.NEXT_RUN_ID)
    out, err = holder.communicate("\n", timeout=60)
    remote.close()
    # Before, the holder waited for the open transaction for ever (timeout above).
    assert out.strip() == "closed" and holder.returncode == 0
    assert "Traceback" not in err, err


def test_silent_connections_never_starve_a_new_client(tmp_path):
    """Issue 47: 64 connections to the holder's socket that send nothing made `irqlab
    list` and a second run fail (~10 s, 'does not share it'). Now the one idle longest
    makes room, every time; a connection that never asks is dropped after
    FIRST_REQUEST_S."""
    import socket

    db = tmp_path / "x.duckdb"
    holder = _holder(db)
    silent = []
    try:
        for _ in range(share.MAX_CLIENTS + 16):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(share.socket_address(db))
            silent.append(sock)
        for _ in range(3):                     # and again, each served in turn
            remote = share.connect(db, timeout_s=5.0)
            assert remote is not None
            rows, _desc = remote.call(share.NEXT_RUN_ID)
            assert rows and int(rows[0][0]) >= 1
            remote.close()
        with Store(db, read_only=True) as st:  # the CLI's way in
            assert [r.name for r in st.runs()] == ["first"]
        # the oldest silent ones were dropped: the holder closed them
        silent[0].settimeout(5.0)
        assert silent[0].recv(1 << 16) is not None
        assert silent[0].recv(1) == b""
    finally:
        for sock in silent:
            sock.close()
        assert _end(holder).endswith("closed")
