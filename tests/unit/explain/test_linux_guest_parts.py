"""The pieces of the linux-guest explain that need no guest (issue 29): the guest trace
region's layout (as probes/native/gtrace.c writes it), the clock map, and the merge of
the two layers' causes."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from irqlab.explain.attribute import Attribution
from irqlab.explain.linux_guest import GuestHostClock, _outside, merge
from irqlab.trace.guest import HEADER_BYTES, MAGIC, archive_header, read_region


def _record(kind: int, cpu: int, name: bytes, data: bytes) -> bytes:
    raw = struct.pack("<IIII", kind, cpu, len(data), len(name)) + name + data
    return raw + b"\0" * (-len(raw) % 8)


def _region(records: bytes, state: int = 2, committed: int | None = None,
            version: int = 1, counter_hz: int = 0) -> bytes:
    head = struct.pack("<8sIIQQIIQ200s", MAGIC, version, state,
                       len(records) if committed is None else committed, 3, 2, 4096,
                       HEADER_BYTES + len(records) + 64, b"")
    head = head.ljust(256, b"\0") + struct.pack("<II4Q", 2, 0, 100, 1000, 200, 1250)
    if version >= 2:
        head += struct.pack("<3Q", counter_hz, 700, 300)
    return head.ljust(HEADER_BYTES, b"\0") + records + b"\xff" * 64   # junk past the end


def test_the_region_gives_files_pages_and_anchors():
    fmt = b"name: sched_switch\nID: 316\n"
    recs = (_record(1, 0, b"events/sched/sched_switch/format", fmt)
            + _record(1, 0, b"enabled", b"sched/sched_switch\nirq_vectors/local_timer_entry\n")
            + _record(1, 0, b"missing", b"preemptirq/irq_disable\n")
            + _record(2, 1, b"", b"P" * 4096) + _record(2, 0, b"", b"Q" * 100))
    facts, pages = read_region(_region(recs))
    assert facts["state"] == "done" and facts["dropped_pages"] == 3 and facts["ncpus"] == 2
    assert facts["guest_anchors"] == [{"mono_ns": 100, "tsc": 1000},
                                      {"mono_ns": 200, "tsc": 1250}]
    assert pages == [(1, b"P" * 4096), (0, b"Q" * 100)]
    hdr = archive_header(facts, 7)
    assert hdr["clock"] == "mono" and hdr["layer"] == "guest" and hdr["run_id"] == 7
    assert hdr["formats"] == {"sched:sched_switch": fmt.decode()}
    assert hdr["enabled"] == ["sched:sched_switch", "irq_vectors:local_timer_entry"]
    assert hdr["missing"] == ["preemptirq:irq_disable"] and hdr["cpus"] == [0, 1]


def test_version_2_gives_the_counters_rate():
    """gtrace.c's version 2: the anchors' counter is CNTVCT_EL0 on arm64, and its rate
    (CNTFRQ_EL0) follows the anchors; version 1 (x86 before) and x86's 0 say the TSC."""
    facts, _pages = read_region(_region(b"", version=2, counter_hz=62_500_000))
    assert facts["counter_hz"] == 62_500_000
    assert archive_header(facts, 1)["guest_counter_hz"] == 62_500_000
    # each anchor's clock-read gap: the clock map's bound grows by half the wider
    assert [a["gap_ns"] for a in facts["guest_anchors"]] == [700, 300]
    assert GuestHostClock(facts["guest_anchors"], 62_500_000).anchor_error_ns == 351
    assert "gap_ns" not in read_region(_region(b""))[0]["guest_anchors"][0]
    assert read_region(_region(b"", version=1))[0]["counter_hz"] == 0
    assert read_region(_region(b"", version=2, counter_hz=0))[0]["counter_hz"] == 0


def test_only_committed_records_are_read():
    recs = _record(2, 0, b"", b"A" * 8) + _record(2, 0, b"", b"B" * 8)
    _facts, pages = read_region(_region(recs, state=1, committed=24))
    assert pages == [(0, b"A" * 8)]


def test_a_region_the_guest_never_wrote_is_refused():
    with pytest.raises(ValueError, match="irqlab-gtrace did not start"):
        read_region(b"\0" * (HEADER_BYTES * 2))


def test_the_clock_maps_guest_ns_to_host_ticks_and_back():
    clock = GuestHostClock([{"mono_ns": 1_000, "tsc": 10_000},
                            {"mono_ns": 2_001_000, "tsc": 5_010_000}])   # 2.5 ticks/ns
    clock.offset = -7_000
    assert clock.rate == 2.5
    assert int(clock.guest_tsc(3_000)) == 15_000
    assert int(clock.to_host(np.array([3_000]))[0]) == 22_000
    assert clock.to_guest(22_000) == 3_000
    with pytest.raises(ValueError, match="two clock anchors"):
        GuestHostClock([{"mono_ns": 5, "tsc": 5}])


def test_an_arm64_counter_is_taken_in_ns_at_its_rate():
    """CNTVCT_EL0 at QEMU's 62.5 MHz: 16 ns a tick. The counter in ns runs with the
    guest's clock (rate 1: both come from QEMU's virtual clock under TCG), and the map
    to the host's mono clock is one offset; the bound adds one counter tick."""
    clock = GuestHostClock([{"mono_ns": 5_000_000, "tsc": 1_000},
                            {"mono_ns": 6_000_000, "tsc": 63_500}], 62_500_000)
    assert clock.rate == 1.0 and clock.counter_tick_ns == 16
    assert int(clock.guest_tsc(5_000_000)) == 16_000
    clock.offset = -123_000                   # counter ns - host mono ns
    assert int(clock.to_host(np.array([5_500_000]))[0]) == 516_000 + 123_000
    assert clock.to_guest(639_000) == 5_500_000
    # x86 (rate 0: the TSC as it is) is unchanged
    assert GuestHostClock([{"mono_ns": 0, "tsc": 0},
                           {"mono_ns": 10, "tsc": 30}]).counter_tick_ns == 0


def _guest(causes: dict[str, int], latency: int = 1000) -> Attribution:
    return Attribution(1, latency, 0, latency, causes=dict(causes))


def test_merge_names_the_layer_and_adds_up():
    g = _guest({"preempted by hog/80 prio 95": 600, "hardirq: vector local_timer": 100,
                "unexplained": 0})
    out = merge(g, {"host: vCPU thread preempted by x/1": 300})
    assert sum(out.causes.values()) == 1000
    assert out.causes["host: vCPU thread preempted by x/1"] == 300
    assert set(out.causes) == {"host: vCPU thread preempted by x/1", "unexplained",
                               "guest: preempted by hog/80 prio 95",
                               "guest: hardirq: vector local_timer"}
    # The guest's 700 ns fill the 700 left: unchanged, the largest first.
    assert out.causes["guest: preempted by hog/80 prio 95"] == 600


def test_merge_without_a_host_side_keeps_the_guest_causes():
    g = _guest({"probe thread running (return to user space)": 999, "unexplained": 1})
    out = merge(g, None)
    assert out.causes == {"guest: probe thread running (return to user space)": 999,
                          "unexplained": 1}


def test_a_sample_that_is_not_explained_passes_through():
    g = _guest({"unexplained": 1000})
    g.status, g.reason = "incomplete", "events lost"
    out = merge(g, {"host: x": 5})
    assert (out.status, out.reason, out.causes) == ("incomplete", "events lost",
                                                    {"unexplained": 1000})


def test_host_causes_over_the_latency_are_scaled_and_none_is_negative():
    """Seen on a real run before the fix: the QEMU main loop's wait counted beside the
    vCPU's own preemption (the same wall time twice) gave 3.45 ms of host causes in a
    2.76 ms window and the guest's IRQ latency -0.70 ms."""
    g = _guest({"IRQ latency: CPU idle exit (C-state)": 400, "unexplained": 0})
    out = merge(g, {"host: vCPU thread preempted by a/1": 900,
                    "host: QEMU main loop (TCG's timers) preempted by a/1": 600,
                    "host: softirq SCHED": 0})
    assert sum(out.causes.values()) == 1000
    assert min(out.causes.values()) >= 0, out.causes
    assert out.causes["host: vCPU thread preempted by a/1"] == 600
    assert out.causes["host: QEMU main loop (TCG's timers) preempted by a/1"] == 400
    assert out.causes["guest: IRQ latency: CPU idle exit (C-state)"] == 0
    assert "host: softirq SCHED" not in out.causes


def test_the_main_loops_wait_counts_only_while_the_vcpu_ran():
    off = [(100, 200), (300, 350)]
    assert _outside(0, 400, off) == 250
    assert _outside(120, 180, off) == 0
    assert _outside(150, 320, off) == 100
    assert _outside(500, 400, off) == 0


def test_the_guest_capture_is_read_live_as_gtrace_ships_it(tmp_path):
    """The guest hook hands its guest-side pages to the live split while the run records
    (irqlab.runconfig.LiveCapture): each call the pages gtrace committed since the last,
    with the header of the files shipped first; a record not committed yet waits."""
    from irqlab.trace.guest import LinuxGuestTraceHook
    hook = LinuxGuestTraceHook(tmp_path / "irqlab.duckdb")
    assert hook.capture_kind() == "linux-guest" and hook.live_pages() is None
    hook._region = tmp_path / "region"
    hook.keep_live()
    assert hook.live_pages() is None                       # gtrace has not started
    files = (_record(1, 0, b"events/sched/sched_switch/format", b"name: sched_switch\n")
             + _record(1, 0, b"enabled", b"sched/sched_switch\n"))
    first = files + _record(2, 0, b"", b"A" * 64)
    later = _record(2, 1, b"", b"B" * 64) + _record(2, 0, b"", b"C" * 64)
    hook._region.write_bytes(_region(first + later, state=1, committed=len(first)))
    header, pages = hook.live_pages()
    assert pages == [(0, b"A" * 64)] and header["clock"] == "mono"
    assert header["formats"] == {"sched:sched_switch": "name: sched_switch\n"}
    hook._region.write_bytes(_region(first + later, state=1))
    header, pages = hook.live_pages()
    assert pages == [(1, b"B" * 64), (0, b"C" * 64)]
    assert header["enabled"] == ["sched:sched_switch"]     # the files read before
    assert hook.live_pages()[1] == []
