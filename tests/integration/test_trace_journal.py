"""Tracing is in the restore journal (issue 20): a ``kill -9`` during ``--trace`` leaves no
instance behind once any irqlab command has started, and two ``--trace`` runs on different
databases at once both succeed (instance names are unique per process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from irqlab.trace.tracefs import find_tracefs

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU


def _env(state: Path) -> dict[str, str]:
    return {**os.environ, "IRQLAB_STATE_DIR": str(state)}


def _irqlab(args: list[str], state: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", *args],
                            env=_env(state), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


@pytest.fixture
def tracefs_root(tmp_path) -> Path:
    """The mounted tracefs, else one mounted here for the test (and unmounted after), so
    the instances irqlab makes in it can be watched."""
    if os.geteuid() != 0:
        pytest.skip("needs root (tracefs)")
    root = find_tracefs()
    if root is not None:
        yield root
        return
    mnt = tmp_path / "tracefs"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tracefs", "nodev", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount tracefs")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_sigkill_during_trace_leaves_nothing_after_next_start(tmp_path, tracefs_root,
                                                               probe_built):
    state = tmp_path / "state"
    proc = _irqlab(["run", "--accel", "tcg", "--duration", "60s", "--trace", "--json",
                    "--db", str(tmp_path / "a.duckdb")], state)
    pattern = f"irqlab-{proc.pid}-*"
    try:
        end = time.monotonic() + 60
        while not list((tracefs_root / "instances").glob(pattern)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "the trace instance never appeared"
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    left = list((tracefs_root / "instances").glob(pattern))
    assert left, "SIGKILL leaves the instance: the journal must remove it"
    # Any command replays the journal; `list` on a database of its own.
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "list",
                          "--db", str(tmp_path / "other.duckdb")],
                         env=_env(state), capture_output=True, text=True, timeout=60)
    assert not list((tracefs_root / "instances").glob(pattern))
    said = [ln for ln in res.stderr.splitlines() if "removed trace instance" in ln]
    assert len(said) == 1 and str(left[0]) in said[0], res.stderr
    assert "Traceback" not in res.stderr


def test_two_trace_runs_on_different_databases_at_once(tmp_path, tracefs_root, probe_built):
    state = tmp_path / "state"
    procs = [_irqlab(["run", "--accel", "tcg", "--samples", "1500", "--window", "500ms",
                      "--trace", "--json", "--db", str(tmp_path / f"{i}.duckdb")], state)
             for i in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        summary = [json.loads(x) for x in out.splitlines() if '"summary"' in x][-1]
        assert summary["status"] == "ok" and summary["run_id"] == 1
        assert not list((tracefs_root / "instances").glob(f"irqlab-{p.pid}-*"))


def test_sigkill_with_irqlab_own_tracefs_mount_is_unmounted_next_start(tmp_path,
                                                                        probe_built):
    """No tracefs mounted (this kind of host): irqlab mounts one in a temporary directory;
    after a kill -9 the next start removes the instance and unmounts it."""
    if os.geteuid() != 0:
        pytest.skip("needs root (tracefs)")
    if find_tracefs() is not None:
        pytest.skip("a tracefs is mounted: irqlab uses it instead of its own")
    state = tmp_path / "state"
    proc = _irqlab(["run", "--accel", "tcg", "--duration", "60s", "--trace", "--json",
                    "--db", str(tmp_path / "a.duckdb")], state)

    def own_mounts() -> list[str]:
        journals = list((state / "journal").glob(f"{proc.pid}-*.jsonl"))
        if not journals:
            return []
        entries = [json.loads(x) for x in journals[0].read_text().splitlines() if x]
        return [e["path"] for e in entries if e.get("op") == "umount"]
    try:
        end = time.monotonic() + 60
        while not any(list(Path(m).glob("instances/irqlab-*")) for m in own_mounts()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "no instance in irqlab's own tracefs mount"
            time.sleep(0.05)
        mounts = own_mounts()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "list",
                          "--db", str(tmp_path / "other.duckdb")],
                         env=_env(state), capture_output=True, text=True, timeout=60)
    mounted = Path("/proc/mounts").read_text()
    for m in mounts:
        assert f" {m} " not in mounted, res.stderr
        assert not Path(m).exists()
    assert "removed trace instance" in res.stderr and "unmounted tracefs" in res.stderr
    assert "Traceback" not in res.stderr


def test_sigkill_mid_run_is_closed_as_died_with_windows_and_samples_agreeing(tmp_path,
                                                                             probe_built):
    """kill -9 of a measuring irqlab: the next command closes the run as `died` with a
    summary from the stored samples; every stored window has its samples stored."""
    from irqlab.store import Store

    db = tmp_path / "a.duckdb"
    state = tmp_path / "state"
    proc = _irqlab(["run", "--accel", "tcg", "--duration", "60s", "--window", "200ms",
                    "--json", "--db", str(db)], state)
    try:
        end = time.monotonic() + 60
        windows = 0
        while windows < 4:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, proc.stderr.read()
            windows += '"type": "window"' in line
            assert time.monotonic() < end
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "list", "--json",
                          "--db", str(db)], env=_env(state), capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    row = json.loads(res.stdout.splitlines()[-1])
    assert row["status"] == "died" and row["samples"] > 0
    assert "run 1: died: irqlab process" in res.stderr
    with Store(db, read_only=True) as store:
        stored = store.sample_count(1)
        in_windows = sum(w["samples"] for w in store.windows(1))
        assert row["samples"] == stored
        # Windows never count a sample that is not stored; what is stored beyond them is
        # the open window's (less than one window: 200 samples at 1 ms).
        assert in_windows >= 4 * 150 and 0 <= stored - in_windows < 400
