"""Every sample's IRQ/thread split (irqlab.explain.parts) on traces assembled from this
kernel's formats: the split point is the timer hard IRQ that woke the probe thread, the
parts add up to the latency, and samples the trace cannot split are counted by reason."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.explain.parts import NO_TIMER_IRQ, NO_WAKEUP, OUTSIDE, split_capture, split_samples
from irqlab.stats.parts import part_ticks
from tests.unit.explain.test_native_stages import PROBE, timer, trace_of, waking



def sw(ts, prev, nxt):
    names = {PROBE: "irqlab-native", 0: "swapper/0"}
    return (ts, "sched:sched_switch", {"prev_pid": prev, "prev_state": 1 if prev else 0,
                                       "next_pid": nxt, "prev_comm": names[prev],
                                       "next_comm": names[nxt]}, prev)


def _trace(formats, hdr_page, events, start=0, stop=100_000):
    for key in ("irq_vectors:local_timer_entry", "irq_vectors:local_timer_exit"):
        if key not in formats:
            pytest.skip(f"this kernel has no {key}")
    return trace_of(formats, hdr_page, events, mono_start=start, mono_stop=stop)


def _samples(windows):
    """(deadline, entry) pairs on CPU 0 as the store's columns."""
    a = np.array(windows, np.uint64)
    return {"seq": np.arange(len(a), dtype=np.uint64), "deadline_tick": a[:, 0],
            "entry_tick": a[:, 1], "cpu": np.zeros(len(a), np.uint32)}


def test_the_split_point_is_the_timer_irq_that_woke_the_thread(kernel_formats,
                                                                 page_header):
    trace = _trace(kernel_formats, page_header, [
        sw(100, PROBE, 0),
        # Sample 0: deadline 1000, timer IRQ at 1100 wakes the thread at 1300; a tick
        # entered at 1450, after the wake-up, is not its IRQ.
        *timer(1100, 1400), waking(1300), *timer(1450, 1480), sw(1500, 0, PROBE),
        sw(1700, PROBE, 0),
        # Sample 1: the deadline (5000) passed inside a timer IRQ entered at 4900 that ran
        # the expiry: the IRQ part is 0.
        *timer(4900, 5300), waking(5200), sw(5400, 0, PROBE), sw(5600, PROBE, 0),
        # Sample 2: the only timer IRQ exited before the deadline: not split.
        *timer(8700, 8800), waking(9300), sw(9500, 0, PROBE), sw(9700, PROBE, 0)])
    got = split_samples(trace, _samples([(1000, 1600), (5000, 5500), (9000, 9600)]))
    assert got.seq.tolist() == [0, 1]
    assert got.irq_tick.tolist() == [1100, 5000]
    assert dict(got.unsplit) == {NO_TIMER_IRQ: 1}
    irq = part_ticks(got.deadline_tick, got.entry_tick, got.irq_tick, "irq")
    thread = part_ticks(got.deadline_tick, got.entry_tick, got.irq_tick, "thread")
    total = part_ticks(got.deadline_tick, got.entry_tick, got.irq_tick, "total")
    assert irq.tolist() == [100, 0] and thread.tolist() == [500, 500]
    assert (irq + thread == total).all()


def test_samples_the_trace_cannot_split_are_counted_by_reason(kernel_formats,
                                                               page_header):
    trace = _trace(kernel_formats, page_header, [
        sw(2100, PROBE, 0), *timer(3100, 3200), waking(3150), sw(3300, 0, PROBE),
        sw(3500, PROBE, 0)], start=2000, stop=20_000)
    got = split_samples(trace, _samples([
        (1000, 1500),         # before the capture began
        (3000, 3400),         # split
        (6000, 6300),         # no wake-up in its window: the thread was awake
        (19_900, 20_100)]))   # ends after the capture
    assert got.seq.tolist() == [1] and got.irq_tick.tolist() == [3100]
    assert dict(got.unsplit) == {OUTSIDE: 2, NO_WAKEUP: 1}


def test_a_guest_capture_lists_no_threads_and_splits_by_the_probes_name(kernel_formats,
                                                                        page_header):
    # A Linux guest's capture (irqlab.trace.guest) has no VMM pid: its header lists no
    # threads; the probe's are the tasks switched in under its name.
    events = [sw(100, PROBE, 0), *timer(1100, 1400), waking(1300), sw(1500, 0, PROBE),
              sw(1700, PROBE, 0)]
    guest = _trace(kernel_formats, page_header, events, start=None, stop=None)
    guest.header["vmm_threads"] = {}
    got = split_samples(guest, _samples([(1000, 1600)]))
    assert got.seq.tolist() == [0] and got.irq_tick.tolist() == [1100]
    # Named otherwise, no thread of the trace is the probe's: nothing splits.
    other = _trace(kernel_formats, page_header, [
        (ts, key, {k: ("cat" if v == "irqlab-native" else v) for k, v in vals.items()}, pid)
        for ts, key, vals, pid in events], start=None, stop=None)
    other.header["vmm_threads"] = {}
    got = split_samples(other, _samples([(1000, 1600)]))
    assert len(got) == 0 and dict(got.unsplit) == {NO_WAKEUP: 1}


@pytest.mark.parametrize("meta, want", [
    ({"kind": "native", "file": "/r/run-1.irqtrace.gz", "clock": "mono"},
     "/r/run-1.irqtrace.gz"),
    # A Linux guest's host capture is on the host's clock; its guest capture splits.
    ({"kind": "linux-guest", "file": "/r/run-2.irqtrace.gz", "clock": "x86-tsc",
      "guest": {"file": "/r/run-2.guest.irqtrace.gz", "clock": "mono"}},
     "/r/run-2.guest.irqtrace.gz"),
    # arm64: the host capture is on the host's CLOCK_MONOTONIC, still not the samples'.
    ({"kind": "linux-guest", "file": "/r/run-3.irqtrace.gz", "clock": "mono",
      "guest": {"status": "none", "why": "the guest wrote no trace"}}, None),
    ({"kind": "host-vcpu", "file": "/r/run-4.irqtrace.gz", "clock": "mono"}, None),
    ({"kind": "native", "file": "/r/run-5.irqtrace.gz", "clock": "x86-tsc"}, None),
    ({}, None)])
def test_the_capture_on_the_samples_clock(meta, want):
    got = split_capture(meta)
    assert (str(got) if got is not None else None) == want
