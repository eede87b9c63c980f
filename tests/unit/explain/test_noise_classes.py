"""A noise run's gaps classified from the kernel trace (irqlab.explain.noise): the rule
on traces assembled from this kernel's formats (the innermost interference holds the
CPU; the one with the most own time inside a gap is its class; no event: outside the
kernel), and the classifier on a real capture of this VM under a netns-flood, each class
checked against the raw events it names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from irqlab.explain.load import load_capture
from irqlab.explain.noise import classify
from irqlab.runner.noise import NOISE_COMM
from irqlab.stats.osnoise import OUTSIDE_TEXT
from tests.unit.explain.test_native_stages import trace_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "noise"
LOOP, FLOOD = 100, 700
NET_RX = 3                          # include/linux/interrupt.h, NET_RX_SOFTIRQ


def sw(ts, prev, nxt):
    names = {LOOP: NOISE_COMM, FLOOD: "ping", 0: "swapper/0"}
    return (ts, "sched:sched_switch", {"prev_pid": prev, "prev_state": 0, "next_pid": nxt,
                                       "prev_comm": names[prev], "next_comm": names[nxt]},
            prev)


def softirq(ts, exit_ts, vec=NET_RX):
    return [(ts, "irq:softirq_entry", {"vec": vec}, 0),
            (exit_ts, "irq:softirq_exit", {"vec": vec}, 0)]


def irq(ts, exit_ts):
    return [(ts, "irq:irq_handler_entry", {"irq": 11, "name": "virtio0"}, 0),
            (exit_ts, "irq:irq_handler_exit", {"irq": 11, "ret": 1}, 0)]


def classes(formats, hdr_page, events, gaps):
    trace = trace_of(formats, hdr_page, [sw(10, 0, LOOP)] + events)
    g = np.array(gaps, np.int64)
    found = classify(trace, np.zeros(len(g), np.int64), g[:, 0], g[:, 1])
    kinds, names = found.kinds_names()
    return list(zip(kinds.tolist(), names.tolist())), found.own_ns.tolist()


def test_a_gap_no_event_overlaps_is_outside_the_kernel(kernel_formats, page_header):
    got, own = classes(kernel_formats, page_header, irq(5000, 5400), [(1000, 3000)])
    assert got == [("outside", OUTSIDE_TEXT)] and own == [0]


def test_a_softirq_inside_a_thread_takes_its_own_time_from_it(kernel_formats, page_header):
    # ping held the CPU 1000-2000, 600 of it in NET_RX: the softirq's own 600 beat the
    # thread's own 400.
    events = [sw(1000, LOOP, FLOOD), sw(2000, FLOOD, LOOP)] + softirq(1200, 1800)
    got, own = classes(kernel_formats, page_header, events, [(990, 2010)])
    assert got == [("softirq", "NET_RX")] and own == [600]


def test_an_irq_inside_the_softirq_is_taken_out_of_it(kernel_formats, page_header):
    # NET_RX 1200-1650 (450) with an IRQ 1300-1500 inside: the softirq's own time is
    # 250, the thread's 550: the thread wins; the IRQ alone has 200.
    events = ([sw(1000, LOOP, FLOOD), sw(2000, FLOOD, LOOP)] + softirq(1200, 1650)
              + irq(1300, 1500))
    got, own = classes(kernel_formats, page_header, events, [(990, 2010)])
    assert got == [("thread", f"ping:{FLOOD}")] and own == [550]


def test_each_gap_gets_only_what_lies_inside_it(kernel_formats, page_header):
    # One IRQ straddling two gaps' edges, a softirq in the second only.
    events = irq(1900, 2100) + softirq(3000, 3500)
    got, own = classes(kernel_formats, page_header, events, [(1000, 2000), (2050, 4000)])
    assert got == [("irq", "virtio0 (11)"), ("softirq", "NET_RX")] and own == [100, 500]


def test_an_nmi_is_its_handlers_time_back_from_its_stamp(kernel_formats, page_header):
    if "nmi:nmi_handler" not in kernel_formats:
        pytest.skip("this kernel has no nmi:nmi_handler")
    events = [(1800, "nmi:nmi_handler", {"handler": 0, "delta_ns": 700, "handled": 1}, 0)]
    got, own = classes(kernel_formats, page_header, events + irq(1000, 1050),
                       [(990, 2000)])
    assert got == [("nmi", "NMI")] and own == [700]


def _recorded():
    gaps = json.loads((FIXTURES / "netns-flood-cpu0.gaps.json").read_text())
    trace = load_capture(FIXTURES / "netns-flood-cpu0.irqtrace.gz")
    cpu = np.array(gaps["cpu"], np.int64)
    start, end = np.array(gaps["start_ns"], np.int64), np.array(gaps["end_ns"], np.int64)
    return trace, cpu, start, end


def _overlapping(table, cpu, a, b, exit_table=None, **match):
    """Whether an entry of ``table`` on ``cpu`` (matching ``match``) runs into [a, b):
    entered before b and its next exit after a."""
    if not len(table):
        return False
    ts, c = table["ts"].astype(np.int64), table["cpu"]
    sel = (c == cpu) & (ts < b)
    for key, val in match.items():
        sel &= table[key] == val
    if exit_table is None:
        return bool(np.any(sel & (ts >= a)))
    xts = np.sort(exit_table["ts"][exit_table["cpu"] == cpu].astype(np.int64))
    for t in ts[sel]:
        i = np.searchsorted(xts, t, "left")
        if i < len(xts) and xts[i] > a:
            return True
    return False


def test_recorded_gaps_are_each_classed_by_an_event_that_is_there():
    """irqlab-noise's gaps on CPU 0 with a netns-flood pinned there (2 s, --trace,
    2026-11-28, cut to 40 trace pages): every class names an interference the raw
    events show inside that gap, and "outside" gaps have none."""
    trace, cpu, start, end = _recorded()
    kinds, names = classify(trace, cpu, start, end).kinds_names()
    assert {"outside", "irq", "softirq", "thread"} <= set(kinds.tolist())
    sw = trace.t("sched_switch")
    for c, a, b, kind, name in zip(cpu.tolist(), start.tolist(), end.tolist(),
                                   kinds.tolist(), names.tolist()):
        if kind == "softirq":
            assert name == "NET_RX" or name in ("TIMER", "RCU", "SCHED", "HRTIMER")
            vec = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET",
                   "SCHED", "HRTIMER", "RCU").index(name)
            assert _overlapping(trace.t("softirq_entry"), c, a, b,
                                trace.t("softirq_exit"), vec=vec)
        elif kind == "irq" and name == "local_timer":
            assert _overlapping(trace.t("local_timer_entry"), c, a, b,
                                trace.t("local_timer_exit"))
        elif kind == "thread":
            comm, pid = name.rsplit(":", 1)
            # the task was switched in before the gap ended and out after it began
            ins = sw["ts"][(sw["cpu"] == c) & (sw["next_pid"] == int(pid))].astype(np.int64)
            outs = sw["ts"][(sw["cpu"] == c) & (sw["prev_pid"] == int(pid))].astype(np.int64)
            assert np.any(ins < b) and (np.any(outs > a) or not len(outs))
            assert comm != NOISE_COMM
        elif kind == "outside":
            for entry in ("softirq_entry", "irq_handler_entry", "local_timer_entry"):
                assert not _overlapping(trace.t(entry), c, a, b)
            assert not np.any((sw["cpu"] == c) & (sw["ts"] > a) & (sw["ts"] < b))


def test_recorded_flood_gaps_are_mostly_net_rx():
    """Of the recorded window's softirq gaps, the flood's NET_RX has the most time: the
    load pinned to the CPU is what the classes name."""
    trace, cpu, start, end = _recorded()
    kinds, names = classify(trace, cpu, start, end).kinds_names()
    soft = kinds == "softirq"
    net_rx = soft & (names == "NET_RX")
    assert (end - start)[net_rx].sum() > (end - start)[soft & ~net_rx].sum()
