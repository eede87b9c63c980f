"""Knobs: parsing, "not applicable here" reasons, restore after success/failure/SIGINT,
and the crash journal replay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from irqlab.knobs import make_knob, parse_knob
from irqlab.journal import Journal, replay_stale
from irqlab.knobs.kvm import HaltPollGlobalKnob
from irqlab.loads import group_members


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def sysfs(tmp_path, monkeypatch) -> Path:
    """A stand-in for /sys/module/kvm/parameters/halt_poll_ns."""
    path = tmp_path / "halt_poll_ns"
    path.write_text("200000\n")
    monkeypatch.setattr(HaltPollGlobalKnob, "path", str(path))
    return path


def test_parse_and_errors():
    assert make_knob("prio", "off") is None
    assert make_knob("cpu_pm", "off").on is False
    assert parse_knob("pin=0-1").cpus == [0, 1]
    with pytest.raises(ValueError, match="run option"):
        parse_knob("idle=poll")
    with pytest.raises(ValueError, match="1..99"):
        parse_knob("prio=120")
    with pytest.raises(ValueError, match="unknown knob"):
        parse_knob("turbo=on")


def test_not_applicable_reasons_under_tcg():
    tcg = SimpleNamespace(plan=SimpleNamespace(accel="tcg"),
                          process=SimpleNamespace(proc=None))
    for key, val in (("cpu_pm", "on"), ("halt_poll", "50us"), ("aio", "native"),
                     ("iothread", "on")):
        knob = make_knob(key, val)
        knob.after_start(tcg)
        assert knob.metadata()["status"].startswith("not applicable here: "), key


def test_global_halt_poll_read_only_is_not_applicable(state, monkeypatch, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "halt_poll_ns").write_text("200000\n")
    os.chmod(ro / "halt_poll_ns", 0o444)
    os.chmod(ro, 0o555)
    monkeypatch.setattr(HaltPollGlobalKnob, "path", "/proc/version")  # never writable
    knob = make_knob("halt_poll_global", "0")
    knob.before_start()
    knob.stop()
    assert knob.metadata()["status"].startswith("not applicable here: /proc/version")


def test_global_halt_poll_written_then_restored(state, sysfs):
    knob = make_knob("halt_poll_global", "10us")
    knob.before_start()
    assert sysfs.read_text() == "10000"
    knob.stop()
    assert sysfs.read_text() == "200000"
    assert knob.metadata()["restored"] is True
    assert list((state / "journal").glob("*")) == []


def _vcpu_like() -> subprocess.Popen:
    """A process whose thread is named like a QEMU vCPU thread."""
    code = textwrap.dedent("""
        import ctypes, time
        ctypes.CDLL(None).prctl(15, b"CPU 0/TCG")
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_prio_and_pin_applied_then_restored(state):
    proc = _vcpu_like()
    try:
        before = (os.sched_getscheduler(proc.pid), os.sched_getaffinity(proc.pid))
        prio, pin = make_knob("prio", "10"), make_knob("pin", "1")
        target = SimpleNamespace(process=SimpleNamespace(proc=proc),
                                 plan=SimpleNamespace(accel="tcg"))
        prio.after_start(target)
        pin.after_start(target)
        assert os.sched_getscheduler(proc.pid) == os.SCHED_FIFO
        assert os.sched_getaffinity(proc.pid) == {1}
        pin.stop()
        prio.stop()
        assert (os.sched_getscheduler(proc.pid), os.sched_getaffinity(proc.pid)) == before
        assert prio.metadata()["threads"][0]["thread"] == "CPU 0/TCG"
    finally:
        proc.kill()
        proc.wait()


def _run(cfg_extra: dict, sysfs: Path, db: Path, interrupt_after: float | None = None):
    from irqlab.cli.render import Renderer
    from irqlab.measure import config_for_target, run
    from irqlab.store import Store

    knob = make_knob("halt_poll_global", "0")
    given = {"accel": "tcg", "icount": True}
    for key in ("probe", "icount"):          # the guest target's own options
        if key in cfg_extra:
            given[key] = cfg_extra.pop(key)
    cfg = config_for_target("guest", given, hooks=[knob], **cfg_extra)
    seen = {}

    class Watch(Renderer):
        def on_started(self, info):
            seen["during"] = sysfs.read_text()
            if interrupt_after is not None:
                threading.Timer(interrupt_after, os.kill,
                                (os.getpid(), signal.SIGINT)).start()

    with Store(db) as store:
        result = run(cfg, store, Watch())
    return result, seen, knob


@pytest.mark.emulated          # boots the guest probe under TCG
def test_restored_after_success(state, sysfs, tmp_path, probe_built):
    result, seen, knob = _run({"samples": 200}, sysfs, tmp_path / "a.duckdb")
    assert result.status == "ok"
    assert seen["during"] == "0" and sysfs.read_text() == "200000"


@pytest.mark.emulated          # boots the guest probe under TCG
def test_restored_after_failure(state, sysfs, tmp_path):
    bogus = tmp_path / "not-a-kernel.elf"
    bogus.write_bytes(b"\x7fELF garbage")
    result, _seen, knob = _run({"samples": 200, "probe": bogus, "boot_timeout_s": 3},
                               sysfs, tmp_path / "b.duckdb")
    assert result.status == "failed"
    assert sysfs.read_text() == "200000" and knob.metadata()["restored"] is True


@pytest.mark.emulated          # boots the guest probe under TCG
def test_restored_after_sigint(state, sysfs, tmp_path, probe_built):
    result, seen, _knob = _run({"samples": None, "duration_ns": 60_000_000_000,
                                "period_ns": 1_000_000, "icount": False},
                               sysfs, tmp_path / "c.duckdb", interrupt_after=0.5)
    assert result.status == "interrupted"
    assert seen["during"] == "0" and sysfs.read_text() == "200000"


@pytest.mark.slow
def test_crash_journal_is_replayed_at_next_start(state, sysfs):
    """irqlab SIGKILLed with a knob applied and a load running: the next start undoes it."""
    code = textwrap.dedent(f"""
        import time
        from irqlab.knobs.kvm import HaltPollGlobalKnob
        from irqlab.loads import parse_load
        HaltPollGlobalKnob.path = {str(sysfs)!r}
        knob = HaltPollGlobalKnob("0")
        knob.before_start()
        load = parse_load("hackbench:groups=1,loops=100000")
        load.before_start()
        print(load.proc.pid, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "IRQLAB_STATE_DIR": str(state)})
    pgid = int(proc.stdout.readline())
    assert sysfs.read_text() == "0"
    # While the owner lives its journal is locked: nothing is replayed.
    assert replay_stale() == []
    proc.kill()
    proc.wait()
    actions = replay_stale()
    assert sysfs.read_text() == "200000"
    assert any("halt_poll_ns" in a for a in actions)
    deadline = time.monotonic() + 30     # a hang guard: a loaded host reaps slowly
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(pgid) == []
    assert list((state / "journal").glob("*.jsonl")) == []


def test_journal_file_goes_away_when_everything_is_undone(tmp_path):
    j = Journal(tmp_path)
    a = j.add("write", path="/x", old="1")
    b = j.add("write", path="/y", old="2")
    assert j.path.exists()
    j.done(a)
    assert j.path.exists()
    j.done(b)
    assert not j.path.exists()


def test_one_journal_per_state_directory_for_the_whole_process(tmp_path, monkeypatch):
    # Switching state directories and back must give the same journal: a second object
    # for the same file would flock it again and wait for itself (a hang seen in the suite).
    from irqlab.journal import journal
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path / "a"))
    first = journal()
    entry = first.add("sched", tid=0, policy=0, priority=0, affinity=[0])
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path / "b"))
    assert journal() is not first
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path / "a"))
    again = journal()
    assert again is first
    again.done(entry)
