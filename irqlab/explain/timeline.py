"""Who did what, when: thread states, CPU occupancy and interrupt intervals.

prev_state of sched_switch (include/trace/events/sched.h, __trace_sched_switch_state):
0 = still runnable (preempted; bit TASK_REPORT_MAX, 0x100 here, adds "+"), 1 = S,
2 = D, 4 = T (stopped), 8 = t (traced), 0x80 = I (idle kernel thread).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from irqlab.explain.load import Trace

RUNNING, RUNNABLE, SLEEPING, STOPPED = "running", "runnable", "sleeping", "stopped"
_STOP_BITS = 0x4 | 0x8
SOFTIRQ_NAMES = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED",
                 "HRTIMER", "RCU")


@dataclass
class Segment:
    start: int
    end: int
    state: str
    cpu: int                       # CPU it ran on / was switched out of / will run on
    waker: int = -1                # for sleeping: the task whose wakeup ended it
    tid: int = -1


@dataclass
class ThreadTimeline:
    tid: int
    segments: list[Segment] = field(default_factory=list)
    starts: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def finish(self) -> None:
        self.starts = np.array([s.start for s in self.segments], np.int64)

    def between(self, a: int, b: int) -> list[tuple[Segment, int, int]]:
        """Segments overlapping [a, b], with their clipped bounds."""
        if not self.segments:
            return []
        i = max(0, int(np.searchsorted(self.starts, a, "right")) - 1)
        out = []
        segs = self.segments
        while i < len(segs) and segs[i].start < b:     # no slicing: lists can be huge
            s = segs[i]
            lo, hi = max(a, s.start), min(b, s.end)
            if hi > lo:
                out.append((s, lo, hi))
            i += 1
        return out

    def state_at(self, t: int) -> Segment | None:
        i = int(np.searchsorted(self.starts, t, "right")) - 1
        if i < 0 or t >= self.segments[i].end:
            return None
        return self.segments[i]


def thread_timelines(trace: Trace, tids: list[int], end_ts: int) -> dict[int, ThreadTimeline]:
    """States of the given threads from sched_switch and sched_waking."""
    sw, wk = trace.t("sched_switch"), trace.t("sched_waking")
    tidarr = np.array(tids, np.int64)
    evs: list[tuple[int, int, int, int, int, int]] = []   # ts, kind, tid, cpu, arg, arg2
    # Select with numpy, then walk plain Python lists (numpy scalars are slow one by one).
    if len(sw):
        prev, nxt = sw["prev_pid"].astype(np.int64), sw["next_pid"].astype(np.int64)
        i = np.flatnonzero(np.isin(prev, tidarr))
        evs += zip(sw["ts"][i].tolist(), [0] * len(i), prev[i].tolist(), sw["cpu"][i].tolist(),
                   sw["prev_state"][i].tolist(), [0] * len(i))
        i = np.flatnonzero(np.isin(nxt, tidarr))
        evs += zip(sw["ts"][i].tolist(), [1] * len(i), nxt[i].tolist(), sw["cpu"][i].tolist(),
                   [0] * len(i), [0] * len(i))
    if len(wk):
        pid = wk["pid"].astype(np.int64)
        i = np.flatnonzero(np.isin(pid, tidarr))
        evs += zip(wk["ts"][i].tolist(), [2] * len(i), pid[i].tolist(),
                   wk["target_cpu"][i].tolist(), wk["common_pid"][i].tolist(), [0] * len(i))
    evs.sort()
    out = {t: ThreadTimeline(t) for t in tids}
    cur: dict[int, Segment] = {}
    for ts, kind, tid, cpu, arg, _ in evs:
        seg = cur.get(tid)
        if kind == 0:                                     # switched out
            if seg is not None:
                seg.end = ts
            state = (RUNNABLE if (arg & 0xFF) == 0 else
                     STOPPED if arg & _STOP_BITS else SLEEPING)
            cur[tid] = Segment(ts, end_ts, state, cpu, tid=tid)
        elif kind == 1:                                   # switched in
            if seg is not None:
                seg.end = ts
                if seg.state == RUNNABLE:
                    seg.cpu = cpu                         # where it waited to run
            cur[tid] = Segment(ts, end_ts, RUNNING, cpu, tid=tid)
        else:                                             # waking
            if seg is None or seg.state in (SLEEPING, STOPPED):
                if seg is not None:
                    seg.end = ts
                    seg.waker = arg
                    out[tid].segments.append(seg)
                cur[tid] = Segment(ts, end_ts, RUNNABLE, cpu, tid=tid)
            continue
        if seg is not None:
            out[tid].segments.append(seg)
    for tid, seg in cur.items():
        out[tid].segments.append(seg)
    for tl in out.values():
        tl.segments.sort(key=lambda s: s.start)
        tl.finish()
    return out


@dataclass
class Intervals:
    """Sorted, non-overlapping intervals of one kind on one CPU, each with a label."""

    start: np.ndarray
    end: np.ndarray
    label: list[str]

    def overlapping(self, a: int, b: int) -> list[tuple[int, int, str]]:
        i = max(0, int(np.searchsorted(self.end, a, "right")))
        out = []
        while i < len(self.start) and self.start[i] < b:
            lo, hi = max(a, int(self.start[i])), min(b, int(self.end[i]))
            if hi > lo:
                out.append((lo, hi, self.label[i]))
            i += 1
        return out


def _pair(ts_in, cpu_in, lab_in, ts_out, cpu_out) -> dict[int, tuple]:
    """Entry/exit pairs per CPU: an entry directly followed by an exit on that CPU."""
    ts = np.concatenate([ts_in, ts_out]).astype(np.int64)
    cpu = np.concatenate([cpu_in, cpu_out]).astype(np.int64)
    kind = np.concatenate([np.ones(len(ts_in), np.int8), np.zeros(len(ts_out), np.int8)])
    lab = np.concatenate([np.asarray(lab_in, dtype=object),
                          np.full(len(ts_out), None, dtype=object)])
    order = np.lexsort((ts, cpu))
    ts, cpu, kind, lab = ts[order], cpu[order], kind[order], lab[order]
    ok = np.flatnonzero((kind[:-1] == 1) & (kind[1:] == 0) & (cpu[:-1] == cpu[1:]))
    out = {}
    for c in np.unique(cpu[ok]).tolist():
        sel = ok[cpu[ok] == c]
        out[c] = (ts[sel], ts[sel + 1], lab[sel].tolist())
    return out


def irq_intervals(trace: Trace) -> tuple[dict[int, Intervals], dict[int, Intervals]]:
    """(hard, soft) intervals per CPU; hard = irq handlers and x86 system vectors."""
    hard_parts: dict[int, list[tuple]] = {}
    e, x = trace.t("irq_handler_entry"), trace.t("irq_handler_exit")
    pairs = []
    if len(e) and len(x):
        names = [f"irq {i} {n}" for i, n in zip(e["irq"].tolist(), e["name"].tolist())]
        pairs.append(_pair(e["ts"], e["cpu"], names, x["ts"], x["cpu"]))
    for name in list(trace.tables):
        if name.endswith("_entry") and name[:-6] + "_exit" in trace.tables and name not in (
                "irq_handler_entry", "softirq_entry", "hrtimer_expire_entry"):
            e, x = trace.t(name), trace.t(name[:-6] + "_exit")
            if len(e):
                pairs.append(_pair(e["ts"], e["cpu"], [f"vector {name[:-6]}"] * len(e),
                                   x["ts"], x["cpu"]))
    for p in pairs:
        for c, v in p.items():
            hard_parts.setdefault(c, []).append(v)
    soft: dict[int, Intervals] = {}
    e, x = trace.t("softirq_entry"), trace.t("softirq_exit")
    if len(e) and len(x):
        names = [f"softirq {SOFTIRQ_NAMES[v] if v < len(SOFTIRQ_NAMES) else v}"
                 for v in e["vec"].tolist()]
        for c, (s, t, lab) in _pair(e["ts"], e["cpu"], names, x["ts"], x["cpu"]).items():
            soft[c] = Intervals(s, t, lab)
    hard: dict[int, Intervals] = {}
    for c, parts in hard_parts.items():
        s = np.concatenate([p[0] for p in parts])
        t = np.concatenate([p[1] for p in parts])
        lab = [x for p in parts for x in p[2]]
        o = np.argsort(s, kind="stable")
        hard[c] = Intervals(s[o], t[o], [lab[i] for i in o.tolist()])
    return hard, soft


@dataclass
class CpuRuns:
    """Which task ran on each CPU: switch times and the task switched in."""

    ts: dict[int, np.ndarray]
    pid: dict[int, np.ndarray]
    comm: dict[int, np.ndarray]

    def pieces(self, cpu: int, a: int, b: int) -> list[tuple[int, int, int, str]]:
        """(lo, hi, pid, comm) of the tasks on ``cpu`` during [a, b]; pid -1 = unknown."""
        ts = self.ts.get(cpu)
        if ts is None or not len(ts):
            return [(a, b, -1, "?")]
        i = int(np.searchsorted(ts, a, "right")) - 1
        out = []
        t = a
        while t < b:
            nxt = int(ts[i + 1]) if i + 1 < len(ts) else b
            hi = min(b, nxt)
            if i < 0:
                out.append((t, hi, -1, "?"))
            else:
                out.append((t, hi, int(self.pid[cpu][i]), _s(self.comm[cpu][i])))
            t, i = hi, i + 1
        return out


def _s(raw) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def cpu_runs(trace: Trace) -> CpuRuns:
    sw = trace.t("sched_switch")
    ts, pid, comm = {}, {}, {}
    if len(sw):
        cpus = sw["cpu"]
        for c in np.unique(cpus).tolist():
            sel = np.flatnonzero(cpus == c)
            ts[c] = sw["ts"][sel].astype(np.int64)
            pid[c] = sw["next_pid"][sel]
            comm[c] = sw["next_comm"][sel]
    return CpuRuns(ts, pid, comm)
