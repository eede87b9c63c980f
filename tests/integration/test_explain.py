"""Known interference with known timing must be found by ``irqlab explain`` (issue 8).

One real TCG run with ``--trace``: QEMU is pinned to CPU 1; a SCHED_FIFO hog pinned to CPU 1
spins D_HOG at recorded times, and the vCPU thread gets SIGSTOP/SIGCONT for D_STOP at other
recorded times. Times are recorded in CLOCK_MONOTONIC and mapped onto the trace clock
with the capture's own start/stop markers (each carries its monotonic time).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import sys
import time
from pathlib import Path

import pytest

from irqlab.explain.attribute import VCPU_STOPPED
from irqlab.explain.run import explain_run
from irqlab.store import Store

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

# A guest with real-time threads on the host (a SCHED_FIFO hog or vCPU on CPU 1): in the
# "host" group, never beside the native tests' FIFO probes and hogs, which preempted this
# test's threads and theirs (seen unloaded: 13 of 20 hog samples named, irqlab-native in
# the causes; a native explain test's stages 88.9 % < 90 %). Beside another guest (normal-
# priority load) test_linux_guest_explain did not: with three workers its host hog was named
# on 63 of 101 spikes. So both hold the guest lock (tests/conftest.py): no guest beside.
XDIST_GROUP = "host"
GUEST_LOCK = True

D_HOG_NS = 10_000_000
D_STOP_NS = 50_000_000
ROUNDS = 20                 # >= 95 % of 20 lets one sample miss, as the issue allows
HOG_CPU = 1

# The hog writes a marker into the run's trace instance right after it wakes and right
# before it sleeps: like a real task (which makes syscalls, arms timers...), it then leaves
# events of its own pid next to its switches, instead of spinning silently in user space
# until the next tick. The first line it reads is the instance's trace_marker; it holds that
# file open only while it runs (an open file would keep irqlab from removing the instance,
# and waking the hog once more to close it would be unplanned interference).
_HOG = r"""
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(15, b"irqlab-hog", 0, 0, 0)      # PR_SET_NAME
os.sched_setaffinity(0, {%d})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
path = sys.stdin.readline().strip()
for line in sys.stdin:
    marker = os.open(path, os.O_WRONLY)
    os.write(marker, b"irqlab-hog woke")
    d = int(line)
    t0 = time.monotonic_ns()
    while time.monotonic_ns() - t0 < d:
        pass
    t1 = time.monotonic_ns()
    os.write(marker, b"irqlab-hog sleeps")
    os.close(marker)
    print(t0, t1, flush=True)
"""


def _instances() -> list[Path]:
    """irqlab trace instances, seen through any tracefs mount: also the private one the
    run under test mounts when none is (find_tracefs() skips those on purpose)."""
    mounts = [Path(line.split()[1]) for line in Path("/proc/mounts").read_text().splitlines()
              if line.split()[2:3] == ["tracefs"]]
    for root in mounts:
        found = list((root / "instances").glob("irqlab-*"))
        if found:
            return found
    return []


def _tracing_possible() -> bool:
    return os.geteuid() == 0 and (os.cpu_count() or 1) >= 2


def _children(pid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = Path(f"/proc/{p}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(p))
    return out


def _comm(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:                 # a short-lived process already gone
        return ""


def _pin_all(pid: int, cpus: set[int]) -> None:
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(t), cpus)
        except OSError:
            pass


def _qemu_of(irqlab_pid: int, timeout: float = 30) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for c in _children(irqlab_pid):
            # The guest's QEMU, not a short `qemu-system-x86_64 --version` probe.
            if "debug-threads" in _comm(f"/proc/{c}/cmdline"):
                return c
        time.sleep(0.05)
    raise AssertionError("QEMU did not start")


def _vcpu_tid(qemu: int, timeout: float = 30) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for t in os.listdir(f"/proc/{qemu}/task"):
            if _comm(f"/proc/{qemu}/task/{t}/comm").startswith("CPU 0/"):
                return int(t)
        time.sleep(0.01)
    raise AssertionError("no vCPU thread")


@pytest.fixture(scope="module")
def interfered(tmp_path_factory, probe_built):
    if not _tracing_possible():
        pytest.skip("needs root (tracefs) and 2 CPUs")
    db = tmp_path_factory.mktemp("explain") / "irqlab.duckdb"
    before = set(_instances())
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--accel", "tcg",
                             "--period", "1ms", "--duration", "9s", "--trace", "--json",
                             "--name", "interfered", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hog = subprocess.Popen([sys.executable, "-c", _HOG % HOG_CPU], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    hogs, stops = [], []
    try:
        qemu = _qemu_of(proc.pid)
        vcpu = _vcpu_tid(qemu)
        for t in os.listdir(f"/proc/{qemu}/task"):
            os.sched_setaffinity(int(t), {HOG_CPU})
        # Keep ourselves and irqlab off that CPU: only the planned interference is there
        # (anything else found is reported, and counted against us if large).
        _pin_all(os.getpid(), set(range(os.cpu_count())) - {HOG_CPU})
        _pin_all(proc.pid, set(range(os.cpu_count())) - {HOG_CPU})
        # Tracing starts once the probe runs (the hook's after_start): wait for its
        # instance, in whichever tracefs holds it (irqlab mounts a private one when none
        # is mounted, so /sys/kernel/tracing may be empty).
        end = time.monotonic() + 20
        # Only the run's own (irqlab-PID-RUN, trace/capture.py): another test's instance
        # may come and go meanwhile (a trace unit test on the other xdist worker).
        def _ours() -> list[Path]:
            return sorted(i for i in set(_instances()) - before
                          if i.name.startswith(f"irqlab-{proc.pid}-"))
        while time.monotonic() < end and not _ours():
            time.sleep(0.02)
        ours = _ours()
        assert ours, "tracing never started"
        hog.stdin.write(f"{ours[0] / 'trace_marker'}\n")
        hog.stdin.flush()
        time.sleep(0.5)
        for _ in range(ROUNDS):
            time.sleep(0.12)
            hog.stdin.write(f"{D_HOG_NS}\n")
            hog.stdin.flush()
            a, b = map(int, hog.stdout.readline().split())
            hogs.append((a, b))
            time.sleep(0.12)
            t0 = time.monotonic_ns()
            os.kill(vcpu, signal.SIGSTOP)
            while time.monotonic_ns() - t0 < D_STOP_NS:
                time.sleep(0.001)
            os.kill(vcpu, signal.SIGCONT)
            stops.append((t0, time.monotonic_ns()))
    finally:
        _pin_all(os.getpid(), set(range(os.cpu_count())))
        # The run ends first: the hog's own exit (interpreter shutdown under SCHED_FIFO)
        # is real interference too, and explain finds it if it falls inside the run.
        out, err = proc.communicate(timeout=120)
        hog.stdin.close()
        hog.wait(10)
    assert proc.returncode == 0, err
    summary = [json.loads(x) for x in out.splitlines() if '"summary"' in x][-1]
    with Store(db, read_only=True) as st:
        res = explain_run(st, str(summary["run_id"]), threshold_ns=0)
    return res, hogs, stops, hog.pid


def _to_trace(res, mono: int) -> int:
    """CLOCK_MONOTONIC ns -> trace ticks, from the start/stop markers' monotonic times."""
    hdr = res.trace.header
    t0, t1 = res.explainer.span
    hz = (t1 - t0) / ((hdr["mono_stop"] - hdr["mono_start"]) / 1e9)
    return int(t0 + (mono - hdr["mono_start"]) * hz / 1e9), hz


def _check(res, intervals, label, d_ns):
    _, hz = _to_trace(res, 0)
    iv = [(_to_trace(res, a)[0], _to_trace(res, b)[0]) for a, b in intervals]
    tol = 0.1 * d_ns * hz / 1e9
    affected, good, blamed_elsewhere = 0, [], []
    for att in res.samples:
        if att.status != "explained":
            continue
        overlap = sum(max(0, min(att.end, b) - max(att.start, a)) for a, b in iv)
        # Inclusive: a culprit interrupted by IRQs still held the vCPU's CPU meanwhile.
        got = sum(att.inclusive(k) for k in att.causes if label(k))
        if overlap >= 0.5 * d_ns * hz / 1e9:
            affected += 1
            good.append((abs(got - overlap) <= tol, round(overlap / hz * 1e6),
                         round(got / hz * 1e6), {k: round(v / hz * 1e6)
                                                 for k, v in att.causes.items() if v > hz * 1e-4}))
        elif overlap == 0:
            near = min((abs(att.start - a) for a, b in iv), default=None)
            blamed_elsewhere.append((got, att.seq, att.start, att.end, near))
    return affected, good, blamed_elsewhere, hz


def _landed(res, intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The rounds that fell inside the capture: the run lasts 9 s of host time, and on a
    loaded host the test's own sleeps stretch, so the last rounds may come after its end.
    Compared with those, not with ROUNDS; at least half of them must land."""
    hdr = res.trace.header
    inside = [(a, b) for a, b in intervals
              if hdr["mono_start"] <= a and b <= hdr["mono_stop"]]
    assert len(inside) >= ROUNDS // 2, (len(inside), hdr["mono_start"], hdr["mono_stop"])
    return inside


def test_explain_names_the_fifo_hog_with_its_duration(interfered):
    res, hogs, _stops, hog_pid = interfered
    landed = _landed(res, hogs)
    affected, good, elsewhere, hz = _check(
        res, landed, lambda k: k == f"preempted by irqlab-hog/{hog_pid}", D_HOG_NS)
    assert affected >= len(landed) * 0.75, (affected, len(landed), res.clock)
    assert sum(g[0] for g in good) >= 0.95 * affected, [g for g in good if not g[0]]
    # Nothing large on samples without interference: < 50 us of hog blamed anywhere else.
    assert max(elsewhere)[0] < 50e-6 * hz, max(elsewhere)


def test_explain_names_the_stopped_vcpu_thread_with_its_duration(interfered):
    res, _hogs, stops, _ = interfered
    landed = _landed(res, stops)
    affected, good, elsewhere, hz = _check(res, landed, lambda k: k == VCPU_STOPPED,
                                           D_STOP_NS)
    assert affected >= len(landed) * 0.75, (affected, len(landed), res.clock)
    assert sum(g[0] for g in good) >= 0.95 * affected, [g for g in good if not g[0]]
    assert max(elsewhere)[0] < 50e-6 * hz, max(elsewhere)


def test_clock_mapping_is_checked_and_bounded(interfered):
    res = interfered[0]
    assert res.clock.consistent
    assert res.clock.error * 1e9 / res.tick_hz < 20_000       # ± 20 us at most
    assert not [a for a in res.samples if a.status == "incomplete"]
    # The run's instance is gone: look through a tracefs mount of our own (the run's
    # private mount, if it made one, is gone with it).
    with tempfile.TemporaryDirectory() as mnt:
        subprocess.run(["mount", "-t", "tracefs", "nodev", mnt], check=True)
        try:
            left = [p.name for p in Path(mnt, "instances").glob("irqlab-*")
                    if p.name.endswith(f"-{res.run.run_id}")]
        finally:
            subprocess.run(["umount", mnt], check=True)
    assert not left


def test_kvm_msr_deadline_anchors_and_debugfs_offset(tmp_path, probe_built):
    """Under KVM (this machine's software backend too) every IA32_TSC_DEADLINE write is
    traced: each anchors the clock at one sample, and debugfs tsc-offset is checked."""
    if not _tracing_possible() or not os.access("/dev/kvm", os.R_OK | os.W_OK):
        pytest.skip("needs root (tracefs), 2 CPUs and /dev/kvm")
    db = tmp_path / "irqlab.duckdb"
    proc = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "run", "--accel", "kvm",
                           "--duration", "2s", "--trace", "--json", "--db", str(db)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = [json.loads(x) for x in proc.stdout.splitlines() if '"summary"' in x][-1]
    with Store(db, read_only=True) as st:
        res = explain_run(st, str(summary["run_id"]), top=10)
    c = res.clock.as_dict(res.tick_hz)
    assert c["msr_anchors"] >= 0.9 * summary["samples"], c
    assert c["consistent"] and c["causality"]["violations"] == 0, c
    assert c["lower_tick"] <= c["offset_tick"] <= c["upper_tick"]
    if "kvm_eoi" in res.trace.fired():      # no EOI exits (APICv): nothing to anchor
        eoi = c["bounds_by_source"]["guest EOIs between kvm_msr anchors"]
        assert "rejected" not in eoi and c["eoi_anchors"] >= 0.9 * c["msr_anchors"], eoi
    if res.trace.header["kvm_debugfs"]["reads"]:
        assert c["candidates"][0]["source"] == "debugfs", c["candidates"]
        assert c["candidates"][0]["status"] == "accepted", c["candidates"]
