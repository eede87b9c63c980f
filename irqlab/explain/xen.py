"""``irqlab explain RUN`` for a Xen run recorded with xentrace (issue 15): each sample's
window [deadline, handler entry] mapped onto xentrace's clock and attributed to what Xen
and the other domains did, in the shape of the host explain (irqlab.explain); its explainer is
XentraceExplainer (kind ``xentrace``, irqlab.explain.registry).

**Clock** (guest TSC of the probe domU -> Xen's cycle counter). Xen emulates RDTSC for
the PVH domU here (no invariant TSC under QEMU TCG: tsc_mode default), and traces every
emulated read with the value it returns (``hvm_rdtsc_intercept()`` ->
``TRC_HVM_RDTSC``, two extra words = the guest TSC), at the Xen time of the exit. The
probe's ISR reads the TSC first (probes/guest/x86_64: entry_tick), so a sample's entry
tick equals one such record's value exactly. The value was computed while Xen handled
that exit, i.e. between the exit's VMEXIT record and the RDTSC record, so each anchor
bounds the offset (guest - Xen) on both sides: [value - t_rdtsc, value - t_vmexit]
(under TCG that handling takes microseconds to tens of them). The handler entry is the
middle of its anchor's range (error: half its width). The deadline (guest TSC) is placed
between the two anchors whose values bracket it, interpolating the middles of their
ranges: the emulated TSC follows Xen's system time, linear in its cycle counter between
calibrations, but it drifts (tens of microseconds over seconds here), so the deadline's
error is its distance to the ends of the two ranges' hull. The offset's move from the
deadline to the entry (the guest's latency and the Xen window differ by it) is added: a
sample's bound is the sum; the run's ``error_bound_ns`` is the largest over the explained
samples, ``error_p50_ns`` their median. Anchors are only records made
while the probe's vCPU ran (a created domain runs the probe too, with another offset).
When Xen does not trap RDTSC (native TSC with an offset) there are no such records: the
clock is then ``unmapped`` and every sample ``not traced`` (said, not guessed).

**Attribution** over [deadline, entry] (Xen cycles), every cycle in exactly one cause:
the probe vCPU's runstate intervals (irqlab.xen.summary's replay rules are not needed:
the probe is known from its first runstate change), split where it was *runnable* or
*blocked* by what ran on its pCPU meanwhile (another vCPU, idle), and inside another
vCPU's run by a PV hypercall in flight: from its record to the vCPU's next PV record (the
hypercall's return path, e.g. the iret to user space), the next scheduler record on that
pCPU (the scheduler runs only at preemption points, so a vCPU it ran for is not inside a
non-preemptible hypercall any more) or the end of its run. Only hypercalls that can hold a pCPU
(LONG_HYPERCALLS) for at least HELD_MIN_NS make a cause of their own; the others are
named in the sample's notes. Xen's V2
hypercall records carry a sub-op only for grant_table_op, vcpu_op and sched_op
(``__trace_hypercall``); memory_op's (populate_physmap ...) is not traced, which the name
says. Running in the window is the guest's own time (interrupts off, the path to the
handler) plus its exits: not blamed on Xen's scheduling. Time the probe was runnable
without RTDS budget (a budget_burn record leaving none, until its budget_replenish) is
the budget's; device IRQs Xen handled (TRC_HW_IRQ_HANDLED) are carved out of whatever
their time was otherwise attributed to; the scheduler's own records in the window
(credit2 decisions, RTDS burns) are counted in the notes. Uncovered time is
"unexplained", always shown.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.explain.attribute import UNEXPLAINED, Attribution, aggregate
from irqlab.explain.perfetto import (ROOT, PerfettoRun, _track, _track_event,
                                     write_perfetto)
from irqlab.explain.seam import Explanation, Progress, Request, hook_meta, stored_samples
from irqlab.explain.shape import attributed_json, select_samples
from irqlab.store import Store, StoreError
from irqlab.xen.capture import XentraceHook, read_xentrace
from irqlab.xen.index import HAS_TSC, INHERITED, RecordIndex, index_records
from irqlab.xen.records import DOMID_IDLE, TRC_LOST_RECORDS
from irqlab.xen.summary import CONTINUE_RUNNING, hypercall_name
from irqlab.xen.timeline import vcpu_name

TRC_RUNSTATE_MASK, TRC_RUNSTATE = 0x0FFFF00F, 0x00021001
XENTRACE_HOOK = XentraceHook.name     # its facts: hooks.xentrace in the run's metadata
PCPU_TRACKS = 1000                     # Perfetto track uuids of the pCPUs (+ 10 x pCPU)
TRC_CONTINUE = 0x00021002
TRC_HVM_RDTSC = 0x0008201A
TRC_HVM_INJ_VIRQ = 0x00082004
TRC_HVM_VMENTRY = 0x00081001
TRC_HVM_VMEXIT, TRC_HVM_VMEXIT64 = 0x00081002, 0x00081102
TRC_HVM_LAPIC_START_TIMER = 0x00084004
TRC_DOM0_DOM_ADD, TRC_DOM0_DOM_REM = 0x00041001, 0x00041002
PV_MAIN = 0x00200000
PV_HYPERCALL_V2, PV_HYPERCALL_SUBCALL = 13, 14
HYPERCALL_IRET = 23
# __trace_hypercall(): ops whose first argument (the sub-op) Xen records, and its names
# for the ones a latency spike is likely to show (xen/include/public/*.h).
SUBOP_NAMES = {
    20: {0: "map_grant_ref", 1: "unmap_grant_ref", 2: "setup_table", 3: "dump_table",
         4: "transfer", 5: "copy"},
    24: {0: "initialise", 1: "up", 2: "down", 3: "is_up", 4: "get_runstate_info",
         6: "set_periodic_timer", 7: "stop_periodic_timer", 10: "set_singleshot_timer",
         11: "stop_singleshot_timer"},
    29: {0: "yield", 1: "block", 2: "shutdown", 3: "poll", 4: "remote_shutdown",
         5: "shutdown_code", 6: "watchdog"},
}
NO_SUBOP = {12: "memory_op", 35: "sysctl", 36: "domctl"}
# Hypercalls that can hold a pCPU for long (memory and domain management, batches; Xen
# makes most of them preemptible through continuations, not all: seed 000's
# populate_physmap). The others (stack_switch, set_segment_base, iret, vcpu_op timers,
# xen_version ...) return within microseconds: a gap after one of them is the vCPU's own
# code, which has no record of its own, so it is never taken as a hypercall in flight.
LONG_HYPERCALLS = frozenset({1, 7, 12, 13, 20, 26, 33, 34, 35, 36, 37})

# A hypercall in flight this long is a cause of its own (seed 000: populate_physmap held
# a pCPU for up to a second); shorter ones are listed in the sample's notes, inside
# "runnable while dNvM ran": between two of them the vCPU may be in its own code, which
# the trace cannot tell apart from the hypercall's tail.
HELD_MIN_NS = 500_000
PROBE_RUNNING = "probe vCPU running (guest: its own code, interrupts off, exits)"
PROBE_OFFLINE = "probe vCPU offline"
PROBE_BLOCKED_IDLE = "probe vCPU blocked: Xen's timer not yet fired (pCPU idle)"
PROBE_DEPLETED = "probe vCPU out of RTDS budget (runnable, waiting for its replenishment)"
TRC_HW_IRQ_HANDLED = 0x00802008        # irq, low 32 bits of the cycles at entry, at exit
TRC_SCHED_CLASS = 0x00022000
# TRC_SCHED_CLASS_EVT(scheduler, event): the scheduler's id at bit 9 (public/trace.h);
# event names from xen/common/sched/credit2.c and rt.c (Xen 4.17)
SCHED_CLASS_NAMES = {0: "credit", 1: "credit2", 3: "arinc653", 4: "rtds", 5: "null"}
SCHED_EVENT_NAMES = {
    1: {1: "tick", 2: "runq_pos", 3: "credit_burn", 4: "credit_add", 5: "tickle_check",
        6: "tickle", 7: "credit_reset", 8: "sched_tasklet", 9: "update_load",
        10: "runq_assign", 11: "update_vcpu_load", 12: "update_runq_load", 13: "tickle_new",
        14: "runq_max_weight", 15: "migrate", 16: "load_check", 17: "load_balance",
        19: "picked_cpu", 20: "runq_candidate", 21: "schedule", 22: "ratelimit",
        23: "runq_cand_check"},
    4: {1: "tickle", 2: "runq_pick", 3: "budget_burn", 4: "budget_replenish",
        5: "sched_tasklet", 6: "schedule"},
}
TRC_RTDS_BUDGET_BURN, TRC_RTDS_BUDGET_REPLENISH = 0x00022803, 0x00022804


def runnable_while(v: str) -> str:
    return f"runnable while {v} ran"


def blocked_while(v: str) -> str:
    return f"blocked while {v} ran (timer not delivered)"


def in_hypercall(v: str, call: str) -> str:
    return f"{v} in hypercall {call} (probe waiting)"


def physical_irq(irq: int) -> str:
    return f"Xen handling physical IRQ {irq}"


def sched_event_name(ev: int) -> str:
    """``credit2 tickle``, ``rtds budget_burn``, ... of a TRC_SCHED_CLASS event id."""
    cls, n = (ev >> 9) & 7, ev & 0x1FF
    return (f"{SCHED_CLASS_NAMES.get(cls, f'scheduler {cls}')} "
            f"{SCHED_EVENT_NAMES.get(cls, {}).get(n, f'event {n}')}")


@dataclass
class Interval:
    state: str
    start: int
    end: int
    cpu: int


@dataclass
class XenCapture:
    """The parts of a capture explain needs, as arrays (Xen cycles)."""

    header: dict[str, Any]
    idx: RecordIndex
    intervals: dict[tuple[int, int], list[Interval]]
    runs: dict[int, tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]]   # per pCPU
    pv: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    first_tsc: int
    last_tsc: int
    lost: list[tuple[int, int, int]] = field(default_factory=list)   # (cpu, tsc, count)
    events: int = 0
    # every timed record in cycle order: its row in idx, event id, pCPU, cycles
    order: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    ev: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint32))
    cpu: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    t: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def owner_at(self, cpu: int, t: np.ndarray) -> list[tuple[int, int] | None]:
        starts, ends, who = self.runs.get(cpu, (np.empty(0, np.int64),) * 2 + ([],))
        i = np.searchsorted(starts, t, side="right") - 1
        return [who[k] if k >= 0 and t_ < ends[k] else None for k, t_ in zip(i.tolist(),
                                                                                 t.tolist())]


def load_capture(path: Path) -> XenCapture:
    header, data = read_xentrace(path, mapped=True)
    idx = index_records(data)
    timed = np.flatnonzero((idx.flags & (HAS_TSC | INHERITED)) != 0)
    tsc = idx.tsc[timed].view(np.int64)        # cycle counts stay below 2^63
    order = timed if (len(tsc) < 2 or (tsc[1:] >= tsc[:-1]).all()) else \
        timed[np.lexsort((idx.off[timed], tsc))]
    ev, cpu = idx.event[order], idx.cpu[order]
    t = tsc if order is timed else idx.tsc[order].view(np.int64)
    first, last = (int(t.min()), int(t.max())) if len(t) else (0, 0)
    # runstate intervals per vCPU, from each change to the next
    rs = np.flatnonzero(((ev & TRC_RUNSTATE_MASK) == TRC_RUNSTATE) | (ev == TRC_CONTINUE))
    words = idx.extra(order[rs], 0) if len(rs) else np.empty(0, np.uint32)
    names = ("running", "runnable", "blocked", "offline")
    open_: dict[tuple[int, int], tuple[str, int, int]] = {}
    intervals: dict[tuple[int, int], list[Interval]] = {}
    for w, e, c, tt in zip(words.tolist(), ev[rs].tolist(), cpu[rs].tolist(),
                           t[rs].tolist()):
        key = (w >> 16, w & 0xFFFF)
        if e == TRC_CONTINUE:
            new = "running"
        else:
            new = names[(e >> 4) & 3]
            if key not in open_:
                old = names[(e >> 8) & 3]
                open_[key] = (old, first, c)
        prev = open_.get(key)
        if prev is not None and tt > prev[1]:
            intervals.setdefault(key, []).append(Interval(prev[0], prev[1], tt, prev[2]))
        open_[key] = (new, tt, c)
    for key, (state, since, c) in open_.items():
        if last > since:
            intervals.setdefault(key, []).append(Interval(state, since, last, c))
    runs: dict[int, tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]] = {}
    per_cpu: dict[int, list[tuple[int, int, tuple[int, int]]]] = {}
    for key, ivs in intervals.items():
        for iv in ivs:
            if iv.state == "running":
                per_cpu.setdefault(iv.cpu, []).append((iv.start, iv.end, key))
    for c, lst in per_cpu.items():
        lst.sort()
        runs[c] = (np.array([x[0] for x in lst], np.int64),
                   np.array([x[1] for x in lst], np.int64), [x[2] for x in lst])
    # PV records per pCPU: time, minor, op, first argument (when recorded)
    pvrows = np.flatnonzero((ev & 0x0FFF0000) == PV_MAIN)
    pv: dict[int, tuple[np.ndarray, ...]] = {}
    if len(pvrows):
        minor = (ev[pvrows] & 0xFF).astype(np.int64)
        has = idx.nextra[order[pvrows]] >= 1
        op = np.full(len(pvrows), -1, np.int64)
        arg = np.full(len(pvrows), -1, np.int64)
        call = ((minor == PV_HYPERCALL_V2) | (minor == PV_HYPERCALL_SUBCALL)) & has
        if call.any():
            w0 = idx.extra(order[pvrows[call]], 0).astype(np.int64)
            op[call] = w0 & 0xFFFFF
            two = call.copy()
            two[call] = (idx.nextra[order[pvrows[call]]] >= 2) & ((w0 >> 20) & 3 > 0)
            if two.any():
                arg[two] = idx.extra(order[pvrows[two]], 1).astype(np.int64)
        for c in np.unique(cpu[pvrows]).tolist():
            m = cpu[pvrows] == c
            pv[c] = (t[pvrows][m], minor[m], op[m], arg[m])
    lost = [(int(cpu[p]), int(t[p]), int(idx.extra(order[[p]], 0)[0]))
            for p in np.flatnonzero(ev == TRC_LOST_RECORDS).tolist()
            if idx.nextra[order[p]] >= 1]
    return XenCapture(header or {}, idx, intervals, runs, pv, first, last, lost, len(idx),
                      order, ev, cpu, t)


def _records(cap: XenCapture, event: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(merged positions, cpu, tsc) of one event id."""
    pos = np.flatnonzero(cap.ev == event)
    return pos, cap.cpu[pos], cap.t[pos]


@dataclass
class XenClock:
    method: str
    anchors: int
    entry_x: np.ndarray          # per sample, Xen cycles (-1: not found)
    deadline_x: np.ndarray
    error_x: np.ndarray          # per sample, cycles
    offset_median: int
    matched: int
    causality: dict[str, Any] = field(
        default_factory=lambda: {"checked": 0, "violations": 0, "samples": []})

    def as_dict(self, hz: int, used: np.ndarray) -> dict[str, Any]:
        err = self.error_x[used] if used.any() else np.zeros(1, np.int64)
        return {"method": self.method, "offset_tick": self.offset_median,
                "error_bound_ns": round(float(err.max()) * 1e9 / hz),
                "error_p50_ns": round(float(np.median(err)) * 1e9 / hz),
                "lower_tick": None, "upper_tick": None, "anchors": self.anchors,
                "entries_matched": self.matched,
                "consistent": not self.causality["violations"],
                "msr_anchors": 0, "eoi_anchors": 0, "bounds_by_source": {},
                "uppers_dropped": 0, "candidates": [], "causality": self.causality}


# Xen on Arm stamps xentrace records with the physical counter (get_cycles() reads
# CNTPCT_EL0, xen/arch/arm/include/asm/time.h) and lets a guest at EL1 read it too
# (CNTHCTL_EL2.EL1PCTEN); the guest's virtual counter is it minus the domain's CNTVOFF,
# set once at domain creation (domain_vtimer_init(): offset = get_cycles()). The arm64
# probe reads both counters back to back and reports the difference in its ring header
# (probes/guest/arm64/main.c, ref_counter_measure()).
REF_COUNTER_CNTPCT = "arm64-cntpct"
CAUSALITY_SAMPLES_SHOWN = 10


def ref_clock(cap: XenCapture, probe: tuple[int, int], seq: np.ndarray,
              deadline: np.ndarray, entry: np.ndarray, ref: dict[str, Any]) -> XenClock:
    """Samples mapped through the probe's measured counter offset (Xen on Arm): exact
    up to the offset's bound. Checked against the trace: the probe's ISR runs on its
    vCPU, so every mapped handler entry must fall inside a running interval of it."""
    off, err = int(ref["offset_tick"]), int(ref["error_tick"])
    entry_x, deadline_x = entry + off, deadline + off
    ivs = [iv for iv in cap.intervals.get(probe, []) if iv.state == "running"]
    starts = np.array([iv.start for iv in ivs], np.int64)
    ends = np.array([iv.end for iv in ivs], np.int64)
    inside = (entry_x >= cap.first_tsc) & (entry_x <= cap.last_tsc)
    k = np.searchsorted(starts, entry_x + err, side="right") - 1
    ok = (k >= 0) & (entry_x - err <= ends[np.maximum(k, 0)] if len(ends) else
                     np.zeros(len(entry_x), bool))
    bad = np.flatnonzero(inside & ~ok)
    causality = {"checked": int(inside.sum()), "violations": int(len(bad)),
                 "samples": [int(x) for x in seq[bad[:CAUSALITY_SAMPLES_SHOWN]]]}
    return XenClock(f"the probe's CNTPCT - CNTVCT offset (±{err} ticks; Xen on Arm stamps "
                    f"xentrace with CNTPCT)", 1, entry_x, deadline_x,
                    np.full(len(entry), err, np.int64), off, int(inside.sum()), causality)


def fit_clock(cap: XenCapture, probe: tuple[int, int], deadline: np.ndarray,
              entry: np.ndarray) -> XenClock:
    """RDTSC anchors of the probe's vCPU (see the module doc)."""
    pos, cpu, t = _records(cap, TRC_HVM_RDTSC)
    n = len(entry)
    none = XenClock("unmapped: no emulated-RDTSC record of the probe's vCPU (Xen did not "
                    "trap its RDTSC)", 0, np.full(n, -1, np.int64),
                    np.full(n, -1, np.int64), np.zeros(n, np.int64), 0, 0)
    if not len(pos):
        return none
    order = cap.order
    val = (cap.idx.extra(order[pos], 0).astype(np.uint64)
           | cap.idx.extra(order[pos], 1).astype(np.uint64) << np.uint64(32)).astype(np.int64)
    # the exit that asked for the value: the last VMEXIT record before it on that pCPU
    exits = np.flatnonzero((cap.ev == TRC_HVM_VMEXIT) | (cap.ev == TRC_HVM_VMEXIT64))
    exit_t = t.copy()
    mine = np.zeros(len(pos), bool)
    for c in np.unique(cpu).tolist():
        m = np.flatnonzero(cpu == c)
        mine[m] = [w == probe for w in cap.owner_at(c, t[m])]
        ex = exits[cap.cpu[exits] == c]
        k = np.searchsorted(ex, pos[m]) - 1
        ok = k >= 0
        exit_t[m[ok]] = cap.t[ex[k[ok]]]
    val, t, exit_t = val[mine], t[mine], exit_t[mine]
    if not len(val):
        return none
    k = np.argsort(val, kind="stable")
    val, t, exit_t = val[k], t[k], exit_t[k]
    # the value was computed between the exit record and the RDTSC record:
    # offset (guest - Xen) in [val - t, val - exit_t]
    lo, hi = val - t, val - exit_t
    # entry: the record whose value is the entry tick; at the middle of its exit
    i = np.searchsorted(val, entry)
    i_ok = np.clip(i, 0, len(val) - 1)
    hit = (i < len(val)) & (val[i_ok] == entry)
    entry_x = np.where(hit, (t[i_ok] + exit_t[i_ok]) // 2, -1)
    entry_err = np.where(hit, (t[i_ok] - exit_t[i_ok] + 1) // 2, 0)
    # deadline: between the anchors whose values bracket it; the offset moves between
    # them, so it lies in the hull of their two ranges (interpolated, the hull's extent
    # from that is the bound)
    j = np.searchsorted(val, deadline, side="right")
    a = np.clip(j - 1, 0, len(val) - 1)
    b = np.clip(j, 0, len(val) - 1)
    span = np.maximum(val[b] - val[a], 1)
    frac = np.clip((deadline - val[a]) / span, 0.0, 1.0)
    mid_a, mid_b = (lo[a] + hi[a]) / 2, (lo[b] + hi[b]) / 2
    off_d = np.round(mid_a + (mid_b - mid_a) * frac).astype(np.int64)
    hull_lo, hull_hi = np.minimum(lo[a], lo[b]), np.maximum(hi[a], hi[b])
    dl_err = np.maximum(off_d - hull_lo, hull_hi - off_d)
    inside = (j > 0) & (j < len(val))
    deadline_x = np.where(inside, deadline - off_d, -1)
    # The window in Xen cycles differs from the latency in guest ticks by how far the
    # offset moved from the deadline to the entry (Xen steps its system time at
    # calibrations, and the emulated TSC follows): part of the sample's bound.
    moved = np.abs((lo[i_ok] + hi[i_ok]) // 2 - off_d)
    error_x = np.where(inside, dl_err + entry_err + np.where(hit, moved, 0), 0)
    return XenClock("xentrace TRC_HVM_RDTSC anchors (the emulated RDTSC's returned value, "
                    "between its VMEXIT and RDTSC records)",
                    int(len(val)), entry_x, deadline_x, error_x,
                    int(np.median((lo + hi) // 2)), int(hit.sum()))


class XenExplainer:
    """Asked about one window at a time (see the module doc)."""

    def __init__(self, cap: XenCapture, probe: tuple[int, int]) -> None:
        self.cap = cap
        self.probe = probe
        self.span = (cap.first_tsc, cap.last_tsc)
        self.lost = [(c, t, t, f"xentrace: {n} records lost on pCPU {c}")
                     for c, t, n in cap.lost]
        ivs = cap.intervals.get(probe, [])
        self.iv_start = np.array([iv.start for iv in ivs], np.int64)
        self.ivs = ivs
        self.virq = _records(cap, TRC_HVM_INJ_VIRQ)
        self.vmentry = _records(cap, TRC_HVM_VMENTRY)
        # scheduler activity per pCPU: the scheduler runs at preemption points only, so
        # a hypercall is in flight until the vCPU's next PV record or the next of these
        self.held_min = round(HELD_MIN_NS * (cap.header.get("tsc_hz") or 1e9) / 1e9)
        sched = (cap.ev & 0x0FFF0000) == 0x00020000
        self.sched_t = {c: cap.t[sched & (cap.cpu == c)] for c in cap.runs}
        self.runnable_start = np.array([iv.start for iv in ivs if iv.state == "runnable"],
                                       np.int64)
        self.running_at = np.array([k for k, iv in enumerate(ivs) if iv.state == "running"],
                                   np.int64)
        self.running_start = np.array([iv.start for iv in ivs if iv.state == "running"],
                                      np.int64)
        self.calls = {c: self._calls_on(c) for c in cap.pv}
        self.irqs = self._physical_irqs()
        self.depleted = self._depleted_spans()
        cls = np.flatnonzero((cap.ev & 0x0FFFF000) == TRC_SCHED_CLASS)
        self.sched_class = {c: (cap.t[cls[cap.cpu[cls] == c]], cap.ev[cls[cap.cpu[cls] == c]])
                            for c in np.unique(cap.cpu[cls]).tolist()}

    def _physical_irqs(self) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per pCPU, the device IRQs Xen handled: (start, end, irq), by start. The record
        is written at the handler's exit with the low 32 bits of the cycle counter at its
        entry and exit (do_IRQ, xen/arch/x86/irq.c): the length is their difference."""
        pos = np.flatnonzero(self.cap.ev == TRC_HW_IRQ_HANDLED)
        pos = pos[self.cap.idx.nextra[self.cap.order[pos]] >= 3]
        out: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        if not len(pos):
            return out
        rows = self.cap.order[pos]
        irq = self.cap.idx.extra(rows, 0).astype(np.int64)
        length = ((self.cap.idx.extra(rows, 2).astype(np.int64)
                   - self.cap.idx.extra(rows, 1).astype(np.int64)) & 0xFFFFFFFF)
        end = self.cap.t[pos]
        for c in np.unique(self.cap.cpu[pos]).tolist():
            m = self.cap.cpu[pos] == c
            k = np.argsort(end[m] - length[m], kind="stable")
            out[c] = ((end[m] - length[m])[k], end[m][k], irq[m][k])
        return out

    def _depleted_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of the probe's spans without RTDS budget: from a budget_burn
        record that leaves its budget at or below 0 to its next budget_replenish (rt.c's
        burn_budget and rt_update_deadline; word 0 is unit | domain << 16, then the
        budget left as a signed 64-bit ns)."""
        want = self.probe[0] << 16 | self.probe[1]
        ev, order = self.cap.ev, self.cap.order
        pos = np.flatnonzero(((ev == TRC_RTDS_BUDGET_BURN) | (ev == TRC_RTDS_BUDGET_REPLENISH))
                             & (self.cap.idx.nextra[order] >= 3))
        if not len(pos):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        pos = pos[self.cap.idx.extra(order[pos], 0) == want]
        budget = (self.cap.idx.extra(order[pos], 1).astype(np.uint64)
                  | self.cap.idx.extra(order[pos], 2).astype(np.uint64) << np.uint64(32)
                  ).view(np.int64)
        starts, ends, since = [], [], None
        for e, t, b in zip(ev[pos].tolist(), self.cap.t[pos].tolist(), budget.tolist()):
            if e == TRC_RTDS_BUDGET_BURN and b <= 0 and since is None:
                since = t
            elif e == TRC_RTDS_BUDGET_REPLENISH and since is not None:
                starts.append(since)
                ends.append(t)
                since = None
        if since is not None:
            starts.append(since)
            ends.append(self.cap.last_tsc)
        return np.array(starts, np.int64), np.array(ends, np.int64)

    def _irq_overlap(self, cpu: int, s: int, e: int) -> list[tuple[int, int]]:
        """(irq, cycles) of the physical IRQs Xen handled on ``cpu`` within [s, e)."""
        got = self.irqs.get(cpu)
        if got is None:
            return []
        starts, ends, irq = got
        k = int(np.searchsorted(ends, s, side="right"))
        out = []
        while k < len(starts) and starts[k] < e:
            n = min(int(ends[k]), e) - max(int(starts[k]), s)
            if n > 0:
                out.append((int(irq[k]), n))
            k += 1
        return out

    def _take_irqs(self, add, cpu: int, s: int, e: int, budget: int) -> int:
        """Attribute the physical IRQ time within [s, e) (at most ``budget`` cycles) to
        Xen's handling of them; how much was taken."""
        taken = 0
        for irq, n in self._irq_overlap(cpu, s, e):
            n = min(n, budget - taken)
            add(physical_irq(irq), n)
            taken += n
        return taken

    def _sched_notes(self, cpu: int, lo: int, hi: int) -> list[str]:
        """The scheduler's own records on ``cpu`` within the window, counted by name."""
        got = self.sched_class.get(cpu)
        if got is None:
            return []
        t, ev = got
        a, b = int(np.searchsorted(t, lo)), int(np.searchsorted(t, hi))
        if a >= b:
            return []
        names, counts = np.unique(ev[a:b], return_counts=True)
        what = ", ".join(f"{sched_event_name(int(x))} x{int(n)}"
                         for x, n in zip(names, counts))
        return [f"scheduler records on pCPU {cpu} in the window: {what}"]

    def _calls_on(self, cpu: int) -> tuple[np.ndarray, np.ndarray, dict, np.ndarray]:
        """Per PV record of ``cpu``, once for every window: whether it starts a hypercall
        that counts (a V2 record with its op, not iret), where that call ends at the
        latest (the vCPU's next PV record or the pCPU's next scheduler record), and which
        vCPU made it (a code of ``codes``, -1 none)."""
        t, minor, op, _arg = self.cap.pv[cpu]
        big = np.iinfo(np.int64).max
        end = np.append(t[1:], big)
        st = self.sched_t.get(cpu)
        if st is not None and len(st):
            j = np.searchsorted(st, t, side="right")
            end = np.minimum(end, np.where(j < len(st), st[np.minimum(j, len(st) - 1)], big))
        starts, ends, who = self.cap.runs.get(cpu, (np.empty(0, np.int64),) * 2 + ([],))
        codes: dict[tuple[int, int], int] = {}
        who_code = np.array([codes.setdefault(w, len(codes)) for w in who], np.int64)
        i = np.searchsorted(starts, t, side="right") - 1
        ok = i >= 0
        ok[ok] = t[ok] < ends[i[ok]]
        owner = np.where(ok, who_code[np.maximum(i, 0)] if len(who) else -1, -1)
        counts = (minor == PV_HYPERCALL_V2) & (op != -1) & (op != HYPERCALL_IRET)
        return counts, end, codes, owner

    def _who(self, cpu: int, lo: int, hi: int) -> list[tuple[tuple[int, int] | None, int, int]]:
        """Who ran on ``cpu`` in [lo, hi): (vcpu or None, start, end) pieces."""
        starts, ends, who = self.cap.runs.get(cpu, (np.empty(0, np.int64),) * 2 + ([],))
        out = []
        k = max(int(np.searchsorted(starts, lo, side="right")) - 1, 0)
        at = lo
        while k < len(who) and starts[k] < hi:
            s, e = max(int(starts[k]), lo), min(int(ends[k]), hi)
            if e > s:
                if s > at:
                    out.append((None, at, s))
                out.append((who[k], s, e))
                at = max(at, e)
            k += 1
        if at < hi:
            out.append((None, at, hi))
        return out

    def _hypercalls(self, cpu: int, v: tuple[int, int], lo: int, hi: int
                    ) -> list[tuple[int, str, int, int]]:
        """Hypercalls of ``v`` in flight on ``cpu`` within [lo, hi): (op, name, start,
        end)."""
        pv = self.cap.pv.get(cpu)
        if pv is None or v not in self.calls[cpu][2]:
            return []
        t, _minor, op, arg = pv
        counts, end, codes, owner = self.calls[cpu]
        # the hypercall before lo may still be running
        a = max(int(np.searchsorted(t, lo, side="right")) - 1, 0)
        b = int(np.searchsorted(t, hi, side="left"))
        ks = a + np.flatnonzero(counts[a:b] & (owner[a:b] == codes[v]))
        s = np.maximum(t[ks], lo)
        e = np.minimum(end[ks], hi)
        keep = e > s
        return [(int(op[k]), _call_name(int(op[k]), int(arg[k])), int(x), int(y))
                for k, x, y in zip(ks[keep].tolist(), s[keep].tolist(), e[keep].tolist())]

    def explain(self, seq: int, lo: int, hi: int, latency_tick: int, err: int
                ) -> Attribution:
        att = Attribution(seq, latency_tick, lo, hi)
        if lo < 0 or hi < 0:
            att.status, att.reason = "not traced", "its ticks map to no xentrace anchor"
            return att
        if lo < self.span[0] or hi > self.span[1]:
            att.status, att.reason = "not traced", "outside the capture"
            return att
        if hi < lo:
            att.notes.append(f"handler entry mapped {lo - hi} cycles before the deadline "
                             f"(clock error bound {err} cycles): window empty")
            hi = lo
        causes: dict[str, int] = {}

        def add(name: str, n: int) -> None:
            if n > 0:
                causes[name] = causes.get(name, 0) + n
        covered = 0
        cpus: set[int] = set()
        k = max(int(np.searchsorted(self.iv_start, lo, side="right")) - 1, 0)
        while k < len(self.ivs) and self.ivs[k].start < hi:
            iv = self.ivs[k]
            s, e = max(iv.start, lo), min(iv.end, hi)
            k += 1
            if e <= s:
                continue
            covered += e - s
            if iv.state == "running":
                cpus.add(iv.cpu)
                add(PROBE_RUNNING, (e - s) - self._take_irqs(add, iv.cpu, s, e, e - s))
            elif iv.state == "offline":
                add(PROBE_OFFLINE, e - s)
            else:
                # the pCPU it waits for: where it runs next (runnable) or last ran
                r = int(np.searchsorted(self.running_at, k))
                nxt = self.ivs[self.running_at[r]] if r < len(self.running_at) else None
                cpu = nxt.cpu if nxt is not None else iv.cpu
                cpus.add(cpu)
                for a, b, out_of_budget in self._budget_pieces(iv.state, s, e):
                    if out_of_budget:
                        add(PROBE_DEPLETED, b - a)
                    else:
                        self._split(att, add, cpu, iv.state, a, b)
        add(UNEXPLAINED, (hi - lo) - covered)
        for c in sorted(cpus):
            att.notes.extend(self._sched_notes(c, lo, hi))
        att.causes = causes
        if UNEXPLAINED not in causes:
            causes[UNEXPLAINED] = 0
        if err:
            att.notes.append(f"clock error bound of this deadline ±{err} cycles")
        att.stages = self._stages(lo, hi)
        return att

    def _budget_pieces(self, state: str, s: int, e: int) -> list[tuple[int, int, bool]]:
        """[s, e) cut where the probe was out of RTDS budget (runnable only): (start,
        end, out of budget) pieces in order."""
        starts, ends = self.depleted
        if state != "runnable" or not len(starts):
            return [(s, e, False)]
        out, at = [], s
        k = int(np.searchsorted(ends, s, side="right"))
        while k < len(starts) and starts[k] < e:
            a, b = max(int(starts[k]), s), min(int(ends[k]), e)
            if a > at:
                out.append((at, a, False))
            if b > a:
                out.append((a, b, True))
                at = b
            k += 1
        if at < e:
            out.append((at, e, False))
        return out

    def _split(self, att: Attribution, add, cpu: int, state: str, s: int, e: int) -> None:
        for v, a, b in self._who(cpu, s, e):
            if v is None or v[0] == DOMID_IDLE:
                add("runnable while the pCPU was idle (scheduler)" if state == "runnable"
                    else PROBE_BLOCKED_IDLE, b - a)
                continue
            name = vcpu_name(v)
            held = 0
            for op, call, ha, hb in self._hypercalls(cpu, v, a, b):
                if hb - ha >= self.held_min and op in LONG_HYPERCALLS:
                    add(in_hypercall(name, call), hb - ha)
                    held += hb - ha
                else:
                    att.notes.append(f"{name} made hypercall {call} meanwhile")
            rest = (b - a) - held
            rest -= self._take_irqs(add, cpu, a, b, rest)
            add(runnable_while(name) if state == "runnable" else blocked_while(name), rest)

    def _stages(self, lo: int, hi: int) -> list[tuple[str, int]]:
        """Timer path stages seen in the window (step 4 of the issue, where traced)."""
        out = [("deadline", lo)]
        w = int(np.searchsorted(self.runnable_start, lo, side="right"))
        if w < len(self.runnable_start) and self.runnable_start[w] <= hi:
            woken = int(self.runnable_start[w])
            out.append(("probe vCPU woken (runnable)", woken))
            # the scheduler's pick: its next running interval's start
            r = int(np.searchsorted(self.running_start, woken, side="left"))
            if r < len(self.running_start) and self.running_start[r] <= hi:
                out.append(("probe vCPU switched in (running)", int(self.running_start[r])))
        pos, _c, t = self.virq
        i = int(np.searchsorted(t, lo))
        if i < len(t) and t[i] <= hi:
            out.append(("virtual interrupt injected", int(t[i])))
            _p, _c2, te = self.vmentry
            j = int(np.searchsorted(te, t[i]))
            if j < len(te) and te[j] <= hi:
                out.append(("guest entered", int(te[j])))
        out.append(("handler entry", hi))
        return sorted(out, key=lambda x: x[1])


@functools.lru_cache(maxsize=4096)
def _call_name(op: int, arg: int) -> str:
    name = hypercall_name(op)
    if op in SUBOP_NAMES and arg >= 0:
        return f"{name}/{SUBOP_NAMES[op].get(arg, arg)}"
    if op in NO_SUBOP:
        return f"{name} (sub-op not traced)"
    return name


@dataclass
class XenExplained:
    run: Any
    cap: XenCapture
    clock: XenClock
    samples: list[Attribution]
    culprits: list[dict[str, Any]]
    selected_by: str
    hz: int
    explainer: XenExplainer
    used: np.ndarray
    all_samples: dict[str, np.ndarray] = field(default_factory=dict)

    def ns(self, tick: int) -> int:
        return round(tick * 1e9 / self.hz)


def probe_vcpu(run_metadata: dict[str, Any]) -> tuple[int, int]:
    domu = ((run_metadata.get("xen") or {}).get("dom0") or {}).get("domu") or {}
    return (int(domu.get("domid", 1)), 0)


def explain_samples(cap: XenCapture, probe: tuple[int, int], seq: np.ndarray,
                    deadline: np.ndarray, entry: np.ndarray, idx: np.ndarray,
                    hz: int, ref: dict[str, Any] | None = None
                    ) -> tuple[XenClock, list[Attribution], XenExplainer]:
    """Map the selected samples ``idx`` and attribute them (the core, without a store).
    ``ref``: the probe's reference counter (run metadata ``probe.ref_counter``); Xen on
    Arm's maps through it, x86's through the emulated RDTSC anchors."""
    if ref is not None and ref.get("counter") == REF_COUNTER_CNTPCT:
        clock = ref_clock(cap, probe, seq[idx], deadline[idx], entry[idx], ref)
    else:
        clock = fit_clock(cap, probe, deadline[idx], entry[idx])
    ex = XenExplainer(cap, probe)
    atts = []
    for k, i in enumerate(idx.tolist()):
        lat_x = int(entry[i] - deadline[i])
        atts.append(ex.explain(int(seq[i]), int(clock.deadline_x[k]), int(clock.entry_x[k]),
                               lat_x, int(clock.error_x[k])))
    return clock, atts, ex


STAGE_ORDER = ("deadline", "probe vCPU woken (runnable)", "probe vCPU switched in (running)",
               "virtual interrupt injected", "guest entered", "handler entry")
# What Xen 4.17's trace cannot show on this path (formats.md §9a).
STAGES_NOT_TRACED = {
    "physical timer interrupt in Xen": "the LAPIC timer vector is handled without a "
    "trace point (TRC_HW_IRQ_HANDLED is for device IRQs)",
    "vLAPIC timer fired (pending for the guest)": "no TRC_HVM_EMUL_LAPIC_TIMER_CB record "
    "fires on this path; the wake (blocked -> runnable) stands for it",
}


# Xen 4.17 on Arm has no trace point in xen/arch/arm at all: xentrace there records the
# common scheduler's (runstate changes, wakes, credit/credit2/RTDS/null decisions), domain
# creation and memory/grant-table events, nothing of the IRQ path.
STAGES_NOT_TRACED_ARM = {
    "physical timer interrupt in Xen": "no IRQ trace point in Xen 4.17 on Arm (gic_interrupt, "
    "do_IRQ, vtimer_interrupt)",
    "vGIC injection": "vgic_inject_irq() has no trace point; the wake stands for it",
    "guest entered": "no trace point on Arm's guest entry; the switch-in stands for it",
}


def stages_not_traced(arch: str | None) -> dict[str, str]:
    """What Xen's trace cannot show on the timer path of a probe of ``arch``."""
    return STAGES_NOT_TRACED_ARM if arch == "arm64" else STAGES_NOT_TRACED


def as_json(res: XenExplained) -> dict[str, Any]:
    """The ``{"type": "explain", ...}`` object, the host explain's keys (formats.md §9)."""
    ns = res.ns
    lo = res.cap.first_tsc
    return {
        "type": "explain", "version": 1, "run_id": res.run.run_id, "source": "xentrace",
        "selected_by": res.selected_by, "clock": res.clock.as_dict(res.hz, res.used),
        "events": res.cap.events, "events_missing": [], "events_never_fired": [],
        "lost_records": sum(n for _c, _t, n in res.cap.lost),
        "lost_regions": [{"cpu": c, "from_ns": ns(t - lo), "to_ns": ns(t - lo), "why": why}
                         for c, t, _t2, why in res.explainer.lost],
        "probe_vcpu": vcpu_name(res.explainer.probe),
        **attributed_json(res.samples, res.culprits, ns, STAGE_ORDER),
        "stages_not_traced": stages_not_traced(res.run.arch),
    }


def explain_run(run: Any, path: Path, s: dict[str, np.ndarray], threshold_ns: int | None,
                top: int | None, sample: int | None) -> XenExplained:
    """A stored run (its samples ``s``: seq, deadline_tick, entry_tick) and its capture."""
    cap = load_capture(path)
    hz = int(cap.header.get("tsc_hz") or run.tick_hz)
    seq = s["seq"].astype(np.int64)
    dl = s["deadline_tick"].astype(np.int64)
    en = s["entry_tick"].astype(np.int64)
    lat = en - dl
    chosen = select_samples(seq, lat, int(run.tick_hz), run.threshold_ns, threshold_ns, top,
                            sample)
    if chosen is None:
        raise ValueError(f"run {run.run_id} has no sample {sample}")
    idx, how = chosen
    probe = probe_vcpu(run.metadata)
    ref = (run.metadata.get("probe") or {}).get("ref_counter")
    if ref is not None and ref.get("counter") == REF_COUNTER_CNTPCT:
        hz = int(run.tick_hz)     # the records' counter is the probe's own: its rate
    clock, atts, ex = explain_samples(cap, probe, seq, dl, en, idx, hz, ref)
    used = np.array([a.status == "explained" for a in atts], bool)
    return XenExplained(run, cap, clock, atts, aggregate(atts), how, hz, ex, used,
                        {"seq": seq, "latency_tick": lat})


def xentrace_path(run: Any) -> Path:
    """The run's xentrace capture (irqlab.xen.capture), or StoreError with the fix."""
    meta = hook_meta(run, XENTRACE_HOOK)
    path = Path(meta.get("file") or "")
    if not meta.get("file") or not path.exists():
        raise StoreError(f"run {run.run_id} has no xentrace capture ({path} missing): "
                         f"record one with `irqlab run --target xen --xen-dom0 linux "
                         f"--trace`")
    return path


def xen_perfetto(res: XenExplained, path: Path, progress: Progress) -> dict[str, Any]:
    """The Xen events on tracks of their own (per pCPU, which vCPU ran, from xentrace's
    runstate records; dom0's long hypercalls), then what every explainer writes
    (irqlab.explain.perfetto). Timestamps are ns from the capture's first record."""
    cap = res.cap
    t0 = cap.first_tsc

    def ns(tick: int) -> int:
        return max(0, round((tick - t0) * 1e9 / res.hz))

    def tracks(pb: Any, _bar: Any) -> Any:
        for c in sorted(cap.runs):
            track = PCPU_TRACKS + 10 * c
            yield _track(pb, track, f"Xen pCPU {c}: vCPU running", ROOT), 0
            starts, ends, who = cap.runs[c]
            for s, e, v in zip(starts.tolist(), ends.tolist(), who):
                yield _track_event(pb, ns(s), track, "begin", vcpu_name(v)), 1
                yield _track_event(pb, ns(e), track, "end"), 0
            pv = cap.pv.get(c)
            if pv is None:
                continue
            calls = track + 1
            yield _track(pb, calls, f"Xen pCPU {c}: hypercalls (to the next PV record)",
                         ROOT), 0
            t, minor, op, arg = pv
            for k in range(len(t)):
                if minor[k] != PV_HYPERCALL_V2 or int(op[k]) not in LONG_HYPERCALLS:
                    continue
                end = int(t[k + 1]) if k + 1 < len(t) else int(t[k])
                yield _track_event(pb, ns(int(t[k])), calls, "begin",
                                   _call_name(int(op[k]), int(arg[k]))), 1
                yield _track_event(pb, ns(end), calls, "end"), 0

    spikes = [a for a in res.samples if a.status == "explained"]
    # The latency track holds the explained samples (only those are mapped onto Xen's
    # clock), at their deadlines.
    counter = sorted((ns(a.start), res.ns(a.latency_tick)) for a in spikes)
    run = PerfettoRun(f"irqlab run {res.run.run_id} (xentrace)", spikes, ns, res.ns,
                      counter, tracks)
    progress.stage("writing Perfetto trace")
    return write_perfetto(path, run)


class XentraceExplainer:
    """A Xen guest's spikes from the xentrace capture dom0 recorded."""

    kind = "xentrace"
    title = "xentrace (Xen, its scheduler and domains)"
    outputs = ("perfetto",)

    def outputs_hint(self, run: Any) -> str:
        return (f"run {run.run_id}'s capture is xentrace: use --perfetto, "
                f"`irqlab xentrace {xentrace_path(run)}` or xenalyze")

    def explain(self, store: Store, run: Any, request: Request,
                progress: Progress) -> Explanation:
        path = xentrace_path(run)
        progress.stage("explaining the xentrace capture")
        try:
            res = explain_run(run, path, stored_samples(store, run.run_id),
                              request.threshold_ns, request.top, request.sample)
        except ValueError as exc:
            raise StoreError(str(exc)) from None
        return Explanation(as_json(res), {"perfetto": lambda p, pr: xen_perfetto(res, p, pr)})
