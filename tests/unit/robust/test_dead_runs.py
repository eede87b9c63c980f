"""Dead runs and store failures (issue 20, items 2-3): a run left ``running`` by a process
that is gone is closed as ``died`` with a summary from what was stored; windows and raw
samples always agree; a failing store write stops the run cleanly as ``failed``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from irqlab.cli.main import main
from irqlab.measure import run
from irqlab.samples.record import RECORD_DTYPE
from irqlab.store import Store, StoreWriteError
from irqlab.store.interface import NewRun
from tests.unit.measure.fake_target import LATENCY_NS
from tests.unit.measure.test_run_flow import Recorder, _cfg, fake  # noqa: F401 (fixture)


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _records(n: int, tick_hz: int = 1_000_000_000, period: int = 1_000_000) -> np.ndarray:
    recs = np.zeros(n, dtype=RECORD_DTYPE)
    recs["seq"] = np.arange(n)
    recs["deadline_tick"] = (np.arange(n) + 1) * period
    recs["entry_tick"] = recs["deadline_tick"] + LATENCY_NS + np.arange(n) % 7
    return recs


def _left_running(db, n: int = 250) -> int:
    """A run as a killed irqlab leaves it: running, two windows and their samples."""
    with Store(db) as store:
        run_id = store.create_run(NewRun("killed", "guest", {"window_ns": 100_000_000,
                                                             "threshold_ns": 30_000, "warmup": 1},
                                         {"writer": {"pid": _dead_pid(), "starttime": 1}}))
        store.update_run(run_id, tick_hz=1_000_000_000, period_ns=1_000_000,
                         threshold_ns=30_000, accel="tcg")
        store.add_samples(run_id, _records(n))
        store.add_windows(run_id, [{"index": i, "start_s": i * 0.1, "samples": 100,
                                    "mean_ns": 1, "stddev_ns": 0, "min_ns": 1, "max_ns": 1,
                                    "above_threshold": 0, "global_min_ns": 1,
                                    "global_max_ns": 1} for i in range(2)])
    return run_id


def test_list_closes_a_dead_run_with_a_summary_from_the_stored_samples(tmp_path, capfd):
    db = tmp_path / "r.duckdb"
    run_id = _left_running(db)
    assert main(["list", "--db", str(db)]) == 0
    out, err = capfd.readouterr()
    row = [ln for ln in out.splitlines() if "killed" in ln][-1]
    assert "died" in row and "250" in row
    assert err.count("\n") == 1 and f"run {run_id}: died" in err
    with Store(db, read_only=True) as store:
        r = store.resolve(str(run_id))
        assert r.status == "died" and "killed or crashed" in r.message
        assert r.summary["min_ns"] == LATENCY_NS and r.summary["max_ns"] == LATENCY_NS + 6
    # Closed once: the next start says nothing.
    assert main(["list", "--db", str(db)]) == 0
    assert capfd.readouterr().err == ""


def test_a_run_of_this_live_process_stays_running(tmp_path, capsys, fake):  # noqa: F811
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        from irqlab.store.recover import writer_identity
        run_id = store.create_run(NewRun("live", "guest", {}, {"writer": writer_identity()}))
    assert main(["show", str(run_id), "--db", str(db)]) == 0      # human, no summary
    out = capsys.readouterr().out
    assert "running" in out and "no summary yet" in out


@pytest.mark.parametrize("ref", ["²", "١", "1" * 40])
def test_non_ascii_digit_references_are_names(tmp_path, capsys, ref):
    db = tmp_path / "r.duckdb"
    _left_running(db)
    assert main(["show", ref, "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[-1].startswith("irqlab show: error: no run")


def test_windows_and_samples_agree_when_a_window_write_fails(fake, tmp_path,  # noqa: F811
                                                             monkeypatch):
    fake()
    with Store(tmp_path / "runs.duckdb") as store:
        real = store.add_windows
        calls = {"n": 0}

        def failing(run_id, windows):
            calls["n"] += 1
            if calls["n"] == 3:
                store.write_failed = "No space left on device"
                raise StoreWriteError("cannot write to x: No space left on device")
            real(run_id, windows)
        monkeypatch.setattr(store, "add_windows", failing)
        res = run(_cfg(samples=500, duration_ns=None), store, Recorder())
        assert res.status == "failed"
        assert "No space left on device" in res.summary["message"]
        row = store.resolve(str(res.run_id))
        assert row.status == "failed" and "measuring stopped" in row.message
        windows = store.windows(res.run_id)
        assert [w["samples"] for w in windows] == [100, 100]
        assert store.sample_count(res.run_id) == 200
