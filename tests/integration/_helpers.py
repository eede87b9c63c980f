"""Helpers of the guest-probe integration tests (x86-64 and arm64 alike): run a probe
to its end in QEMU, read both of its sinks, check loss accounting on a damaged log."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from irqlab.runner.accel import AccelPlan
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.console import ConsoleReader
from irqlab.samples.ring import RingHeader, RingReader
from irqlab.store import Store

# TCG with -icount: guest time is deterministic, so latencies are exact.
ICOUNT = AccelPlan("tcg", "tcg+icount", True)


def run_to_end(cfg: GuestConfig, done_code: int, name: str,
               timeout_s: float = 30.0) -> QemuGuest:
    """Start the probe and wait for QEMU to exit with ``done_code``; the caller stops
    the guest (its memory and serial output stay readable until then)."""
    guest = QemuGuest(cfg, ICOUNT, icount=True, name=name)
    guest.start()
    end = time.monotonic() + timeout_s
    while guest.exit_code() is None and time.monotonic() < end:
        time.sleep(0.02)
    assert guest.exit_code() == done_code, guest.stderr()
    return guest


@dataclass
class BothSinks:
    """One finished run read through the ring (guest RAM) and the console sink."""

    ring_header: RingHeader
    ring_records: np.ndarray
    ring_lost: int
    console: ConsoleReader
    console_header: RingHeader
    console_records: np.ndarray

    def assert_same_complete_run(self, samples: int) -> None:
        """Both finished, nothing lost or damaged, and the records equal to the bit."""
        assert self.ring_header.state == self.console_header.state == "done"
        assert len(self.ring_records) == samples
        assert self.console.lost == self.ring_lost == 0
        assert self.console.bad_frames == 0 and self.console.missing_frames == 0
        assert np.array_equal(self.console_records, self.ring_records)


def read_both_sinks(guest: QemuGuest, ring_offset: int) -> BothSinks:
    """Read a finished guest's ring and console, then stop it."""
    try:
        ring = RingReader(guest.mem_path, ring_offset)
        hdr = ring.header()
        from_ring = ring.poll().records
        console = ConsoleReader(guest.serial_read)
        from_console = console.poll().records
        chdr = console.header()
        lost = ring.lost
        ring.close()
    finally:
        guest.stop()
    return BothSinks(hdr, from_ring, lost, console, chdr, from_console)


def check_damaged_log_loses_exactly_its_frames(guest: QemuGuest, samples: int) -> None:
    """Drop one frame and corrupt another in a finished guest's console log (the guest is
    stopped here): exactly their samples are lost, the rest decode."""
    try:
        log, _, _ = guest.serial_read(0)
    finally:
        guest.stop()
    lines = log.split(b"\n")
    frames = [i for i, ln in enumerate(lines) if b"~IQS," in ln]
    victims = frames[2], frames[5]

    def n_items(line: bytes) -> int:
        return line.split(b"*")[0].split(b",")[4].count(b";") + 1
    expected_lost = sum(n_items(lines[i]) for i in victims)
    corrupt = bytearray(lines[victims[1]])
    corrupt[20] = ord("#")
    lines[victims[1]] = bytes(corrupt)
    del lines[victims[0]]
    reader = ConsoleReader()
    reader.feed(b"\n".join(lines))
    batch = reader.poll()
    assert reader.state() == "done"
    assert reader.bad_frames == 1 and reader.missing_frames >= 1
    assert reader.lost == batch.lost == expected_lost > 0
    assert len(batch) + reader.lost == samples


def stored_samples(db: Path, run_id: int) -> dict[str, np.ndarray]:
    """The columns of a stored run that the exactness checks need."""
    with Store(db, read_only=True) as st:
        batches = list(st.iter_samples(run_id))
    return {name: np.concatenate([b.column(name).to_numpy() for b in batches])
            for name in ("seq", "deadline_tick", "entry_tick", "flags")}


def latency_ticks(recs) -> np.ndarray:
    """Entry minus deadline, signed (records or stored_samples() columns)."""
    return recs["entry_tick"].astype(np.int64) - recs["deadline_tick"].astype(np.int64)


def check_real_time_accounting(db: Path, s: dict, duration_s: float,
                               wall_s: float) -> None:
    """A real-time TCG run (no -icount, bounded by ``duration_s`` of host time, which the
    test measured as ``wall_s`` around the whole command): how many samples TCG manages
    depends on the host's load, so check what holds at any speed. Every period of the
    guest's recorded span is a sample or a counted overrun (absolute schedule: deadlines
    whole periods apart, more after an overrun, probe.c probe_timer_rearm), and the span
    is the run's duration: the guest clock follows the host's under TCG, so it can
    neither outlast the command nor fall short of half the duration unless the run
    stopped by another bound (a window, a sample count) or the guest clock stalled."""
    assert s["status"] == "ok" and s["accel"] == "tcg" and s["lost"] == 0
    recs = stored_samples(db, s["run_id"])
    assert len(recs["seq"]) == s["samples"]
    assert np.array_equal(recs["seq"], np.arange(s["samples"]))
    deadline = recs["deadline_tick"].astype(np.int64)
    gaps = np.diff(deadline)
    period = int(gaps.min())
    assert np.all(gaps % period == 0), "deadlines are whole periods apart"
    skipped = int((gaps // period - 1).sum())
    assert skipped <= s["overruns"], (skipped, s["overruns"])   # each one counted
    span_s = (int(deadline[-1] - deadline[0]) + period) / s["tick_hz"]
    assert 0.5 * duration_s <= span_s <= wall_s, (span_s, duration_s, wall_s)


def need_arm64_xen_dom0() -> None:
    """Skip unless QEMU for arm64, the arm64 Xen and its Linux dom0 are there (set-up
    caches them); then build the arm64 probe."""
    import shutil
    import subprocess

    import pytest

    from irqlab.runner.machines import MACHINES
    from irqlab.runner.xen import cached_binaries
    from irqlab.runner.xen_dom0 import dom0_cache_dir
    arm64 = MACHINES["arm64"]
    if shutil.which(arm64.qemu) is None:
        pytest.skip("qemu-system-aarch64 missing: run ./setup.sh --install-only")
    if not cached_binaries("arm64"):
        pytest.skip("no arm64 Xen hypervisor cached: run scripts/fetch-xen.sh")
    if not (dom0_cache_dir("arm64") / ".complete").exists():
        pytest.skip("no arm64 dom0 cached: run scripts/fetch-xen-dom0.sh arm64")
    subprocess.run(["make", "-s", "-C", str(arm64.probe.parents[2]), "ARCH=arm64"],
                   check=True)
