"""xentrace records built per xen/include/public/trace.h, decoded back, and folded into
per-vCPU scheduler timelines."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, strategies as st

from irqlab.xen.records import (DOMID_IDLE, TRC_LOST_RECORDS, TRC_SCHED_RUNSTATE_CHANGE,
                                TRC_SCHED_SWITCH, TRC_SCHED_WAKE, TRC_TRACE_CPU_CHANGE,
                                TraceFormatError, encode_record, encode_window,
                                is_runstate_change, iter_records, runstate_transition)
from irqlab.xen.timeline import build_timeline, vcpu_name

RUNNING, RUNNABLE, BLOCKED = 0, 1, 2


def runstate(dom: int, vcpu: int, old: int, new: int, tsc: int) -> bytes:
    # trace_runstate_change(): old state << 8, new state << 4 in the event id,
    # one extra word vcpu:16 (low) | domain:16 (high).
    event = TRC_SCHED_RUNSTATE_CHANGE | (old & 3) << 8 | (new & 3) << 4
    return encode_record(event, (dom << 16 | vcpu,), tsc)


def switch(prev: tuple[int, int], nxt: tuple[int, int], tsc: int) -> bytes:
    return encode_record(TRC_SCHED_SWITCH, (*prev, *nxt), tsc)


def test_header_bits_per_trace_h():
    rec = encode_record(0x0002800A, (1, 2, 3), tsc=0x1_0000_0002)
    (header,) = struct.unpack_from("<I", rec)
    assert header & 0x0FFFFFFF == 0x0002800A          # TRC_HD_TO_EVENT
    assert (header >> 28) & 7 == 3                     # TRC_HD_EXTRA
    assert header >> 31 == 1                           # TRC_HD_CYCLE_FLAG
    assert struct.unpack_from("<II", rec, 4) == (2, 1)  # cycles_lo, cycles_hi
    assert len(rec) == 4 + 8 + 12
    assert len(encode_record(0x0002800A, (1,))) == 8   # no cycles: header + 1 word


@given(st.lists(st.tuples(st.integers(0, 0x0FFFFFFF),
                          st.lists(st.integers(0, 2**32 - 1), max_size=7),
                          st.one_of(st.none(), st.integers(0, 2**64 - 1))), max_size=40))
def test_roundtrip_any_records(recs):
    data = b"".join(encode_record(e, tuple(x), t) for e, x, t in recs)
    out = [r for r in iter_records(encode_window(3, data), strict=True)
           if r.event != TRC_TRACE_CPU_CHANGE or r.offset != 0]
    assert [(r.event, r.extra) for r in out] == [(e, tuple(x)) for e, x, _ in recs]
    assert all(r.cpu == 3 for r in out)
    for r, (_e, _x, t) in zip(out, recs):
        if t is not None:
            assert r.tsc == t and not r.tsc_inherited


def test_windows_assign_cpus_and_tsc_is_inherited():
    w0 = encode_record(TRC_SCHED_WAKE, (1, 0), tsc=100) + encode_record(TRC_SCHED_WAKE,
                                                                        (1, 0))
    w1 = encode_record(TRC_SCHED_WAKE, (2, 0), tsc=50)
    recs = list(iter_records(encode_window(0, w0) + encode_window(1, w1) +
                             encode_window(0, encode_record(TRC_SCHED_WAKE, (3, 0)))))
    body = [r for r in recs if r.event == TRC_SCHED_WAKE]
    assert [(r.cpu, r.tsc, r.tsc_inherited) for r in body] == [
        (0, 100, False), (0, 100, True), (1, 50, False), (0, 100, True)]


def test_cpu_change_inside_a_window_is_data():
    # A record that happens to look like CPU_CHANGE inside a window's byte range is a
    # record of that CPU, not a new window.
    inner = encode_record(TRC_TRACE_CPU_CHANGE, (9, 0)) + encode_record(TRC_SCHED_WAKE,
                                                                        (1, 0), 5)
    recs = list(iter_records(encode_window(2, inner)))
    assert [r.cpu for r in recs] == [2, 2, 2]


def test_truncated_and_strict():
    data = encode_window(0, encode_record(TRC_SCHED_WAKE, (1, 0), 7))
    assert len(list(iter_records(data[:-2]))) == 1       # window header only
    with pytest.raises(TraceFormatError):
        list(iter_records(data[:-2], strict=True))


def test_runstate_event_ids():
    ev = TRC_SCHED_RUNSTATE_CHANGE | RUNNABLE << 8 | RUNNING << 4
    assert is_runstate_change(ev) and not is_runstate_change(TRC_SCHED_SWITCH)
    assert runstate_transition(ev) == ("runnable", "running")


def _two_domains_on_one_pcpu() -> bytes:
    """d1v0 (the probe) wakes at 1000 but d2v0 (a CPU burner) keeps pCPU 0 until 1600;
    dom0 is on pCPU 1 and blocks; 5 records lost on pCPU 1."""
    cpu0 = b"".join([
        runstate(2, 0, RUNNABLE, RUNNING, 0),
        runstate(1, 0, RUNNING, BLOCKED, 0),
        runstate(1, 0, BLOCKED, RUNNABLE, 1000),
        encode_record(TRC_SCHED_WAKE, (1, 0), 1000),
        runstate(2, 0, RUNNING, RUNNABLE, 1600),
        runstate(1, 0, RUNNABLE, RUNNING, 1600),
        switch((2, 0), (1, 0), 1600),
        runstate(1, 0, RUNNING, BLOCKED, 1700),
        runstate(2, 0, RUNNABLE, RUNNING, 1700),
        switch((1, 0), (2, 0), 1700),
    ])
    cpu1 = b"".join([
        runstate(0, 0, RUNNING, BLOCKED, 10),
        runstate(DOMID_IDLE, 1, RUNNABLE, RUNNING, 10),
        encode_record(TRC_LOST_RECORDS, (5, 0, 0, 0), 20),
        runstate(0, 0, BLOCKED, RUNNABLE, 2000),
    ])
    return encode_window(0, cpu0) + encode_window(1, cpu1)


def test_timeline_attributes_the_wait_to_the_neighbour():
    tl = build_timeline(iter_records(_two_domains_on_one_pcpu()))
    assert tl.cpus == {0, 1} and tl.lost_records == 5 and len(tl.switches) == 2
    probe = (1, 0)
    assert tl.time_in_state(probe) == {"blocked": 1000 + 300, "runnable": 600,
                                       "running": 100}
    (wait,) = tl.waits(probe)
    assert wait["cycles"] == 600 and wait["cpu"] == 0
    assert wait["ran_instead"] == {"d2v0": 600}
    assert tl.switches[0].prev == (2, 0) and tl.switches[0].next == probe
    assert vcpu_name((DOMID_IDLE, 1)) == "idlev1"


def test_summary_in_ns():
    tl = build_timeline(iter_records(_two_domains_on_one_pcpu()))
    s = tl.summary(hz=1_000_000_000)       # 1 cycle = 1 ns
    d1 = s["vcpus"]["d1v0"]
    assert s["unit"] == "ns" and s["lost_records"] == 5
    assert d1["worst_wait"]["length"] == 600 and d1["switched_in"] == 1
    assert d1["worst_wait"]["ran_instead"] == {"d2v0": 600}
    assert s["vcpus"]["d0v0"]["time"]["blocked"] == 1990
