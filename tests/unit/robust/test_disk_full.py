"""A disk that fills during a run (issue 20, item 3), on a real small tmpfs: the run stops
cleanly as ``failed`` with the reason, every window stored has its samples, and the
database stays readable."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from irqlab.cli.main import main
from irqlab.measure import run
from irqlab.store import Store
from tests.unit.measure.test_run_flow import Recorder, _cfg, fake  # noqa: F401 (fixture)

# A run's duration far beyond what the 1 MiB disk holds: the run must end by the full
# disk however slowly a busy host feeds it (60 s ran out first at nice 19 beside the
# suite: status "ok"); on an idle machine it fills in ~8 s.
LONGER_THAN_THE_DISK_NS = 600_000_000_000


@pytest.fixture
def small_tmpfs(tmp_path) -> Path:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)]
                      ).returncode != 0:
        pytest.skip("cannot mount a tmpfs")
    try:
        yield mnt
    finally:
        _unmount(mnt)


def _unmount(mnt: Path) -> None:
    """Unmount the test's tmpfs: a store's background thread may still be closing a file
    on it for a moment on a busy host ("target is busy"), so retry, then detach it."""
    deadline = time.monotonic() + 10
    while subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            subprocess.run(["umount", "-l", str(mnt)], check=True)
            return
        time.sleep(0.2)


@pytest.mark.slow
def test_disk_full_mid_run_fails_cleanly_and_keeps_windows_with_their_samples(
        fake, small_tmpfs, capfd):  # noqa: F811
    fake()
    db = small_tmpfs / "runs.duckdb"
    with Store(db) as store:
        res = run(_cfg(duration_ns=LONGER_THAN_THE_DISK_NS, period_ns=100_000,
                       window_ns=10_000_000), store, Recorder())
    assert res.status == "failed"
    assert "No space left on device" in res.summary["message"]
    assert "measuring stopped" in res.summary["message"]
    with Store(db, read_only=True) as store:
        row = store.resolve(str(res.run_id))
        # Full to the last block, the status itself may not have fitted (seen once with
        # the suite beside it at load 7): then it is left `running` for the next writable
        # open to close as `died`, and the run's message says so.
        assert (row.status == "failed" and "No space left on device" in row.message) or (
            row.status == "running" and "marks it died" in res.summary["message"]), row
        windows = store.windows(res.run_id)
        assert len(windows) > 10
        assert sum(w["samples"] for w in windows) == store.sample_count(res.run_id)
    # The full database still reads, without a traceback.
    assert main(["show", str(res.run_id), "--db", str(db)]) == 0
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow
def test_disk_full_mid_run_in_sample_files_keeps_windows_with_their_samples(
        fake, small_tmpfs, monkeypatch):  # noqa: F811
    # Sample files (store/sample_files.py) for windows of 100 samples: the same promise
    monkeypatch.setattr(importlib.import_module("irqlab.measure.run"),
                        "FILES_MIN_SAMPLES_PER_WINDOW", 10)
    fake()
    db = small_tmpfs / "runs.duckdb"
    with Store(db) as store:
        res = run(_cfg(duration_ns=LONGER_THAN_THE_DISK_NS, period_ns=100_000,
                       window_ns=10_000_000), store, Recorder())
        assert store._files(res.run_id)
    assert res.status == "failed" and "No space left on device" in res.summary["message"]
    with Store(db, read_only=True) as store:
        # full to the last block, the status itself may not have fitted: then it is left
        # `running` for the next writable open to close as `died` (the message says so)
        row = store.resolve(str(res.run_id))
        assert row.status == "failed" or (row.status == "running" and "marks it died"
                                          in res.summary["message"]), row
        windows = store.windows(res.run_id)
        assert len(windows) > 10
        assert sum(w["samples"] for w in windows) == store.sample_count(res.run_id)
        assert len(list(store.iter_latency(res.run_id))) > 0     # every listed file reads


@pytest.mark.slow
def test_disk_full_mid_import_lands_nothing_and_leaves_no_file(small_tmpfs, tmp_path, capfd):
    from irqlab.bench.compare import write_log
    from irqlab.store.sample_files import files_root
    log = tmp_path / "big.txt"
    write_log(log, 3_000_000)            # ~7 MB of sample files: more than the disk holds
    db = small_tmpfs / "x.duckdb"
    code = main(["import", "tscdeadline", str(log), "--tick-hz", "2400000000", "--db",
                 str(db)])
    err = capfd.readouterr().err
    assert code != 0 and "No space left on device" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    with Store(db) as store:                       # the writable open sweeps the files
        assert store.runs() == []
    assert not files_root(db).exists() or not list(files_root(db).rglob("*.parquet"))
