"""Issue 47, the lending socket against a hostile peer of the same uid
(irqlab/store/share.py): a peer's transaction never makes the holder's own write fail and
is bounded in time; files_insert takes only the store's own file names; the frames the
holder receives are bounded in total; a thousand silent connections starve no one."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from irqlab.store import Store, share
from tests.conftest import run_cli
from tests.unit.store.test_share import _child, _end


def _holder(db: Path, **env: str) -> subprocess.Popen:
    """A holder with run 1 that finishes it ('ok') on a line in, then closes."""
    proc = _child(f"""
        import sys
        from irqlab.store import Store
        from irqlab.store.interface import NewRun
        s = Store({str(db)!r})
        s.create_run(NewRun('held', 'native', {{}}, {{}}))
        print('ready', flush=True)
        sys.stdin.readline()
        s.finish_run(1, 'ok', {{'samples': 0}})
        s.close()
        print('closed', flush=True)
        """, env={**os.environ, **env}, stderr=subprocess.PIPE)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_a_peers_open_transaction_never_fails_the_holders_write(tmp_path):
    """Before: 'TransactionContext Error: Conflict on update!', the holder exited 1 and
    its final status was never stored."""
    db = tmp_path / "x.duckdb"
    holder = _holder(db)
    peer = share.connect(db)
    assert peer is not None
    peer.call(share.BEGIN)
    peer.call(share.RUN_UPDATE, [1, {"message": "the peer's"}])
    out, err = holder.communicate("\n", timeout=60)
    assert out.strip().endswith("closed") and holder.returncode == 0, err
    assert "Traceback" not in err and "rolled back for the holder's own write" in err
    with pytest.raises(share.HolderGone):
        peer.call(share.COMMIT)                  # its transaction is gone, and it knows
    peer.close()
    with Store(db, read_only=True) as st:
        run = st.resolve("1")
        assert (run.status, run.message) == ("ok", None)


@pytest.mark.slow
def test_a_peers_transaction_is_bounded_in_time(tmp_path):
    db = tmp_path / "x.duckdb"
    holder = _holder(db, IRQLAB_SHARE_TRANSACTION_S="1")
    try:
        peer = share.connect(db)
        peer.call(share.BEGIN)
        peer.call(share.RUN_UPDATE, [1, {"message": "the peer's"}])
        time.sleep(1.5)
        with pytest.raises(share.HolderGone):
            peer.call(share.COMMIT)
        peer.close()
        reader = share.connect(db)
        rows, desc = reader.call(share.RUN_BY_ID, [1])
        reader.close()
        message = rows[0][[d[0] for d in desc].index("message")]
        assert message is None                   # rolled back, never committed
    finally:
        out, err = holder.communicate("\n", timeout=60)
    assert out.strip().endswith("closed") and holder.returncode == 0, err
    assert "transaction open longer than 1 s" in err


_HEX = "0123456789abcdef" * 2                     # a name's 32 hex digits


@pytest.mark.parametrize("name", ["a'b.parquet", "../x.parquet", "x.parquet",
                                  _HEX + ".parquet'", "kept-" + "g" * 32 + ".parquet",
                                  _HEX.upper() + ".parquet"])
def test_files_insert_takes_only_the_stores_file_names(tmp_path, name):
    db = tmp_path / "x.duckdb"
    holder = _holder(db)
    try:
        peer = share.connect(db)
        with pytest.raises(share.duckdb.InvalidInputException, match="file's name"):
            peer.call(share.FILES_INSERT, [[1, 0, 1, name]])
        peer.call(share.BEGIN)                   # the store's own names still go in
        for good in (uuid.uuid4().hex + ".parquet", "kept-" + uuid.uuid4().hex + ".parquet"):
            peer.call(share.FILES_INSERT, [[1, 0, 1, good]])
        peer.call(share.ROLLBACK)
        peer.close()
    finally:
        assert _end(holder).endswith("closed")


def _rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow        # 1.5 GiB through the socket: seconds
def test_frames_are_bounded_in_total_not_per_connection(tmp_path):
    """Before: 64 connections sending 8 MiB frames added ~524 MB to the holder."""
    db = tmp_path / "x.duckdb"
    holder = _holder(db)
    base = peak = _rss_mib(holder.pid)
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.wait(0.05):
            peak = max(peak, _rss_mib(holder.pid))
    body = b"x" * share.MAX_FRAME_BYTES

    def send() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(share.socket_address(db))
            s.recv(4096)                           # the hello
            try:
                for _ in range(3):
                    s.sendall(struct.pack("<I", len(body)) + body)
            except OSError:
                pass                               # dropped: not JSON
    watcher = threading.Thread(target=watch)
    watcher.start()
    senders = [threading.Thread(target=send) for _ in range(share.MAX_CLIENTS)]
    try:
        for t in senders:
            t.start()
        for t in senders:
            t.join(120)
        time.sleep(0.5)
    finally:
        done.set()
        watcher.join()
        out, err = holder.communicate("\n", timeout=60)
    assert out.strip().endswith("closed") and holder.returncode == 0, err
    assert peak - base <= 64, f"holder RSS {base} -> {peak} MiB"


@pytest.mark.slow        # a real run, 1,000 connections, CLI processes: seconds
def test_a_thousand_silent_connections_starve_no_one(tmp_path):
    db = tmp_path / "x.duckdb"
    run = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                            "native", "--duration", "15s", "--window", "1s", "--name",
                            "held", "--db", str(db)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    silent: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while not (db.exists() and share.connect(db, 1.0)):
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        while len(silent) < 1000:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(share.socket_address(db))
                silent.append(s)
            except BlockingIOError:              # the accept queue is full: a moment
                s.close()
                time.sleep(0.001)
        listed = run_cli(["list", "--json"], db)
        assert listed.code == 0 and [r["name"] for r in listed.lines] == ["held"], \
            listed.stderr
        second = run_cli(["run", "--target", "native", "--duration", "1s", "--window",
                          "1s", "--name", "second", "--json"], db)
        assert second.code == 0, second.stderr
    finally:
        for s in silent:
            s.close()
        _out, err = run.communicate(timeout=120)
    assert run.returncode == 0 and "Traceback" not in err, err
