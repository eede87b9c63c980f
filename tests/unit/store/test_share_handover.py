"""Holder hand-over (issue 30): two runs on one DuckDB file; the holder is killed with
SIGKILL while the second run writes through it. The second run takes the file over
(DuckDB replays the log), goes on and ends ok with every sample its ring delivered; the
killed run is closed as died (irqlab/store/db.py, Store._take_over)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from irqlab.store import Store
from tests.conftest import run_cli

TRIALS = int(os.environ.get("IRQLAB_HANDOVER_TRIALS", "2"))


def _start_run(db, name: str, duration: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                             "native", "--duration", duration, "--window", "1s", "--name",
                             name, "--json", "--db", str(db)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _windows(db, name: str) -> int:
    with Store(db, read_only=True) as store:
        runs = [r for r in store.runs() if r.name == name]
        return len(store.windows(runs[0].run_id)) if runs else 0


@pytest.mark.slow     # tens of seconds of real processes: the whole suite runs it
@pytest.mark.parametrize("trial", range(TRIALS))
def test_borrower_takes_over_when_the_holder_is_killed(tmp_path, trial):
    db = tmp_path / "x.duckdb"
    holder = _start_run(db, "holder", "120s")
    borrower = None
    try:
        deadline = time.monotonic() + 90
        while not (db.exists() and _windows(db, "holder") >= 1):
            assert holder.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        borrower = _start_run(db, "borrower", "9s")   # killed after 2 or 5 of its windows
        # Each trial kills the holder at another point of the borrower's run.
        while _windows(db, "borrower") < 2 + (trial * 3) % 8:
            assert borrower.poll() is None and time.monotonic() < deadline, \
                borrower.communicate()
            time.sleep(0.2)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
        out, err = borrower.communicate(timeout=120)
    finally:
        for proc in (holder, borrower):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert borrower.returncode == 0, (out.splitlines()[-2:], err)
    assert "Traceback" not in err and "took the file over" in err, err
    summary = [json.loads(x) for x in out.splitlines() if '"summary"' in x][-1]
    assert summary["status"] == "ok" and summary["lost"] == 0 and summary["samples"] > 0
    listed = {r["name"]: r for r in run_cli(["list", "--json"], db).lines}
    assert listed["holder"]["status"] == "died"
    assert listed["borrower"]["status"] == "ok"
    shown = run_cli(["show", "borrower", "--json"], db)
    assert shown.code == 0 and shown.summary["samples"] == summary["samples"]
    with Store(db, read_only=True) as store:
        rid = next(r.run_id for r in store.runs() if r.name == "borrower")
        # Every sample the ring delivered is stored, once.
        assert store.sample_count(rid) == summary["samples"]
        windows = store.windows(rid)
        assert [w["index"] for w in windows] == list(range(len(windows)))
        assert sum(w["samples"] for w in windows) == summary["samples"]
