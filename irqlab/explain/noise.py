"""A noise run's gaps classified from the kernel trace captured over it (issue 44, the
noise target): each gap the busy loop saw (irqlab-noise, probes/native/noise.c) gets
the interference that took most of it.

The model is rtla osnoise's (Documentation/trace/osnoise-tracer.rst): the noise is the
gap as the loop measured it, nothing subtracted; the interferences are the kernel's
own accounts of who had the CPU — an NMI (``nmi:nmi_handler``, its ``delta_ns`` back
from its stamp), a hard IRQ (``irq_handler_entry/exit``, with its handler's name, or an
x86 system vector such as ``local_timer``), a softirq (``softirq_entry/exit``, by its
vector's name: NET_RX ...), or another thread (``sched_switch``: the task switched in
instead of the loop, its comm and pid). Each is counted for its *own* time, as osnoise
does: an IRQ inside a softirq inside another thread is taken out of the softirq's time,
the softirq's out of the thread's (at every instant the innermost one holds the CPU:
NMI over IRQ over softirq over thread). The gap's class is the interference with the
most such time inside it; a gap no traced interference overlaps is "outside the
kernel": the hypervisor (on a VM, the host's steal), an SMI or the hardware — rtla's
"HW" noise. Why the most and not the first: a gap may hold several (a thread whose
softirqs ran inside it, a tick during another task), and the one that took most of it
is what to fix. Time no event covers (on a VM the host's steal, the kernel's own entry
code) does not compete: as in osnoise, a gap with any traced interference is that
interference's, so "outside" counts only the gaps the trace saw nothing in.

Intervals come from irqlab.explain.timeline (irq_intervals, cpu_runs), the ones explain's
native path reads; the loop's own threads are found by their name (NOISE_COMM, which
noise.c gives them with PR_SET_NAME).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from irqlab.explain.load import Trace
from irqlab.explain.seam import Explanation, Progress, Request
from irqlab.explain.timeline import Intervals, cpu_runs, irq_intervals
from irqlab.runner.noise import NOISE_COMM
from irqlab.stats.osnoise import IRQ, NMI, OUTSIDE, OUTSIDE_TEXT, SOFTIRQ, THREAD
from irqlab.store import Store, StoreError
from irqlab.store.db import RunRow

# Level of each traced kind: at an instant the highest one present holds the CPU.
_LEVEL = {THREAD: 1, SOFTIRQ: 2, IRQ: 3, NMI: 4}


@dataclass
class Classified:
    """Per gap (in the order given): its class's label index into ``labels`` (-1:
    outside the kernel) and that interference's own time inside the gap (ns)."""

    label: np.ndarray
    own_ns: np.ndarray
    labels: list[tuple[str, str]] = field(default_factory=list)    # (kind, name)

    def kinds_names(self) -> tuple[np.ndarray, np.ndarray]:
        """Each gap's class as (kind, name) string arrays."""
        table = self.labels + [(OUTSIDE, OUTSIDE_TEXT)]     # index -1: outside
        kinds = np.array([k for k, _n in table], dtype=object)
        names = np.array([n for _k, n in table], dtype=object)
        return kinds[self.label], names[self.label]


def _hard_name(label: str) -> str:
    """irq_intervals' "irq 24 virtio0-input.0" -> "virtio0-input.0 (24)";
    "vector local_timer" -> "local_timer"."""
    if label.startswith("vector "):
        return label[len("vector "):]
    _irq, num, *name = label.split(" ", 2)
    return f"{name[0]} ({num})" if name else f"irq {num}"


def nmi_intervals(trace: Trace) -> dict[int, Intervals]:
    """Per CPU, each NMI handler's run: ``nmi_handler`` is stamped at its end and says
    how long it took (arch/x86/kernel/nmi.c, nmi_handle -> trace_nmi_handler)."""
    tb = trace.t("nmi_handler")
    if not len(tb):
        return {}
    end = tb["ts"].astype(np.int64)
    start = end - tb["delta_ns"].astype(np.int64)
    out = {}
    for c in np.unique(tb["cpu"]).tolist():
        sel = np.flatnonzero(tb["cpu"] == c)
        o = sel[np.argsort(start[sel], kind="stable")]
        out[int(c)] = Intervals(start[o], end[o], np.full(len(o), "NMI", dtype=object))
    return out


class _Labels:
    """(kind, name) pairs numbered in order of first use."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self._index: dict[tuple[str, str], int] = {}

    def code(self, kind: str, name: str) -> int:
        key = (kind, name)
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(key)
        return self._index[key]


def _touching(g0: np.ndarray, g1: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Which intervals [s, e) overlap one of the sorted, disjoint gaps [g0, g1): only
    those count, of the millions a capture holds."""
    i = np.searchsorted(g0, e, "left") - 1          # the last gap starting before e
    return (i >= 0) & (g1[np.maximum(i, 0)] > s)


def _sorted_distinct(a: np.ndarray) -> np.ndarray:
    """np.unique of an int64 array by one sort (numpy 2's hashing unique took 4.5 s for
    the 1.35 M boundaries of a 10 s flood capture)."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if len(a) else a


def _comm_text(raw: object) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace") if isinstance(raw, bytes) \
        else str(raw)


def _thread_intervals(trace: Trace, labels: _Labels,
                      gaps: dict[int, tuple[np.ndarray, np.ndarray]]
                      ) -> dict[int, tuple[np.ndarray, ...]]:
    """Per CPU of ``gaps``, (start, end, label code) of every task but the loop's own
    holding the CPU, from one switch to the next (the last one's to the end of time),
    those overlapping a gap."""
    runs = cpu_runs(trace)
    out = {}
    for c, (g0, g1) in gaps.items():
        ts = runs.ts.get(c)
        if ts is None or not len(ts):
            continue
        ts = ts.astype(np.int64)
        end = np.r_[ts[1:], np.iinfo(np.int64).max]
        near = _touching(g0, g1, ts, end)
        ts, end = ts[near], end[near]
        pids = np.asarray(runs.pid[c])[near].astype(np.int64)
        comm_raw = np.asarray(runs.comm[c])[near]
        # Distinct (pid, comm) pairs named once.
        keys = np.unique(np.rec.fromarrays([pids, comm_raw]), return_inverse=True)
        pairs, inv = keys[0], keys[1].ravel()
        table = np.empty(len(pairs), np.int64)
        for k, (pid, raw) in enumerate(pairs.tolist()):
            comm = _comm_text(runs.names[raw] if runs.names is not None else raw)
            table[k] = -1 if comm == NOISE_COMM else labels.code(
                THREAD, "idle" if pid == 0 else f"{comm}:{pid}")
        code = table[inv] if len(table) else np.empty(0, np.int64)
        keep = code >= 0
        out[c] = (ts[keep], end[keep], code[keep])
    return out


def classify(trace: Trace, cpu: np.ndarray, start: np.ndarray, end: np.ndarray
             ) -> Classified:
    """Each gap ``[start, end)`` on ``cpu`` (trace clock = the probe's, CLOCK_MONOTONIC
    ns) classified as the module doc says."""
    cpu = np.asarray(cpu).astype(np.int64)
    start = np.asarray(start).astype(np.int64)
    end = np.asarray(end).astype(np.int64)
    gaps = {}
    for c in np.unique(cpu).tolist():
        idx = np.flatnonzero(cpu == c)
        order = idx[np.argsort(start[idx], kind="stable")]
        gaps[c] = (order, start[order], end[order])
    labels = _Labels()
    by_level: list[tuple[int, dict[int, tuple[np.ndarray, ...]]]] = []
    hard, soft = irq_intervals(trace)
    for kind, ivs, name in ((NMI, nmi_intervals(trace), str),
                            (IRQ, hard, _hard_name),
                            (SOFTIRQ, soft, lambda t: t[len("softirq "):])):
        per_cpu = {}
        for c, (_order, g0, g1) in gaps.items():
            iv = ivs.get(c)
            if iv is None or not len(iv.start):
                continue
            s, e = iv.start.astype(np.int64), iv.end.astype(np.int64)
            near = _touching(g0, g1, s, e)
            texts = iv.label[near].tolist()
            code_of = {t: labels.code(kind, name(t)) for t in set(texts)}
            codes = np.fromiter(map(code_of.__getitem__, texts), np.int64, len(texts))
            per_cpu[c] = (s[near], e[near], codes)
        by_level.append((_LEVEL[kind], per_cpu))
    by_level.append((_LEVEL[THREAD], _thread_intervals(
        trace, labels, {c: (g0, g1) for c, (_o, g0, g1) in gaps.items()})))
    by_level.sort(key=lambda lv: lv[0])        # lowest first: higher ones overwrite

    label = np.full(len(start), -1, np.int64)
    own = np.zeros(len(start), np.int64)
    for c, (order, g0, g1) in gaps.items():
        lab, ns = _classify_cpu(g0, g1, [lv.get(c) for _level, lv in by_level])
        label[order], own[order] = lab, ns
    return Classified(label, own, labels.items)


def _classify_cpu(g0: np.ndarray, g1: np.ndarray,
                  levels: list[tuple[np.ndarray, ...] | None]) -> tuple[np.ndarray, ...]:
    """One CPU's sorted, disjoint gaps against its interferences, lowest level first:
    the time line is cut at every boundary, each piece goes to the innermost
    interference holding it, and each gap to the one with the most pieces' time."""
    if not len(g0):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    def inside_gaps(t: np.ndarray) -> np.ndarray:
        # Only boundaries inside a gap cut anything that counts (a capture has millions).
        i = np.searchsorted(g0, t, "right") - 1
        return t[(i >= 0) & (t < g1[np.maximum(i, 0)])]

    cuts = [g0, g1]
    for lv in levels:
        if lv is not None:
            s, e, _code = lv
            cuts += [inside_gaps(s), inside_gaps(e)]
    bp = _sorted_distinct(np.concatenate(cuts))
    seg_lo, seg_len = bp[:-1], np.diff(bp)
    owner = np.full(len(seg_lo), -1, np.int64)
    for lv in levels:
        if lv is None or not len(lv[0]):
            continue
        s, e, code = lv
        i = np.searchsorted(s, seg_lo, "right") - 1
        active = (i >= 0) & (e[np.maximum(i, 0)] > seg_lo)
        owner[active] = code[i[active]]
    gap = np.searchsorted(g0, seg_lo, "right") - 1
    inside = (gap >= 0) & (seg_lo < g1[np.maximum(gap, 0)]) & (owner >= 0)
    gap, owner, seg_len = gap[inside], owner[inside], seg_len[inside]
    label = np.full(len(g0), -1, np.int64)
    own = np.zeros(len(g0), np.int64)
    if not len(gap):
        return label, own
    # Time per (gap, owner): runs of equal pairs once sorted.
    o = np.lexsort((owner, gap))
    gap, owner, seg_len = gap[o], owner[o], seg_len[o]
    first_of = np.flatnonzero(np.r_[True, (gap[1:] != gap[:-1]) | (owner[1:] != owner[:-1])])
    total = np.add.reduceat(seg_len, first_of)
    kgap, kown = gap[first_of], owner[first_of]
    # Per gap the owner with the most time: sort by (gap, -time), take each gap's first.
    o = np.lexsort((-total, kgap))
    first = o[np.r_[True, kgap[o][1:] != kgap[o][:-1]]]
    label[kgap[first]] = kown[first]
    own[kgap[first]] = total[first]
    return label, own


class NoiseExplainer:
    """`irqlab explain` of a noise run: its gaps are classified once, after the run,
    into its summary's ``noise`` object; there is no spike-by-spike account to give, so
    the command says where the classes are (one line, exit 2)."""

    kind = "noise"
    title = "noise (host tracefs around the busy loop)"
    outputs = ()

    def outputs_hint(self, run: RunRow) -> str:
        return ""

    def explain(self, store: Store, run: RunRow, request: Request,
                progress: Progress) -> Explanation:
        raise StoreError(f"run {run.run_id} is a noise run: its gaps are classified in its "
                         f"summary (`irqlab show {run.run_id}`: the noise lines, or "
                         f"--json's `noise.classes`), not explained one by one")
