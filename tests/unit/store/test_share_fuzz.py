"""The store's lending socket under a hostile peer of the same uid (issue 30): random
frames, huge declared lengths, more connections than served, idle writers and SQL text,
all while a run holds the file and writes. The run ends ok with nothing lost, the holder
stays small and prints no traceback, and no SQL is carried out (irqlab/store/share.py)."""

from __future__ import annotations

import pytest

import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from irqlab.store import Store, share
from tests.conftest import run_cli

# 2,000 in the suite; the 10,000 were measured with IRQLAB_FUZZ_CONNECTIONS=10000.
CONNECTIONS = int(os.environ.get("IRQLAB_FUZZ_CONNECTIONS", "2000"))
_SQL = ["COPY runs TO '{out}'", "SELECT * FROM read_text('/etc/shadow')", "DROP TABLE runs",
        "ATTACH '{out}.db' AS x", "INSTALL httpfs"]


def _frame(body: bytes) -> bytes:
    return struct.pack("<I", len(body)) + body


def _json(obj: object) -> bytes:
    return _frame(json.dumps(obj).encode())


def _sql_attempts(out: Path) -> list[bytes]:
    """Every way a request could smuggle SQL text; none may be carried out."""
    texts = [s.format(out=out) for s in _SQL]
    attempts = []
    for sql in texts:
        attempts += [_json({"op": "execute", "sql": sql, "params": []}),
                     _json({"op": "sql_arrow", "sql": sql}),
                     _json({"op": sql, "args": []}),
                     _json({"op": "run_insert", "args": {sql: 1}}),
                     _json({"op": "run_update", "args": [1, {"name = 'x'; " + sql: 1}]}),
                     _json({"op": "insert_rows", "args": {"table": "runs; " + sql,
                                                          "rows": []}}),
                     _json({"op": "read_samples", "args": {
                         "run_id": 1, "columns": f"1 FROM ({sql}) --", "order": "seq"}}),
                     _json({"op": "read_samples", "args": {
                         "run_id": 1, "columns": "records", "order": f"; {sql}"}}),
                     _json({"op": "figures", "args": [1, [sql], None]}),
                     _json({"op": "file_delete", "args": [1, f"../../{sql}"]})]
    return attempts


def _hostile(rng: random.Random, out: Path) -> tuple[str, bytes]:
    kind = rng.randrange(7)
    if kind == 0:
        return "random", rng.randbytes(rng.randrange(0, 4096))
    if kind == 1:
        return "huge", struct.pack("<I", rng.randrange(share.MAX_FRAME_BYTES + 1,
                                                       1 << 32)) + rng.randbytes(64)
    if kind == 2:
        ops = [*share.OPS, "read_samples", "insert_samples", "insert_rows", "figures"]
        junk = [None, -1, 1 << 70, 1.5, "x" * 300, [], {}, [[]], {"$": "decimal", "v": "x"},
                {"$": "datetime", "v": "no"}, True]
        return "typed", _json({"op": rng.choice(ops),
                               "args": rng.choice(junk + [[rng.choice(junk)] * 5])})
    if kind == 3:
        return "sql", rng.choice(_sql_attempts(out))
    if kind == 4:
        return "stream", (_json({"op": "insert_samples", "args": {"kind": "records"}})
                          + _frame(rng.randbytes(41)))
    if kind == 5:
        return "deep", _frame(b"[" * 200_000)
    return "empty", b""


def _poke(addr: str, data: bytes) -> list[dict]:
    """Send `data`, then read the replies until the holder closes or stays quiet."""
    replies: list[dict] = []
    buf = b""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2.0)
        try:
            s.connect(addr)
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
        except OSError:          # refused over the cap, reset, or the holder kept quiet
            pass
    while len(buf) >= 4:
        (n,) = struct.unpack("<I", buf[:4])
        body, buf = buf[4:4 + n], buf[4 + n:]
        try:
            replies.append(json.loads(body))
        except ValueError:
            pass
    return replies


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _windows_stored(db: Path) -> int:
    with Store(db, read_only=True) as reader:
        return len(reader.windows(1))


@pytest.mark.slow     # tens of seconds of real processes: the whole suite runs it
def test_socket_fuzz_during_a_run(db, tmp_path):
    run = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                            "native", "--duration", "25s", "--window", "2s", "--name",
                            "fuzzed", "--json",
                            "--db", str(db)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (db.exists() and run_cli(["list", "--json"], db).lines):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.2)
    # The run's own memory grows over its first windows (measured: +105 MiB, then flat):
    # the baseline is taken once it has stored three.
    while _windows_stored(db) < 3:
        assert run.poll() is None and time.monotonic() < deadline + 60, run.communicate()
        time.sleep(0.5)
    addr = share.socket_address(db)
    out = tmp_path / "copied.csv"
    base_kib = _rss_kib(run.pid)
    peak_kib = [base_kib]
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.2):
            try:
                peak_kib[0] = max(peak_kib[0], _rss_kib(run.pid))
            except (OSError, AssertionError):
                return
    watcher = threading.Thread(target=watch)
    watcher.start()
    # Idle writers: each writes once, then holds its connection and says nothing.
    idle = []
    for _ in range(5):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
        s.sendall(_json({"op": "next_run_id", "args": []}))
        idle.append(s)
    rng = random.Random(30)
    cases = [_hostile(rng, out) for _ in range(CONNECTIONS)]
    cases += [("sql", a) for a in _sql_attempts(out)]
    try:
        t_fuzz = time.monotonic()
        with ThreadPoolExecutor(100) as pool:
            results = list(pool.map(lambda c: (c[0], _poke(addr, c[1])), cases))
        # The fuzz took 0.5 s here (2,050 connections) after ~8 s of the run's 25:
        # the run must still be measuring when it is done.
        fuzz_s = time.monotonic() - t_fuzz
        assert run.poll() is None, f"the run should still be measuring ({fuzz_s:.1f} s)"
        # The socket still serves a real borrower after all that.
        listed = run_cli(["list", "--json"], db)
        assert listed.code == 0 and [r["name"] for r in listed.lines] == ["fuzzed"], \
            listed.stderr
        stdout, stderr = run.communicate(timeout=180)
    finally:
        stop.set()
        watcher.join()
        for s in idle:
            s.close()
        if run.poll() is None:
            run.kill()
    summary = [json.loads(x) for x in stdout.splitlines() if "\"summary\"" in x][-1]
    assert run.returncode == 0, stderr
    assert summary["status"] == "ok" and summary["lost"] == 0 and summary["samples"] > 0
    assert "Traceback" not in stderr and "waiting for" not in stderr, stderr
    assert (peak_kib[0] - base_kib) < 64 * 1024, (base_kib, peak_kib[0])
    # No SQL text was carried out: every such request was refused, nothing was written.
    for kind, replies in results:
        if kind == "sql":
            assert not [r for r in replies if r.get("ok") and "version" not in r], replies
    assert not out.exists() and not Path(f"{out}.db").exists()
    after = run_cli(["list", "--json"], db)
    assert [(r["name"], r["status"]) for r in after.lines] == [("fuzzed", "ok")]
    refused = [line for line in stderr.splitlines() if "store socket:" in line]
    assert refused and len(refused) < 200, len(refused)     # summed up, not echoed
    print(f"\nfuzz: {len(cases)} connections, holder RSS {base_kib // 1024} -> "
          f"{peak_kib[0] // 1024} MiB (peak), {len(refused)} log lines, "
          f"{summary['samples']} samples, lost {summary['lost']}")
