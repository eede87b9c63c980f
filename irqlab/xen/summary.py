"""Per-vCPU runstate times and hypercall counts of a xentrace file, as ``xenalyze
--summary`` counts them (``irqlab xentrace``).

xenalyze (Xen 4.17, tools/xentrace/xenalyze.c) is the reference these numbers must agree
with, so its accounting is replayed here rather than a simpler one:

* **Runstates** (``sched_runstate_process``, ``runstate_update``, ``vcpu_start``,
  ``vcpu_prev_update``, ``vcpu_next_update``): a vCPU is INIT until a runstate record
  takes it into ``running`` (a record ``running->running``, i.e. it was running when the
  trace began, starts it at its pCPU's first cycle count). Every later state change
  closes one interval of the old state (count + 1, its cycles added), but only when the
  start is known and earlier than the change. A ``continue_running`` record closes the
  running interval and opens the next one (the scheduler ran and kept it). A change whose
  old state disagrees with what was seen (TSC skew between pCPUs) is skipped or
  applied as xenalyze does. At the end of a pCPU's records, the vCPU running there is
  closed at that pCPU's last cycle count (``deactivate_pcpu``, state LOST); the other
  vCPUs' open intervals are not counted.
* **Hypercalls** (``pv_process``, ``pv_hypercall_v2_process``): every
  ``TRC_PV_HYPERCALL_V2`` record and every ``TRC_PV_HYPERCALL_SUBCALL`` (a multicall's
  entry) counts for the op in its first extra word's low 20 bits, against the vCPU the
  replay says runs on that pCPU at that record (none, the idle domain and a vCPU already
  seen as HVM do not count: ``toplevel_assert_check``).

Records are taken in cycle order across pCPUs (xenalyze merges its per-pCPU streams by
cycle count too; its skew offsets, which only matter with skewed pCPUs, are not
replayed). Xen's lost-record records end the vCPU running on that pCPU (LOST) and clear
the pCPU's current vCPU, as xenalyze does (``process_lost_records``, simplified).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irqlab import native
from irqlab.xen.index import HAS_TSC, INHERITED, RecordIndex, index_records
from irqlab.xen.records import DOMID_IDLE, TRC_LOST_RECORDS

# xenalyze.c enum: running, runnable, blocked, offline (Xen's), then its own
RUNNING, RUNNABLE, BLOCKED, OFFLINE, LOST, QUEUED, INIT = range(7)
STATE_NAMES = ("running", "runnable", "blocked", "offline")
DEFAULT_DOMAIN = 32768              # xenalyze's "who ran before the first schedule"

TRC_SCHED_MIN_MASK = 0x0FFFF000
TRC_SCHED_MIN = 0x00021000
RUNSTATE_CHANGE, CONTINUE_RUNNING = 1, 2          # low 4 bits of a TRC_SCHED_MIN event
TRC_PV_MAIN = 0x00200000
TRC_HVM_MAIN = 0x00080000
TRC_SHADOW_MAIN = 0x00400000
PV_HYPERCALL_V2, PV_HYPERCALL_SUBCALL = 13, 14    # xenalyze's pv minor numbers
HYPERCALL_OP_MASK = 0x000FFFFF                    # the args-present bits are above

# xen/include/public/xen.h __HYPERVISOR_* with xenalyze's names (hypercall_name[])
HYPERCALL_NAMES = {
    0: "set_trap_table", 1: "mmu_update", 2: "set_gdt", 3: "stack_switch",
    4: "set_callbacks", 5: "fpu_taskswitch", 6: "sched_op(compat)", 7: "platform_op",
    8: "set_debugreg", 9: "get_debugreg", 10: "update_descriptor", 12: "memory_op",
    13: "multicall", 14: "update_va_mapping", 15: "set_timer_op",
    16: "evtchn_op(compat)", 17: "xen_version", 18: "console_io",
    19: "physdev_op(compat)", 20: "grant_table_op", 21: "vm_assist",
    22: "update_va_mapping_otherdomain", 23: "iret", 24: "vcpu_op",
    25: "set_segment_base", 26: "mmuext_op", 27: "acm_op", 28: "nmi_op", 29: "sched_op",
    30: "callback_op", 31: "xenoprof_op", 32: "evtchn_op", 33: "physdev_op",
    34: "hvm_op", 35: "sysctl", 36: "domctl", 37: "kexec_op",
}
PV_HYPERCALL_MAX = 56               # xenalyze counts ops below this
SLOTS_MAX = 4096                    # vCPUs the C replay holds (XS_MAX_SLOTS, xentrace.c)
CPUS_MAX = 4096                     # pCPUs of a xentrace file (MAX_CPUS, xentrace.c)


def hypercall_name(op: int) -> str:
    return HYPERCALL_NAMES.get(op, f"hypercall_{op}")


@dataclass
class _Vcpu:
    state: int = INIT
    tsc: int = 0
    pcpu: int | None = None
    activated: bool = False
    wrong: int = INIT                 # xenalyze's last_oldstate (skew detection)
    actual: int = INIT
    wrong_tsc: int = 0


@dataclass
class _Pcpu:
    first_tsc: int
    last_tsc: int
    current: tuple[int, int] | None = None
    seen_valid_schedule: bool = False


@dataclass
class XenSummary:
    """Per (domain, vcpu): {state: [count, cycles]}; per (domain, vcpu): {op: count}."""

    runstates: dict[tuple[int, int], list[list[int]]] = field(
        default_factory=lambda: defaultdict(lambda: [[0, 0] for _ in range(7)]))
    hypercalls: dict[tuple[int, int], dict[int, int]] = field(default_factory=dict)
    records: int = 0
    lost_records: int = 0
    cpus: list[int] = field(default_factory=list)
    first_tsc: int | None = None
    last_tsc: int | None = None

    def lines(self, tsc_hz: int) -> list[dict[str, Any]]:
        """The JSON lines of `irqlab xentrace --json` (docs/formats.md §4)."""
        out: list[dict[str, Any]] = []
        for (dom, vcpu) in sorted(self.runstates):
            if dom == DEFAULT_DOMAIN:
                continue
            states = self.runstates[(dom, vcpu)]
            if not any(states[s][0] for s in range(4)):
                continue
            for s, name in enumerate(STATE_NAMES):
                count, cycles = states[s]
                out.append({"type": "runstate", "version": 1, "domain": dom, "vcpu": vcpu,
                            "state": name, "count": count,
                            "total_ns": round(cycles * 1e9 / tsc_hz)})
        for (dom, vcpu) in sorted(self.hypercalls):
            for op, count in sorted(self.hypercalls[(dom, vcpu)].items()):
                out.append({"type": "hypercall", "version": 1, "domain": dom, "vcpu": vcpu,
                            "name": hypercall_name(op), "op": op, "count": count})
        return out


def _merged_order(idx: RecordIndex) -> np.ndarray:
    """Rows of timed records in cycle order (file order among equal counts)."""
    rows = np.flatnonzero((idx.flags & (HAS_TSC | INHERITED)) != 0)
    tsc = idx.tsc[rows]
    if len(rows) < 2 or bool((tsc[1:] >= tsc[:-1]).all()):
        return rows                   # already in order (one pCPU): no sort
    return rows[np.lexsort((idx.off[rows], tsc))]


class _Tables:
    """The C replay's output arrays (irq_xen_summary*, xentrace.c), zeroed."""

    def __init__(self) -> None:
        self.keys = np.zeros(SLOTS_MAX, np.uint32)
        self.cpus = np.zeros(CPUS_MAX, np.uint8)
        self.acc = np.zeros((SLOTS_MAX, 7, 2), np.int64)
        self.calls = np.zeros((SLOTS_MAX, PV_HYPERCALL_MAX), np.int64)
        self.first_type = np.zeros(SLOTS_MAX, np.int8)
        self.lost = np.zeros(1, np.int64)
        self.span = np.zeros(2, np.int64)

    def args(self) -> list[int]:
        return [native.ptr(a) for a in (self.keys, self.cpus, self.acc, self.calls,
                                        self.first_type, self.lost, self.span)]

    def summary(self, n: int, records: int) -> XenSummary:
        timed = int(self.span[0]) <= int(self.span[1])
        out = XenSummary(records=records, lost_records=int(self.lost[0]),
                         cpus=np.flatnonzero(self.cpus).tolist(),
                         first_tsc=int(self.span[0]) if timed else None,
                         last_tsc=int(self.span[1]) if timed else None)
        for k in range(n):
            key = (int(self.keys[k]) >> 16, int(self.keys[k]) & 0xFFFF)
            out.runstates[key] = self.acc[k].tolist()
            if self.first_type[k] == 1 and key[0] not in (DOMID_IDLE, DEFAULT_DOMAIN) \
                    and self.calls[k].any():
                out.hypercalls[key] = {int(op): int(self.calls[k, op])
                                       for op in np.flatnonzero(self.calls[k])}
        return out


def summarize_data(data: bytes) -> XenSummary:
    """:func:`summarize` of a whole xentrace file's bytes. When irqlab/native is built and
    the file's records are in cycle order as written (one pCPU, or per-pCPU windows that
    never go back), one C walk over the bytes does it all, without the record index;
    otherwise the file is indexed and its records sorted first."""
    lib = native.lib()
    if lib is not None:
        tables, records = _Tables(), np.zeros(1, np.int64)
        buf = np.frombuffer(data, dtype=np.uint8)
        n = lib.irq_xen_summary_raw(native.ptr(buf), len(data), *tables.args(),
                                    native.ptr(records))
        if n >= 0:
            return tables.summary(n, int(records[0]))
    return summarize(index_records(data))


def summarize(idx: RecordIndex) -> XenSummary:
    """Replay xenalyze's runstate and hypercall accounting (see the module doc): in C
    (irq_xen_summary, xentrace.c) when irqlab/native is built, else in Python
    (:func:`summarize_python`, the reference the unit tests compare it with)."""
    lib = native.lib()
    if lib is None:
        return summarize_python(idx)
    rows = np.ascontiguousarray(_merged_order(idx), np.int64)
    tables = _Tables()
    n = lib.irq_xen_summary(
        native.ptr(np.frombuffer(idx.data, dtype=np.uint8)), native.ptr(idx.off),
        native.ptr(idx.cpu), native.ptr(idx.event), native.ptr(idx.nextra),
        native.ptr(idx.flags), native.ptr(idx.tsc), native.ptr(rows), len(rows),
        *tables.args())
    if n < 0:                   # more vCPUs than the C table holds: the reference copes
        return summarize_python(idx, rows)
    return tables.summary(n, len(idx))


def summarize_python(idx: RecordIndex, rows: np.ndarray | None = None) -> XenSummary:
    """The reference replay in Python (numpy for the bulk); ``rows``: the timed records
    in cycle order (computed when not given)."""
    out = XenSummary(records=len(idx))
    if rows is None:
        rows = _merged_order(idx)
    if not len(rows):
        return out
    ev = idx.event[rows]
    cpu = idx.cpu[rows]
    tsc = idx.tsc[rows].astype(np.int64)
    out.first_tsc, out.last_tsc = int(tsc.min()), int(tsc.max())
    out.cpus = sorted(set(cpu.tolist()))
    pcpus: dict[int, _Pcpu] = {}
    for c in out.cpus:
        on = tsc[cpu == c]
        pcpus[c] = _Pcpu(int(on[0]), int(on[-1]))
    vcpus: dict[tuple[int, int], _Vcpu] = defaultdict(_Vcpu)
    acc = out.runstates

    def update(key: tuple[int, int], new: int, t: int) -> None:
        v = vcpus[key]
        if 0 < v.tsc < t:
            cell = acc[key][v.state]
            cell[0] += 1
            cell[1] += t - v.tsc
        v.state, v.tsc = new, t

    def prev_update(p: int | None, key: tuple[int, int], new: int, t: int) -> None:
        v = vcpus[key]
        pc = pcpus[p] if p is not None else None
        if v.pcpu != p or pc is None or pc.current != key or v.state != RUNNING:
            v.tsc = 0
        if pc is not None:
            pc.current = None
        update(key, new, t)

    def next_update(p: int, key: tuple[int, int], t: int) -> bool:
        pc, v = pcpus[p], vcpus[key]
        if pc.current is not None:
            if pc.seen_valid_schedule:
                return False          # xenalyze: FATAL, the record is not applied
            update(pc.current, LOST, t)
            pc.current = None
        if v.activated:
            if v.state == RUNNING and key[0] != DEFAULT_DOMAIN:
                v.tsc = 0
        else:
            v.activated = True
        update(key, RUNNING, t)
        v.pcpu, pc.current, pc.seen_valid_schedule = p, key, True
        return True

    def start(p: int, key: tuple[int, int], old: int, new: int, t: int) -> None:
        pc = pcpus[p]
        if old == RUNNING:
            pc.current = None
        if new != RUNNING:
            return
        update(key, RUNNING, pc.first_tsc if old == RUNNING else t)
        pc.current = key
        vcpus[key].pcpu = p

    # Each pCPU starts with xenalyze's default vCPU current (vcpu_start checks it).
    for c, pc in pcpus.items():
        pc.current = (DEFAULT_DOMAIN, c)
    sched = np.flatnonzero((ev & TRC_SCHED_MIN_MASK) == TRC_SCHED_MIN)
    sched = sched[np.isin(ev[sched] & 0xF, (RUNSTATE_CHANGE, CONTINUE_RUNNING))
                  & (idx.nextra[rows[sched]] >= 1)]      # (a cut record has no vCPU)
    lost = np.flatnonzero(ev == TRC_LOST_RECORDS)
    words = idx.extra(rows[sched], 0) if len(sched) else np.empty(0, np.uint32)
    # (position in merged order, kind) of the events that change who runs where
    marks = sorted([(int(i), 0, k) for k, i in enumerate(sched)]
                   + [(int(i), 1, -1) for i in lost])
    # per pCPU: merged positions where `current` changes and the new current
    cur_pos: dict[int, list[int]] = {c: [-1] for c in pcpus}
    cur_val: dict[int, list[tuple[int, int] | None]] = {
        c: [(DEFAULT_DOMAIN, c)] for c in pcpus}
    for pos, kind, k in marks:
        p, t = int(cpu[pos]), int(tsc[pos])
        if kind == 1:
            pc = pcpus[p]
            if pc.current is not None:
                update(pc.current, LOST, t)
            pc.current, pc.seen_valid_schedule = None, False
        else:
            e, w = int(ev[pos]), int(words[k])
            key = (w >> 16, w & 0xFFFF)
            if e & 0xF == CONTINUE_RUNNING:
                cont, old, new = True, RUNNING, RUNNING
            else:
                cont, old, new = False, (e >> 8) & 0xF, (e >> 4) & 0xF
            _apply(vcpus[key], key, p, t, cont, old, new, start, update, prev_update,
                   next_update, pcpus)
        cur_pos[p].append(pos)
        cur_val[p].append(pcpus[p].current)
    # deactivate_pcpu: the vCPU still running on each pCPU ends at its last record
    for c, pc in pcpus.items():
        if pc.current is not None:
            update(pc.current, LOST, pc.last_tsc)
    _count_hypercalls(out, idx, rows, ev, cpu, cur_pos, cur_val)
    lost_rows = rows[lost]
    lost_rows = lost_rows[idx.nextra[lost_rows] >= 1]
    out.lost_records = int(idx.extra(lost_rows, 0).astype(np.int64).sum()) \
        if len(lost_rows) else 0
    return out


def _apply(v: _Vcpu, key, p: int, t: int, cont: bool, old: int, new: int, start, update,
           prev_update, next_update, pcpus) -> None:
    """One runstate record, sched_runstate_process()'s branches."""
    wrong, actual, wrong_tsc = v.wrong, v.actual, v.wrong_tsc
    v.wrong = INIT
    if v.state == INIT:
        start(p, key, old, new, t)
        return
    if v.state != old:
        if v.state == LOST:
            if new != RUNNING:
                return
        elif wrong == new and actual == old:
            return                          # TSC skew detected: not updated
        else:
            v.wrong, v.actual, v.wrong_tsc = old, v.state, t
            if v.state == RUNNING:
                return
    if cont:
        if v.state == LOST:
            pc = pcpus[p]
            if pc.current is not None:
                prev_update(p, pc.current, LOST, t)
            next_update(p, key, t)
        elif v.state != RUNNING or v.pcpu != p:
            return
        update(key, RUNNING, t)
    elif old == RUNNING or v.state == RUNNING:
        prev_update(p if old == RUNNING else v.pcpu, key, new, t)
    elif new == RUNNING:
        next_update(p, key, t)
    else:
        update(key, new, t)
    del wrong_tsc


def _count_hypercalls(out: XenSummary, idx: RecordIndex, rows: np.ndarray, ev: np.ndarray,
                      cpu: np.ndarray, cur_pos, cur_val) -> None:
    """PV hypercall records against the vCPU current on their pCPU (vectorized)."""
    main = ev & 0x0FFF0000
    minor = ev & 0xFF
    pv = np.flatnonzero(main == TRC_PV_MAIN)
    hvm = np.flatnonzero((main == TRC_HVM_MAIN) | (main == TRC_SHADOW_MAIN))
    # who is current at each PV / HVM record (the last change at or before it)
    owner = np.full(len(ev), -1, np.int64)
    keys: list[tuple[int, int] | None] = []
    code: dict[tuple[int, int] | None, int] = {}
    for c in cur_pos:
        at = np.flatnonzero(cpu == c)
        at = at[np.isin(at, pv) | np.isin(at, hvm)]
        if not len(at):
            continue
        pos = np.asarray(cur_pos[c], np.int64)
        which = np.searchsorted(pos, at, side="right") - 1
        vals = np.empty(len(pos), np.int64)
        for j, val in enumerate(cur_val[c]):
            if val not in code:
                code[val] = len(keys)
                keys.append(val)
            vals[j] = code[val]
        owner[at] = vals[which]
    # a vCPU's data type is that of its first PV or HVM record (vcpu_set_data_type)
    typed = np.sort(np.concatenate([pv, hvm]))
    first_type: dict[int, bool] = {}
    is_pv = np.zeros(len(ev), bool)
    is_pv[pv] = True
    own = owner[typed]
    _u, first = np.unique(own, return_index=True)
    for o, f in zip(own[first].tolist(), first.tolist()):
        first_type[o] = bool(is_pv[typed[f]])
    calls = pv[np.isin(minor[pv], (PV_HYPERCALL_V2, PV_HYPERCALL_SUBCALL))
               & (idx.nextra[rows[pv]] >= 1)]
    if not len(calls):
        return
    op = idx.extra(rows[calls], 0) & HYPERCALL_OP_MASK
    who = owner[calls]
    ok = (who >= 0) & (op < PV_HYPERCALL_MAX)
    for o in np.unique(who[ok]).tolist():
        key = keys[o]
        if key is None or key[0] in (DOMID_IDLE, DEFAULT_DOMAIN) or not first_type.get(o):
            continue
        ops, counts = np.unique(op[ok & (who == o)], return_counts=True)
        out.hypercalls[key] = {int(a): int(b) for a, b in zip(ops, counts)}
