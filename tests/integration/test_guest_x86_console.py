"""The x86-64 probe's console sink (``sink=console``: framed lines on COM1) under QEMU TCG
with -icount: the frames decode to exactly the ring's records, the injected delays are in
exactly the injected samples, nothing is lost, and a damaged log loses exactly the samples
of the frames that were damaged."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from irqlab.samples.layout import RING_OFFSET
from irqlab.runner.machines import MACHINES, X86_EXIT_DONE
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.record import FLAG_INJECTED
from irqlab.store import Store
from tests.conftest import run_cli
from tests.integration._helpers import (check_damaged_log_loses_exactly_its_frames,
                                        latency_ticks, read_both_sinks, run_to_end,
                                        stored_samples)

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

X86 = MACHINES["x86_64"]
TICK_HZ = 1_000_000_000         # -icount shift=0: the TSC counts 1 GHz of virtual time


@pytest.fixture(scope="module")
def x86_probe(probe_built):
    """The probe rebuilt if its sources changed (a stale build has no console sink)."""
    subprocess.run(["make", "-s", "-C", str(X86.probe.parents[2]), "ARCH=x86_64"],
                   check=True)
    return X86.probe


def _run_to_end(cfg: GuestConfig) -> QemuGuest:
    return run_to_end(cfg, X86_EXIT_DONE, "irqlab-test-x86-console", timeout_s=60.0)


def test_console_sink_round_trip_equals_the_ring(x86_probe):
    """One run, both sinks: the COM1 frames decode to exactly the ring's records."""
    cfg = GuestConfig(period_ns=1_000_000, samples=700, sink="console",
                      inject_every=25, inject_irqoff_ns=200_000)
    both = read_both_sinks(_run_to_end(cfg), RING_OFFSET)
    both.assert_same_complete_run(700)
    hdr, chdr, from_console = both.ring_header, both.console_header, both.console_records
    assert hdr.arch == chdr.arch == "x86_64"
    assert (chdr.tick_hz, chdr.period_tick, chdr.inject_every, chdr.inject_irqoff_tick,
            chdr.timer_mode, chdr.build_id) == (
        hdr.tick_hz, hdr.period_tick, hdr.inject_every, hdr.inject_irqoff_tick,
        hdr.timer_mode, hdr.build_id)
    assert chdr.tick_hz == TICK_HZ and chdr.timer_mode == "lapic-oneshot"
    assert np.array_equal(from_console["seq"], np.arange(700))
    injected = (from_console["flags"] & FLAG_INJECTED) != 0
    assert np.array_equal(np.flatnonzero(injected) + 1, np.arange(25, 701, 25))
    lat = latency_ticks(from_console)
    assert np.all(lat[injected] > 200_000)          # D is a strict lower bound (ticks)
    assert np.all(lat[~injected] < 10_000)          # the others: taken within 10 us


def test_cli_console_sink_run_exact_counts_and_injections(db, x86_probe):
    res = run_cli(["run", "--accel", "tcg", "--icount", "--sink", "console",
                   "--period", "1ms", "--samples", "1000", "--window", "500ms",
                   "--inject-irqoff", "300us", "--inject-every", "50", "--json"], db)
    assert res.code == 0, res.stderr
    s = res.summary
    assert (s["status"], s["arch"], s["accel"], s["tick_hz"]) == (
        "ok", "x86_64", "tcg+icount", TICK_HZ)
    assert s["samples"] == 1000 and s["lost"] == 0 and s["overruns"] == 0
    assert s["injected"] == 1000 // 50
    assert [w["index"] for w in res.windows] == [0, 1]
    with Store(db, read_only=True) as st:
        meta = st.resolve(str(s["run_id"])).metadata
    raw = stored_samples(db, s["run_id"])
    assert np.array_equal(raw["seq"], np.arange(1000))
    assert np.all(np.diff(raw["deadline_tick"].astype(np.int64)) == 1_000_000)
    lat = latency_ticks(raw)
    injected = (raw["flags"] & FLAG_INJECTED) != 0
    assert np.array_equal(np.flatnonzero(injected) + 1, np.arange(50, 1001, 50))
    assert np.all(lat[injected] > 300_000) and np.all(lat[~injected] < 10_000)
    assert meta["console_sink"]["bad_frames"] == 0
    assert meta["console_sink"]["missing_frames"] == 0
    assert "sink=console" in meta["probe_cmdline"]


def test_console_sink_loss_accounting_on_a_damaged_log(x86_probe):
    """Drop one frame and corrupt another in a real log: exactly their samples are lost."""
    check_damaged_log_loses_exactly_its_frames(
        _run_to_end(GuestConfig(period_ns=1_000_000, samples=300, sink="console")), 300)
