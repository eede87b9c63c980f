"""Issue 47: slow requests never stall `irqlab serve` (a real server on 127.0.0.1, real
HTTP clients): a query longer than MAX_QUERY_BYTES is refused before any work (414, one
line naming the fix), and pages that compute over runs' samples run one at a time in
threads of their own, so the runs page answers while they are in flight. Timing figures
go to scripts/bench-serve-slow.py, never into an assert here."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from irqlab.serve.app import MAX_QUERY_BYTES
from tests.cli._report_store import make_store


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = make_store(tmp_path_factory.mktemp("serve-load") / "serve.duckdb")
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "serve", "--db",
                             str(db), "--bind", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip().split()[-1]
    yield int(url.rsplit(":", 1)[1].strip("/"))
    proc.terminate()
    _out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err


def _get(port: int, path: str) -> tuple[int, bytes, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("GET", path)
    reply = conn.getresponse()
    body = reply.read()
    conn.close()
    return reply.status, body, time.monotonic()


def _in_flight(port: int, path: str, n: int) -> tuple[list[threading.Thread], list]:
    done: list[tuple[int, bytes, float]] = []
    threads = [threading.Thread(target=lambda: done.append(_get(port, path)))
               for _ in range(n)]
    for t in threads:
        t.start()
    return threads, done


def test_thirty_huge_queries_are_refused_and_the_runs_page_answers(server):
    threads, done = _in_flight(server, "/api/compare?runs=" + "A" * 16_000, 30)
    status, body, _at = _get(server, "/")
    for t in threads:
        t.join(120)
    assert status == 200 and b"<html" in body.lower()
    assert len(done) == 30 and {s for s, _b, _t in done} == {414}
    error = json.loads(done[0][1])["error"]
    assert f"at most {MAX_QUERY_BYTES:,}" in error and "\n" not in error


def test_a_page_with_a_huge_query_is_one_plain_line(server):
    status, body, _at = _get(server, "/compare?runs=" + "A" * 16_000)
    assert status == 414 and body.decode().count("\n") == 1


@pytest.mark.slow
def test_the_runs_page_answers_while_compares_are_in_flight(server):
    """Ten real compares, one at a time: `/` answers before the last of them does."""
    threads, done = _in_flight(server, "/api/compare?runs=1,2,3,4", 10)
    time.sleep(0.2)                              # the compares are queued by now
    status, _body, answered = _get(server, "/")
    for t in threads:
        t.join(300)
    assert status == 200
    assert {s for s, _b, _t in done} == {200}
    assert answered < max(t for _s, _b, t in done)
