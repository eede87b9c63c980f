"""Issue 18: `irqlab list` works while a run writes the same database, and two runs on one
database both land (the first lends its connection: irqlab/store/share.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import run_cli


def _start_run(db, name: str, duration: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                             "native", "--duration", duration, "--name", name, "--json",
                             "--db", str(db)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _summary(proc: subprocess.Popen, code: int = 0) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    return [json.loads(x) for x in out.splitlines() if '"summary"' in x][-1]


@pytest.mark.slow
def test_list_during_a_run_and_two_runs_at_once(db):
    # The first run is stopped by SIGINT once the second has landed, not by its duration:
    # an 8 s duration once had to outlast the second run's start-up on a loaded host.
    first = _start_run(db, "first", "120s")
    # Wait until the first run holds the file (its run row exists).
    deadline = time.monotonic() + 60
    while True:
        listed = run_cli(["list", "--json"], db)
        if listed.code == 0 and listed.lines:
            break
        assert time.monotonic() < deadline, listed.stderr
        time.sleep(0.2)
    assert [(r["name"], r["status"]) for r in listed.lines] == [("first", "running")]
    second = run_cli(["run", "--target", "native", "--duration", "1s", "--name", "second",
                      "--json"], db)
    assert second.code == 0, second.stderr
    assert second.summary["status"] == "ok" and second.summary["samples"] > 0
    assert first.poll() is None, "the first run should still be measuring"
    first.send_signal(signal.SIGINT)
    s1 = _summary(first, code=130)
    assert s1["status"] == "interrupted" and s1["lost"] == 0 and s1["samples"] > 0
    after = run_cli(["list", "--json"], db)
    assert [(r["name"], r["status"]) for r in after.lines] == [("first", "interrupted"),
                                                                ("second", "ok")]
    shown = run_cli(["show", "second", "--json"], db)
    assert shown.code == 0 and shown.summary["samples"] == second.summary["samples"]
