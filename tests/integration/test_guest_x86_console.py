"""The x86-64 probe's console sink (``sink=console``: framed lines on COM1) under QEMU TCG
with -icount: the frames decode to exactly the ring's records, the injected delays are in
exactly the injected samples, nothing is lost, and a damaged log loses exactly the samples
of the frames that were damaged."""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest

from irqlab.runner.accel import AccelPlan
from irqlab.runner.machines import MACHINES, X86_EXIT_DONE
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.console import ConsoleReader
from irqlab.samples.record import FLAG_INJECTED
from irqlab.samples.ring import RingReader
from irqlab.store import Store
from tests.conftest import run_cli

pytestmark = pytest.mark.integration

X86 = MACHINES["x86_64"]
ICOUNT = AccelPlan("tcg", "tcg+icount", True)
TICK_HZ = 1_000_000_000         # -icount shift=0: the TSC counts 1 GHz of virtual time


@pytest.fixture(scope="module")
def x86_probe(probe_built):
    """The probe rebuilt if its sources changed (a stale build has no console sink)."""
    subprocess.run(["make", "-s", "-C", str(X86.probe.parents[2]), "ARCH=x86_64"],
                   check=True)
    return X86.probe


def _run_to_end(cfg: GuestConfig, timeout_s: float = 60.0) -> QemuGuest:
    guest = QemuGuest(cfg, ICOUNT, icount=True, name="irqlab-test-x86-console")
    guest.start()
    end = time.monotonic() + timeout_s
    while guest.exit_code() is None and time.monotonic() < end:
        time.sleep(0.02)
    assert guest.exit_code() == X86_EXIT_DONE, guest.stderr()
    return guest


def _lat(recs: np.ndarray) -> np.ndarray:
    return recs["entry_tick"].astype(np.int64) - recs["deadline_tick"].astype(np.int64)


def test_console_sink_round_trip_equals_the_ring(x86_probe):
    """One run, both sinks: the COM1 frames decode to exactly the ring's records."""
    cfg = GuestConfig(period_ns=1_000_000, samples=700, sink="console",
                      inject_every=25, inject_irqoff_ns=200_000)
    guest = _run_to_end(cfg)
    try:
        ring = RingReader(guest.mem_path, X86.ring_offset)
        hdr = ring.header()
        from_ring = ring.poll().records
        console = ConsoleReader(guest.serial_read)
        from_console = console.poll().records
        chdr = console.header()
        ring.close()
    finally:
        guest.stop()
    assert hdr.state == chdr.state == "done" and hdr.arch == chdr.arch == "x86_64"
    assert (chdr.tick_hz, chdr.period_tick, chdr.inject_every, chdr.inject_irqoff_tick,
            chdr.timer_mode, chdr.build_id) == (
        hdr.tick_hz, hdr.period_tick, hdr.inject_every, hdr.inject_irqoff_tick,
        hdr.timer_mode, hdr.build_id)
    assert chdr.tick_hz == TICK_HZ and chdr.timer_mode == "lapic-oneshot"
    assert len(from_ring) == 700 and console.lost == ring.lost == 0
    assert console.bad_frames == 0 and console.missing_frames == 0
    assert np.array_equal(from_console, from_ring)
    assert np.array_equal(from_console["seq"], np.arange(700))
    injected = (from_console["flags"] & FLAG_INJECTED) != 0
    assert np.array_equal(np.flatnonzero(injected) + 1, np.arange(25, 701, 25))
    lat = _lat(from_console)
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
        batches = list(st.iter_samples(s["run_id"]))
    raw = {n: np.concatenate([b.column(n).to_numpy() for b in batches])
           for n in ("seq", "deadline_tick", "entry_tick", "flags")}
    assert np.array_equal(raw["seq"], np.arange(1000))
    assert np.all(np.diff(raw["deadline_tick"].astype(np.int64)) == 1_000_000)
    lat = raw["entry_tick"].astype(np.int64) - raw["deadline_tick"].astype(np.int64)
    injected = (raw["flags"] & FLAG_INJECTED) != 0
    assert np.array_equal(np.flatnonzero(injected) + 1, np.arange(50, 1001, 50))
    assert np.all(lat[injected] > 300_000) and np.all(lat[~injected] < 10_000)
    assert meta["console_sink"]["bad_frames"] == 0
    assert meta["console_sink"]["missing_frames"] == 0
    assert "sink=console" in meta["probe_cmdline"]


def test_console_sink_loss_accounting_on_a_damaged_log(x86_probe):
    """Drop one frame and corrupt another in a real log: exactly their samples are lost."""
    guest = _run_to_end(GuestConfig(period_ns=1_000_000, samples=300, sink="console"))
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
    assert len(batch) + reader.lost == 300
