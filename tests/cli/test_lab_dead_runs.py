"""Issue 20 for the lab store: a run writing straight into PostgreSQL whose irqlab is
killed (-9) is closed as `died` by the next irqlab of this host that opens the store,
with figures from its stored samples; a run of another host is left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from irqlab.store import StoreError
from irqlab.store.pg import PgStore
from irqlab.store.interface import NewRun


@pytest.fixture(scope="module")
def pg(pg_server):
    return pg_server            # the session's server (tests/conftest.py): fresh databases


@pytest.mark.slow
def test_killed_run_is_closed_by_the_next_open_of_this_host(pg):
    url = pg.database("dead")
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                             "native", "--duration", "60s", "--window", "500ms", "--name",
                             "killed", "--json", "--db", url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:                       # until two windows (and their samples) landed
            try:
                with PgStore(url, read_only=True) as lab:
                    runs = lab.runs()
                    if runs and len(lab.windows(runs[0].run_id)) >= 2:
                        break
            except StoreError:
                pass                      # the run has not created the schema yet
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.3)
        # Another host's run, still `running`: nobody here can know it is dead.
        with PgStore(url) as lab:
            other = lab.create_run(NewRun("elsewhere", "native", {}, {
                       "writer": {"pid": 1, "starttime": 1, "boot_id": "another-host-boot"}}))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "list", "--json",
                          "--db", url], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    rows = {r["name"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert rows["killed"]["status"] == "died", rows
    assert rows["elsewhere"]["status"] == "running", rows
    assert "previous run died" in res.stderr or "died:" in res.stderr, res.stderr
    with PgStore(url, read_only=True) as lab:
        row = lab.resolve("killed")
        stored = lab.sample_count(row.run_id)
        assert stored > 0 and row.summary["samples"] == stored
        assert row.summary["max_ns"] >= row.summary["min_ns"] > 0
        assert "ended without closing this run" in row.message
        assert lab.resolve(str(other)).status == "running"
