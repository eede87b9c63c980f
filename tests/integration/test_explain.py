"""Known interference with known timing must be found by ``irqlab explain`` (issue 8).

One real TCG run with ``--trace``: QEMU is pinned to CPU 1; a SCHED_FIFO hog pinned to CPU 1
spins D_HOG at recorded times, and the vCPU thread gets SIGSTOP/SIGCONT for D_STOP at other
recorded times. Times are recorded as markers in the run's own trace (the hog's when it
wakes and before it sleeps, the test's beside each signal), so they are on the trace clock
itself. CLOCK_MONOTONIC stamps mapped through the capture's start/stop markers were off by
the time between irqlab's reading of the clock and its marker write: on a busy host over a
millisecond (a 10 ms hog blamed for 10.2 ms, "recorded" 9.1 ms).
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

import numpy as np
import pytest

from irqlab.explain.attribute import VCPU_STOPPED
from irqlab.explain.clock import MSR_TSC_DEADLINE
from irqlab.explain.run import explain_run
from irqlab.explain.seam import stored_samples
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
HOG_MARKS = (b"irqlab-hog woke", b"irqlab-hog sleeps")
STOP_MARK, CONT_MARK = b"irqlab-test sigstop", b"irqlab-test sigcont"

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
    os.write(marker, %r)
    d = int(line)
    t0 = time.monotonic_ns()
    while time.monotonic_ns() - t0 < d:
        pass
    os.write(marker, %r)
    os.close(marker)
    print("spun", flush=True)
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
    hog = subprocess.Popen([sys.executable, "-c", _HOG % (HOG_CPU, *HOG_MARKS)],
                           stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
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
        marker = ours[0] / "trace_marker"
        hog.stdin.write(f"{marker}\n")
        hog.stdin.flush()
        time.sleep(0.5)
        for _ in range(ROUNDS):
            time.sleep(0.12)
            hog.stdin.write(f"{D_HOG_NS}\n")
            hog.stdin.flush()
            assert hog.stdout.readline().strip() == "spun"
            time.sleep(0.12)
            fd = os.open(marker, os.O_WRONLY)     # open only meanwhile: see the hog's
            try:
                os.write(fd, STOP_MARK)
                t0 = time.monotonic_ns()
                os.kill(vcpu, signal.SIGSTOP)
                while time.monotonic_ns() - t0 < D_STOP_NS:
                    time.sleep(0.001)
                os.kill(vcpu, signal.SIGCONT)
                os.write(fd, CONT_MARK)
            finally:
                os.close(fd)
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
    hogs = _marked(res, hog.pid, HOG_MARKS)
    stops = _marked(res, os.getpid(), (STOP_MARK, CONT_MARK))
    return res, hogs, stops, hog.pid


def _marked(res, pid: int, marks: tuple[bytes, bytes]) -> list[tuple[int, int]]:
    """[first mark, second mark] intervals (trace ticks) written by ``pid``."""
    pr = res.trace.t("print")
    out, opened = [], None
    for ts, who, buf in zip(pr["ts"].tolist(), pr["common_pid"].tolist(),
                            pr["buf"].tolist()):
        text = buf.split(b"\0", 1)[0] if isinstance(buf, bytes) else str(buf).encode()
        if int(who) != pid:
            continue
        if text.startswith(marks[0]):
            opened = int(ts)
        elif text.startswith(marks[1]) and opened is not None:
            out.append((opened, int(ts)))
            opened = None
    return out


def _overlaps(att, intervals) -> list[int]:
    return [max(0, min(att.end, b) - max(att.start, a)) for a, b in intervals]


def _check(res, iv, others, label, d_ns):
    """Samples whose window holds one interval of ``iv`` (and none of ``others``, the
    other kind of planned interference) must be blamed on ``label`` for that overlap;
    samples that hold none, hardly at all. A window holding several may hold one while
    the vCPU did not want its CPU (seen on a loaded host: a 270 ms window with two 10 ms
    hog spins and a stop, the vCPU halted through one spin: 10.2 ms blamed against
    20.1 ms overlapped), so it is not judged."""
    hz = res.tick_hz
    tol = 0.1 * d_ns * hz / 1e9
    affected, good, blamed_elsewhere = 0, [], []
    for att in res.samples:
        if att.status != "explained":
            continue
        overlaps = _overlaps(att, iv)
        overlap = sum(overlaps)
        # Inclusive: a culprit interrupted by IRQs still held the vCPU's CPU meanwhile.
        got = sum(att.inclusive(k) for k in att.causes if label(k))
        if overlap == 0:
            near = min((abs(att.start - a) for a, b in iv), default=None)
            blamed_elsewhere.append((got, att.seq, att.start, att.end, near))
        elif sum(map(bool, overlaps)) > 1 or any(_overlaps(att, others)):
            continue
        elif overlap >= 0.5 * d_ns * hz / 1e9:
            affected += 1
            good.append((abs(got - overlap) <= tol, round(overlap / hz * 1e6),
                         round(got / hz * 1e6), {k: round(v / hz * 1e6)
                                                 for k, v in att.causes.items() if v > hz * 1e-4}))
    return affected, good, blamed_elsewhere, hz


def _enough(affected: int) -> float:
    """Samples of ``affected`` that must be blamed right: 95 %, but one may miss. With
    ~18 affected samples 95 % allowed none, and on a loaded host one hog spin was once
    charged 13.6 ms against its markers' 10.5 ms (2 of 13 runs at f5a53ee, 0 of 14 before
    it: not separable), the hog's own markers written late around its spin."""
    return min(0.95 * affected, affected - 1)


def _landed(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The rounds that fell inside the capture (their markers are in it): the run lasts
    9 s of host time, and on a loaded host the test's own sleeps stretch, so the last
    rounds may come after its end. Compared with those, not with ROUNDS; at least half of
    them must land."""
    assert len(intervals) >= ROUNDS // 2, len(intervals)
    return intervals


def test_explain_names_the_fifo_hog_with_its_duration(interfered):
    res, hogs, stops, hog_pid = interfered
    landed = _landed(hogs)
    affected, good, elsewhere, hz = _check(
        res, landed, stops, lambda k: k == f"preempted by irqlab-hog/{hog_pid}", D_HOG_NS)
    assert affected >= len(landed) * 0.75, (affected, len(landed), res.clock)
    assert sum(g[0] for g in good) >= _enough(affected), [g for g in good if not g[0]]
    # Nothing large on samples without interference: < 50 us of hog blamed anywhere else.
    assert max(elsewhere)[0] < 50e-6 * hz, max(elsewhere)


def test_explain_names_the_stopped_vcpu_thread_with_its_duration(interfered):
    res, hogs, stops, _ = interfered
    landed = _landed(stops)
    affected, good, elsewhere, hz = _check(res, landed, hogs, lambda k: k == VCPU_STOPPED,
                                           D_STOP_NS)
    assert affected >= len(landed) * 0.75, (affected, len(landed), res.clock)
    assert sum(g[0] for g in good) >= _enough(affected), [g for g in good if not g[0]]
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
        last_deadline = int(stored_samples(st, summary["run_id"])["deadline_tick"].max())
    c = res.clock.as_dict(res.tick_hz)
    # Every deadline write the capture holds for a sample the run stored anchors that
    # sample; the capture (started once QEMU runs) holds most of the run's: 1,722 of
    # 1,941 samples beside stress-ng, the first ~0.2 s of a 2 s run before the capture
    # began. Writes past the run's last stored deadline have no sample: the guest arms
    # on until QEMU stops. Alone, every unmatched write was such a one (50 of 1,831); a
    # fresh-clone suite failed this test with 163 of 1,262 unmatched, counted without
    # this cut (QEMU stops later on a busy host).
    m = res.trace.t("kvm_msr")
    armed = m["data"][(m["ecx"] == MSR_TSC_DEADLINE) & (m["write"] == 1)].astype(np.int64)
    writes = np.unique(armed[armed <= last_deadline]).size
    assert c["msr_anchors"] >= 0.9 * writes and writes >= 0.75 * summary["samples"], \
        (c, writes)
    assert c["consistent"] and c["causality"]["violations"] == 0, c
    assert c["lower_tick"] <= c["offset_tick"] <= c["upper_tick"]
    if "kvm_eoi" in res.trace.fired():      # no EOI exits (APICv): nothing to anchor
        eoi = c["bounds_by_source"]["guest EOIs between kvm_msr anchors"]
        assert "rejected" not in eoi and c["eoi_anchors"] >= 0.9 * c["msr_anchors"], eoi
    if res.trace.header["kvm_debugfs"]["reads"]:
        assert c["candidates"][0]["source"] == "debugfs", c["candidates"]
        assert c["candidates"][0]["status"] == "accepted", c["candidates"]
