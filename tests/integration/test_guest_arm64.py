"""Boot the real arm64 probe Image under QEMU TCG (virt, GICv2 and GICv3) and check what
the pipeline reports, through the ring and through the console sink."""

from __future__ import annotations

import shutil
import subprocess
import time

import numpy as np
import pytest

from irqlab.samples.layout import RING_OFFSET
from irqlab.runner.machines import MACHINES
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.record import FLAG_INJECTED
from irqlab.samples.ring import RingReader
from irqlab.store import Store
from tests.conftest import run_cli
from tests.integration._helpers import (check_damaged_log_loses_exactly_its_frames,
                                        check_real_time_accounting, latency_ticks,
                                        read_both_sinks, run_to_end, stored_samples)

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

ARM64 = MACHINES["arm64"]
TICK_HZ = 62_500_000            # QEMU virt's CNTFRQ
PERIOD_TICK = 62_500            # 1 ms


@pytest.fixture(scope="session")
def arm64_probe():
    if shutil.which(ARM64.qemu) is None or shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.skip("qemu-system-aarch64 / gcc-aarch64-linux-gnu missing: run ./setup.sh")
    subprocess.run(["make", "-s", "-C", str(ARM64.probe.parents[2]), "ARCH=arm64"],
                   check=True)
    return ARM64.probe


def _run_to_end(cfg: GuestConfig) -> QemuGuest:
    # QEMU exits 0 on PSCI SYSTEM_OFF, whether the probe finished or failed.
    return run_to_end(cfg, 0, "irqlab-test-arm64")


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
    raw = stored_samples(db, s["run_id"])
    assert np.array_equal(raw["seq"], np.arange(1500))
    assert np.all(np.diff(raw["deadline_tick"].astype(np.int64)) == PERIOD_TICK)
    lat = latency_ticks(raw)
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
    raw = stored_samples(db, s["run_id"])
    assert np.array_equal(raw["seq"], np.arange(200))
    assert np.all(latency_ticks(raw) <= 1)        # polling: taken at once (<= one 16 ns tick)
    with Store(db, read_only=True) as st:
        probe = st.resolve(str(s["run_id"])).metadata["probe"]
    assert (probe["timer_mode"], probe["idle"]) == ("arm64-physical-timer", "poll")


def test_console_sink_round_trip_equals_the_ring(arm64_probe):
    """One run, both sinks: the console frames decode to exactly the ring's records."""
    cfg = GuestConfig(period_ns=1_000_000, arch="arm64", gic=3, samples=700, sink="console",
                      inject_every=25, inject_irqoff_ns=200_000)
    both = read_both_sinks(_run_to_end(cfg), RING_OFFSET)
    both.assert_same_complete_run(700)
    hdr, chdr = both.ring_header, both.console_header
    assert hdr.arch == chdr.arch == "arm64"
    assert (chdr.tick_hz, chdr.period_tick, chdr.inject_every, chdr.build_id) == (
        hdr.tick_hz, hdr.period_tick, hdr.inject_every, hdr.build_id)
    assert int(np.count_nonzero(both.console_records["flags"] & FLAG_INJECTED)) == 700 // 25


def test_console_sink_loss_accounting_on_a_damaged_log(arm64_probe):
    """Drop one frame and corrupt another in a real log: exactly their samples are lost."""
    check_damaged_log_loses_exactly_its_frames(
        _run_to_end(GuestConfig(period_ns=1_000_000, arch="arm64", samples=300,
                                sink="console")), 300)


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
        ring = RingReader(guest.mem_path, RING_OFFSET)
        hdr = ring.header()
        ring.close()
    finally:
        guest.stop()
    assert (hdr.state, hdr.error) == ("error", 22)
    assert "unknown boot parameter 'bogus'" in hdr.message


def test_real_time_tcg_duration(db, arm64_probe):
    # (was: 1700 <= samples + overruns <= 2300: TCG's pace on a loaded host)
    t0 = time.monotonic()
    res = run_cli(["run", "--arch", "arm64", "--accel", "tcg", "--period", "1ms",
                   "--duration", "2s", "--window", "1s", "--json"], db)
    wall_s = time.monotonic() - t0
    assert res.code == 0, res.stderr
    check_real_time_accounting(db, res.summary, 2.0, wall_s)
