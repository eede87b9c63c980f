"""A disk that fills during a run (issue 20, item 3), on a real small tmpfs: the run stops
cleanly as ``failed`` with the reason, every window stored has its samples, and the
database stays readable."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from irqlab.cli.main import main
from irqlab.measure import run
from irqlab.store import Store
from tests.unit.measure.test_run_flow import Recorder, _cfg, fake  # noqa: F401 (fixture)


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
        subprocess.run(["umount", str(mnt)], check=True)


def test_disk_full_mid_run_fails_cleanly_and_keeps_windows_with_their_samples(
        fake, small_tmpfs, capfd):  # noqa: F811
    fake()
    db = small_tmpfs / "runs.duckdb"
    with Store(db) as store:
        res = run(_cfg(duration_ns=60_000_000_000, period_ns=100_000,
                       window_ns=10_000_000), store, Recorder())
    assert res.status == "failed"
    assert "No space left on device" in res.summary["message"]
    assert "measuring stopped" in res.summary["message"]
    with Store(db, read_only=True) as store:
        row = store.resolve(str(res.run_id))
        assert row.status == "failed" and "No space left on device" in row.message
        windows = store.windows(res.run_id)
        assert len(windows) > 10
        assert sum(w["samples"] for w in windows) == store.sample_count(res.run_id)
    # The full database still reads, without a traceback.
    assert main(["show", str(res.run_id), "--db", str(db)]) == 0
    assert "Traceback" not in capfd.readouterr().err
