"""Boot the real arm64 probe Image under QEMU TCG (virt, GICv2 and GICv3) and check what
the pipeline reports, through the ring and through the console sink."""

from __future__ import annotations

import shutil
import subprocess
import time

import numpy as np
import pytest

from irqlab.runner.accel import AccelPlan
from irqlab.runner.machines import MACHINES
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.console import ConsoleReader
from irqlab.samples.record import FLAG_INJECTED
from irqlab.samples.ring import RingReader
from irqlab.store import Store
from tests.conftest import run_cli

pytestmark = pytest.mark.integration

ARM64 = MACHINES["arm64"]
ICOUNT = AccelPlan("tcg", "tcg+icount", True)
TICK_HZ = 62_500_000            # QEMU virt's CNTFRQ
PERIOD_TICK = 62_500            # 1 ms


@pytest.fixture(scope="session")
def arm64_probe():
    if shutil.which(ARM64.qemu) is None or shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.skip("qemu-system-aarch64 / gcc-aarch64-linux-gnu missing: run ./setup.sh")
    subprocess.run(["make", "-s", "-C", str(ARM64.probe.parents[2]), "ARCH=arm64"],
                   check=True)
    return ARM64.probe


def _raw(db, run_id: int) -> dict[str, np.ndarray]:
    with Store(db, read_only=True) as st:
        batches = list(st.iter_samples(run_id))
    return {name: np.concatenate([b.column(name).to_numpy() for b in batches])
            for name in ("seq", "deadline_tick", "entry_tick", "flags")}


def _lat(raw: dict) -> np.ndarray:
    return raw["entry_tick"].astype(np.int64) - raw["deadline_tick"].astype(np.int64)


def _run_to_end(cfg: GuestConfig, timeout_s: float = 30.0) -> QemuGuest:
    guest = QemuGuest(cfg, ICOUNT, icount=True, name="irqlab-test-arm64")
    guest.start()
    end = time.monotonic() + timeout_s
    while guest.exit_code() is None and time.monotonic() < end:
        time.sleep(0.02)
    assert guest.exit_code() == 0, guest.stderr()   # PSCI SYSTEM_OFF, done or error
    return guest


@pytest.mark.parametrize("gic", [3, 2])
def test_icount_wfi_counts_and_exact_injected_delays(db, arm64_probe, gic):
    res = run_cli(["run", "--arch", "arm64", "--gic", str(gic), "--accel", "tcg", "--icount",
                   "--period", "1ms", "--samples", "1500", "--window", "500ms",
                   "--inject-irqoff", "300us", "--inject-every", "50", "--json"], db)
    assert res.code == 0, res.stderr
    s = res.summary
    assert (s["status"], s["arch"], s["accel"], s["tick_hz"]) == (
        "ok", "arm64", "tcg+icount", TICK_HZ)
    assert s["samples"] == 1500 and s["lost"] == 0 and s["overruns"] == 0
    assert [w["index"] for w in res.windows] == [0, 1, 2]
    raw = _raw(db, s["run_id"])
    assert np.array_equal(raw["seq"], np.arange(1500))
    assert np.all(np.diff(raw["deadline_tick"].astype(np.int64)) == PERIOD_TICK)
    lat = _lat(raw)
    injected = (raw["flags"] & FLAG_INJECTED) != 0
    assert s["injected"] == injected.sum() == 1500 // 50
    assert np.array_equal(np.flatnonzero(injected) + 1, np.arange(50, 1501, 50))
    # icount: the spin ends on the very tick deadline + 300 us (18750 ticks), and the
    # pending interrupt is taken within the same 16 ns tick; idle wakes are as exact.
    # Observed here: about one run in two has one or two samples a few ticks late, at
    # random places: QEMU's main loop kicks the vCPU out of a translation block now and
    # then, which moves the instruction at which the timer is checked (icount without
    # record/replay is deterministic only between such kicks). Allow 4 ticks (64 ns).
    slack_tick = 4
    assert np.all((lat[injected] >= 18_750) & (lat[injected] <= 18_750 + slack_tick))
    odd = np.flatnonzero(((lat < 0) | (lat > slack_tick)) & ~injected)
    assert odd.size == 0, list(zip(odd.tolist(), lat[odd].tolist()))
    with Store(db, read_only=True) as st:
        meta = st.resolve(str(s["run_id"])).metadata
    probe = meta["probe"]
    assert (probe["timer_mode"], probe["tick_method"], probe["idle"]) == (
        "arm64-virtual-timer", "cntfrq", "hlt")
    assert f"gic-version={gic}" in " ".join(meta["qemu_argv"])


def test_icount_poll_physical_timer_gicv2(db, arm64_probe):
    res = run_cli(["run", "--arch", "arm64", "--gic", "2", "--accel", "tcg", "--icount",
                   "--idle", "poll", "--timer", "phys", "--period", "1ms", "--samples", "200",
                   "--json"], db)
    assert res.code == 0, res.stderr
    s = res.summary
    assert s["status"] == "ok" and s["samples"] == 200 and s["lost"] == 0
    raw = _raw(db, s["run_id"])
    assert np.array_equal(raw["seq"], np.arange(200))
    assert np.all(_lat(raw) <= 1)        # polling: taken at once (<= one 16 ns tick)
    with Store(db, read_only=True) as st:
        probe = st.resolve(str(s["run_id"])).metadata["probe"]
    assert (probe["timer_mode"], probe["idle"]) == ("arm64-physical-timer", "poll")


def test_console_sink_round_trip_equals_the_ring(arm64_probe):
    """One run, both sinks: the console frames decode to exactly the ring's records."""
    cfg = GuestConfig(period_ns=1_000_000, arch="arm64", gic=3, samples=700, sink="console",
                      inject_every=25, inject_irqoff_ns=200_000)
    guest = _run_to_end(cfg)
    try:
        ring = RingReader(guest.mem_path, ARM64.ring_offset)
        hdr = ring.header()
        from_ring = ring.poll().records
        console = ConsoleReader(guest.serial_read)
        from_console = console.poll().records
        chdr = console.header()
        ring.close()
    finally:
        guest.stop()
    assert hdr.state == chdr.state == "done" and hdr.arch == chdr.arch == "arm64"
    assert (chdr.tick_hz, chdr.period_tick, chdr.inject_every, chdr.build_id) == (
        hdr.tick_hz, hdr.period_tick, hdr.inject_every, hdr.build_id)
    assert len(from_ring) == 700 and console.lost == ring.lost == 0
    assert console.bad_frames == 0 and console.missing_frames == 0
    assert np.array_equal(from_console, from_ring)
    assert int(np.count_nonzero(from_console["flags"] & FLAG_INJECTED)) == 700 // 25


def test_console_sink_loss_accounting_on_a_damaged_log(arm64_probe, tmp_path):
    """Drop one frame and corrupt another in a real log: exactly their samples are lost."""
    guest = _run_to_end(GuestConfig(period_ns=1_000_000, arch="arm64", samples=300,
                                    sink="console"))
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
    assert reader.lost == batch.lost == expected_lost
    assert len(batch) + reader.lost == 300


def test_cli_console_sink_run(db, arm64_probe):
    res = run_cli(["run", "--arch", "arm64", "--accel", "tcg", "--icount", "--sink", "console",
                   "--period", "500us", "--samples", "600", "--json"], db)
    assert res.code == 0, res.stderr
    s = res.summary
    assert s["status"] == "ok" and s["samples"] == 600 and s["lost"] == 0
    with Store(db, read_only=True) as st:
        meta = st.resolve(str(s["run_id"])).metadata
    assert meta["console_sink"]["bad_frames"] == 0 and "sink=console" in meta["probe_cmdline"]


def test_probe_error_is_reported_though_qemu_exits_0(arm64_probe):
    guest = _run_to_end(GuestConfig(period_ns=1_000_000, arch="arm64", samples=10,
                                    extra_args="bogus=1"))
    try:
        ring = RingReader(guest.mem_path, ARM64.ring_offset)
        hdr = ring.header()
        ring.close()
    finally:
        guest.stop()
    assert (hdr.state, hdr.error) == ("error", 22)
    assert "unknown boot parameter 'bogus'" in hdr.message


def test_real_time_tcg_duration(db, arm64_probe):
    res = run_cli(["run", "--arch", "arm64", "--accel", "tcg", "--period", "1ms",
                   "--duration", "2s", "--window", "1s", "--json"], db)
    assert res.code == 0, res.stderr
    s = res.summary
    assert s["accel"] == "tcg" and s["lost"] == 0
    assert 1700 <= s["samples"] + s["overruns"] <= 2300
