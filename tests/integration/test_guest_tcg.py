"""Boot the real x86-64 probe under QEMU TCG and check what the pipeline reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from irqlab.samples.record import FLAG_INJECTED
from irqlab.store import Store
from tests.conftest import run_cli
from tests.integration._helpers import check_real_time_accounting

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU


def _raw(db, run_id: int) -> dict[str, np.ndarray]:
    with Store(db, read_only=True) as st:
        batches = list(st.iter_samples(run_id))
    return {name: np.concatenate([b.column(name).to_numpy() for b in batches])
            for name in ("seq", "deadline_tick", "entry_tick", "flags")}


def _latency_ns(raw: dict, tick_hz: int) -> np.ndarray:
    lat = raw["entry_tick"].astype(np.int64) - raw["deadline_tick"].astype(np.int64)
    return lat * 1e9 / tick_hz


def test_icount_run_counts_windows_and_stores_every_sample(db, probe_built):
    res = run_cli(["run", "--accel", "tcg", "--icount", "--period", "1ms", "--samples",
                   "2500", "--window", "1s", "--json", "--name", "icount"], db)
    assert res.code == 0, res.stderr
    s = res.summary
    assert (s["status"], s["accel"], s["emulated"]) == ("ok", "tcg+icount", True)
    assert s["samples"] == 2500 and s["lost"] == 0
    # 2500 periods of 1 ms in 1 s windows: windows 0, 1 full, window 2 half.
    assert [w["index"] for w in res.windows] == [0, 1, 2]
    assert sum(w["samples"] for w in res.windows) == 2500
    raw = _raw(db, s["run_id"])
    assert np.array_equal(raw["seq"], np.arange(2500))
    period_tick = np.diff(raw["deadline_tick"].astype(np.int64))
    # No drift: each deadline is the previous one plus the period (no overruns here).
    assert s["overruns"] == 0
    assert np.all(period_tick == period_tick[0])
    lat = _latency_ns(raw, s["tick_hz"])
    assert abs(s["min_ns"] - lat.min()) <= 0.5 and abs(s["max_ns"] - lat.max()) <= 0.5
    assert abs(s["mean_ns"] - lat.mean()) <= 0.5


def test_icount_is_deterministic(db, probe_built):
    args = ["run", "--accel", "tcg", "--icount", "--period", "500us", "--samples", "800",
            "--json"]
    a = run_cli(args, db)
    b = run_cli(args, db)
    assert a.code == b.code == 0, a.stderr + b.stderr
    la = _latency_ns(_raw(db, a.summary["run_id"]), a.summary["tick_hz"])
    lb = _latency_ns(_raw(db, b.summary["run_id"]), b.summary["tick_hz"])
    # Record mode (irqlab/runner/machines.py, ICOUNT_ARGS, says why): without it, 3 runs
    # in 100 parted from their twin at one sample (29 against 61 ns) under SCHED_FIFO
    # bursts, and one confined to one CPU did in CI.
    # Say where two icount runs part, should they ever.
    n = min(la.size, lb.size)
    differ = np.flatnonzero(la[:n] != lb[:n])[:10]
    assert la.size == lb.size and differ.size == 0, (
        la.size, lb.size, a.summary["tick_hz"], b.summary["tick_hz"],
        [(int(i), la[i], lb[i]) for i in differ])


def test_injected_delays_show_in_exactly_the_injected_samples(db, probe_built):
    res = run_cli(["run", "--accel", "tcg", "--icount", "--period", "1ms", "--samples",
                   "1000", "--inject-irqoff", "300us", "--inject-every", "50", "--json"], db)
    assert res.code == 0, res.stderr
    s = res.summary
    raw = _raw(db, s["run_id"])
    lat = _latency_ns(raw, s["tick_hz"])
    injected = (raw["flags"] & FLAG_INJECTED) != 0
    assert s["injected"] == injected.sum() == 1000 // 50
    assert np.all(lat[injected] >= 300_000 * 0.99)
    assert np.all(lat[~injected] < 100_000)


def test_real_time_tcg_duration_accounts_for_every_period(db, probe_built):
    # (was: 2700 <= samples + overruns <= 3300 and 3 or 4 windows: TCG's pace on a
    # loaded host, and the host's own delay to stop, moved both)
    t0 = time.monotonic()
    res = run_cli(["run", "--accel", "tcg", "--period", "1ms", "--duration", "3s",
                   "--window", "1s", "--json"], db)
    wall_s = time.monotonic() - t0
    assert res.code == 0, res.stderr
    check_real_time_accounting(db, res.summary, 3.0, wall_s)
    assert sum(w["samples"] for w in res.windows) == res.summary["samples"]


def _start_run(db, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--accel", "tcg",
                             "--period", "1ms", "--duration", "60s", "--window", "200ms",
                             "--json", "--db", str(db), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _qemu_pids(run_id_hint: str = "irqlab-") -> list[int]:
    out = subprocess.run(["pgrep", "-f", "qemu-system-x86_64 -name irqlab-"],
                         capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _wait_for_samples(proc: subprocess.Popen) -> tuple[list[int], int]:
    """The run's QEMU, once its first window is stored (not after a fixed sleep: a loaded
    host boots late), and that window's samples, which the run must keep."""
    line = ""
    while '"type": "window"' not in line:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
    children = [p for p in _qemu_pids() if _parent(p) == proc.pid]
    assert children, "no QEMU of the run"
    return children, json.loads(line)["samples"]


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def test_killed_qemu_is_stored_as_failed_with_its_data(db, probe_built):
    proc = _start_run(db)
    (qemu,), stored = _wait_for_samples(proc)
    os.kill(qemu, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    summary = [x for x in map(json.loads, out.splitlines())
               if x["type"] == "summary"][-1]
    assert summary["status"] == "failed"
    assert "QEMU exited with code -9" in summary["message"]
    assert summary["samples"] >= stored > 0     # what was stored before the kill is kept
    with Store(db, read_only=True) as st:
        assert st.sample_count(summary["run_id"]) == summary["samples"]
        assert st.resolve(str(summary["run_id"])).status == "failed"


def test_sigint_stops_cleanly_keeps_data_and_leaves_no_qemu(db, probe_built):
    proc = _start_run(db)
    (qemu,), stored = _wait_for_samples(proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    summary = [x for x in map(json.loads, out.splitlines())
               if x["type"] == "summary"][-1]
    assert summary["status"] == "interrupted" and summary["samples"] >= stored > 0
    assert not os.path.exists(f"/proc/{qemu}")
    with Store(db, read_only=True) as st:
        assert st.sample_count(summary["run_id"]) == summary["samples"]


def test_watchdog_fails_a_hung_guest_and_keeps_its_data(db, probe_built):
    # 2 s: long enough that a loaded host's TCG hiccup does not trip it before SIGSTOP.
    proc = _start_run(db, "--stall-timeout", "2s")
    (qemu,), stored = _wait_for_samples(proc)
    os.kill(qemu, signal.SIGSTOP)  # the guest stops making progress
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    summary = [x for x in map(json.loads, out.splitlines())
               if x["type"] == "summary"][-1]
    assert summary["status"] == "failed" and "watchdog" in summary["message"]
    assert summary["samples"] >= stored > 0     # what was stored before the stall is kept
    assert not os.path.exists(f"/proc/{qemu}")


def test_run_histogram_is_stored_and_counts_every_sample(db, probe_built):
    res = run_cli(["run", "--accel", "tcg", "--icount", "--period", "1ms", "--samples", "600",
                   "--inject-irqoff", "200us", "--inject-every", "100", "--json"], db)
    assert res.code == 0, res.stderr
    with Store(db, read_only=True) as st:
        hist = st.histogram(res.summary["run_id"])["all"]
    assert sum(n for _, _, n in hist) == 600
    # The 6 injected samples (>= 200 us) sit in buckets no wider than 1/128 of their
    # value, the rest far below.
    assert sum(n for lo, _, n in hist if lo >= 200_000 * (1 - 1 / 128)) == 6
