"""Who did what, when: thread states, CPU occupancy and interrupt intervals.

prev_state of sched_switch (include/trace/events/sched.h, __trace_sched_switch_state):
0 = still runnable (preempted; bit TASK_REPORT_MAX, 0x100 here, adds "+"), 1 = S,
2 = D, 4 = T (stopped), 8 = t (traced), 0x80 = I (idle kernel thread).

Context switches the kernel did not record. Every event carries ``common_pid``, the task
current on its CPU when it was written (tracing_generic_entry_update()), so consecutive
``sched_switch`` events of a CPU must chain: ``next_pid`` of one is ``prev_pid`` of the
next. Some kernels do not emit the switch at all in some contexts (seen here: every switch
*out of* the idle task of one CPU and out of some agent threads is absent, in ftrace and in
perf alike, while nothing is lost from the ring buffer). A broken chain is repaired from the
events inside the gap. Bounds: the switch from A to B happened after A's last event there
and after B's last wakeup (``sched_waking``/``sched_wakeup``) before B's first event there,
and before that first event of B (else before the next recorded switch). Point: it is put
at the lower bound, the earliest possible moment, and marked inferred; the upper bound is
kept as ``ts_max``. Why the earliest: the missing switches are mostly idle exits, and the
idle task yields as soon as a task is runnable on its CPU (interrupts and softirqs that
delay it write events of the idle task, which move the lower bound). Measured on this
kernel's CPU 0, whose idle exits are recorded (hide them, infer them back; two captures of
tests/integration/test_explain.py, 4,400-6,200 exits each): the true switch comes a median
2-6 us and at most ~250 us after the earliest point, while the latest point (B's first
event) is off by a median 24 us and up to 30 ms, the midpoint by up to 15 ms: a task often
writes no event until the next tick. The earliest point is wrong when something the trace
cannot see delays the switch (e.g. the host not running this vCPU for a while): the time
then lands on B, and only ``ts_max`` (and the sample's note) shows the doubt.

Everything here is vectorised with numpy: a capture of a gigabyte holds tens of millions
of events, and the busiest task has millions of switches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from irqlab.explain import fastsetup, gapscan
from irqlab.explain.load import Table, Trace
from irqlab.trace import fastpath
from irqlab.trace.ringbuf import Coded, Columns, unique_rows

RUNNING, RUNNABLE, SLEEPING, STOPPED, UNKNOWN = (
    "running", "runnable", "sleeping", "stopped", "unknown")
_STATE_NAMES = (RUNNING, RUNNABLE, SLEEPING, STOPPED, UNKNOWN)
_RUNNING, _RUNNABLE, _SLEEPING, _STOPPED, _UNKNOWN = range(5)


def state_code(name: str) -> int:
    """The int8 code of a state name in ThreadTimeline.states."""
    return _STATE_NAMES.index(name)

_STOP_BITS = 0x4 | 0x8
PREV_STATE_UNKNOWN = -1          # prev_state of an inferred switch (the kernel never said)
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
    """One thread's states as parallel arrays, sorted by start (segments do not overlap)."""

    tid: int
    starts: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    ends: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    states: np.ndarray = field(default_factory=lambda: np.empty(0, np.int8))
    cpus: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    wakers: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    # Latest possible end: differs from ``ends`` where an inferred switch ended it.
    ends_max: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def __len__(self) -> int:
        return len(self.starts)

    def segment(self, i: int) -> Segment:
        return Segment(int(self.starts[i]), int(self.ends[i]), _STATE_NAMES[self.states[i]],
                       int(self.cpus[i]), int(self.wakers[i]), self.tid)

    @property
    def segments(self) -> list[Segment]:
        return [self.segment(i) for i in range(len(self))]

    def between(self, a: int, b: int) -> list[tuple[Segment, int, int]]:
        """Segments overlapping [a, b], with their clipped bounds."""
        starts = self.starts
        n = len(starts)
        if not n:
            return []
        # The array's own method: np.searchsorted's dispatch wrapper costs as much as the
        # search (called for each of tens of thousands of windows).
        i = max(0, int(starts.searchsorted(a, "right")) - 1)
        out = []
        while i < n:
            s = int(starts[i])
            if s >= b:
                break
            lo, hi = max(a, s), min(b, int(self.ends[i]))
            if hi > lo:
                out.append((self.segment(i), lo, hi))
            i += 1
        return out

    def state_at(self, t: int, between: list[tuple[Segment, int, int]] | None = None
                 ) -> Segment | None:
        """The segment holding ``t``. ``between``: ``self.between(a, t)`` for some ``a``,
        when at hand: its last segment is the answer when it runs past ``t`` (segments do
        not overlap), without a search (explain asks it of every sample)."""
        if between and between[-1][0].end > t:
            return between[-1][0]
        i = int(self.starts.searchsorted(t, "right")) - 1
        if i < 0 or t >= self.ends[i]:
            return None
        return self.segment(i)

    def spans(self, state: str, widest: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the segments in ``state``; ``widest`` uses the latest possible
        ends (the starts are already the earliest possible)."""
        sel = self.states == _STATE_NAMES.index(state)
        return self.starts[sel], (self.ends_max if widest else self.ends)[sel]


# -- context switches, with the unrecorded ones put back ---------------------------------

def complete_switches(trace: Trace) -> Table:
    """``sched_switch`` in time order plus inferred rows for broken chains (module doc).

    Columns: ts, cpu, prev_pid, prev_state, next_pid, next_comm, ``inferred`` (bool) and
    ``ts_max`` (latest possible time; = ts when recorded).
    """
    sw = trace.t("sched_switch")
    n = len(sw)
    if not n:
        return Table("sched_switch", {"ts": np.empty(0, np.uint64)})
    names = ("ts", "cpu", "prev_pid", "prev_state", "next_pid", "next_comm")
    # next_comm as decoded: codes into its distinct names when decoding gave it so (4
    # bytes a row through the merge below and cpu_runs() instead of 16).
    comm_coded = sw.coded("next_comm")
    cols = {k: comm_coded.codes if k == "next_comm" and comm_coded is not None
            else np.asarray(sw[k]) for k in names}
    ts = cols["ts"]
    # Stamps are below 2**63: a view, not a copy, of an unsigned column.
    ts = ts.view(np.int64) if ts.dtype == np.uint64 else ts.astype(np.int64)
    # Per CPU, in time order, and the gaps where a CPU's chain breaks (C, else numpy).
    gaps = gapscan.Gaps.of_switches(ts, cols["cpu"], cols["prev_pid"], cols["next_pid"])
    inferred = _infer_scanned(trace, gaps) if gaps is not None else None
    if gaps is None or (inferred is None and gaps.ngaps):
        inferred = _infer(trace, *_sorted_by_cpu(cols, ts))
    # Freed before the merged columns are made: (with ringbuf.heap_reuse) they take this
    # memory, already faulted in, instead of as much fresh memory.
    del gaps
    out = dict(cols)
    out["ts"] = ts
    out["inferred"] = np.zeros(n, bool)
    # A merge below makes a new column anyway: no copy to merge from.
    out["ts_max"] = ts if inferred is not None else ts.copy()
    if inferred is not None:
        i_ts, i_max, i_cpu, i_prev, i_next = inferred
        comm = _comm_of(sw, i_next)
        k = len(i_ts)
        # pid 0 is a different idle task on each CPU.
        idle = np.array([b"swapper/%d" % c for c in range(int(i_cpu.max()) + 1)],
                        dtype=comm.dtype)[i_cpu] if k else comm
        comm = np.where(i_next == 0, idle, comm)
        if comm_coded is not None:
            comm, comm_values = _codes_for(comm_coded.values, comm)
            comm_coded = Coded(comm_coded.codes, comm_values)
        add = {"ts": i_ts, "cpu": i_cpu, "prev_pid": i_prev,
               # Unknown: thread_timelines() reads ``inferred`` and lets the thread's next
               # event tell (woken: it slept; switched in: it was preempted).
               "prev_state": np.zeros(k, np.int64), "next_pid": i_next, "next_comm": comm,
               "inferred": np.ones(k, bool), "ts_max": i_max}
        # Merge the two time-ordered lists (recorded first on equal stamps).
        o = np.argsort(i_ts, kind="stable")
        at = fastsetup.insert_positions(ts, i_ts[o])
        if at is None:
            at = np.searchsorted(ts, i_ts[o], "right") + np.arange(k)
        is_add = np.zeros(n + k, bool)
        is_add[at] = True
        keep = None
        merged = {}
        for key, v in out.items():
            # C: runs of kept rows copied whole (no index array over millions of rows).
            col = fastsetup.insert_rows(v, add[key][o].astype(v.dtype), at)
            if col is None:
                if keep is None:
                    keep = np.flatnonzero(~is_add)    # once, not a mask pass per column
                col = np.empty(n + k, v.dtype)
                col[keep] = v
                col[at] = add[key][o].astype(v.dtype)
            merged[key] = col
        out = merged
    if comm_coded is not None:
        out["next_comm"] = Coded(out["next_comm"], comm_coded.values)
    return Table("sched_switch", Columns(out))


def _codes_for(values: np.ndarray, names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes of ``names`` into ``values``, ``values`` with the names it lacked appended):
    the inferred switches' names (a few thousand) joining a coded column."""
    values = values.astype(np.result_type(values, names))
    names = np.ascontiguousarray(names, values.dtype)
    # The names' distinct values first (a name per task: few), each then looked up once.
    found = None
    if len(names) and names.dtype.itemsize % 8 == 0:
        found = fastpath.factorize_rows(names.view(np.uint8).reshape(len(names), -1)
                                        .view("<u8"))
    if found is None:
        _, rep, inv = np.unique(names, return_index=True, return_inverse=True)
        found = rep, inv.ravel()
    rep, inv = found
    index = {v: i for i, v in reversed(list(enumerate(values.tolist())))}
    new = []
    for name in names[rep].tolist():
        if name not in index:
            index[name] = len(values) + len(new)
            new.append(name)
    lut = np.array([index[name] for name in names[rep].tolist()], np.int32)
    if new:
        values = np.concatenate([values, np.array(new, values.dtype)])
    return lut[inv] if len(names) else np.zeros(0, np.int32), values


def _by_cpu(cpu: np.ndarray) -> np.ndarray:
    """Stable order by CPU: one pass per CPU (a handful) instead of a sort of every row."""
    cpus = _small_ints(cpu)
    if len(cpus) > 16:
        return np.argsort(cpu, kind="stable")
    if len(cpus) == 1:
        return np.arange(len(cpu))
    return np.concatenate([np.flatnonzero(cpu == c) for c in cpus])


def _sorted_by_cpu(cols: dict[str, np.ndarray], ts: np.ndarray) -> tuple[np.ndarray, ...]:
    """(cpu, ts, prev_pid, next_pid) of the switches per CPU in time order, and
    ``broken``: the indices (in that order) of the switches whose next task is not the
    following switch's previous one. The table is in time order, so a stable sort by CPU
    keeps equal stamps in ring order. The columns stay in their own (narrower) types: only
    the few rows of broken chains are widened (in _infer)."""
    order = _by_cpu(cols["cpu"])
    c_s, t_s = cols["cpu"][order], ts[order]
    p_s, n_s = cols["prev_pid"][order], cols["next_pid"][order]
    broken = np.flatnonzero((c_s[1:] == c_s[:-1]) & (n_s[:-1] != p_s[1:]))
    return c_s, t_s, p_s, n_s, broken


def _event_tables(trace: Trace) -> list[Table]:
    """The tables whose events tell which task ran (all but the switches)."""
    return [tb for tb in trace.tables.values()
            if len(tb) and "common_pid" in tb.cols and tb.name != "sched_switch"]


def _infer_scanned(trace: Trace, gaps: gapscan.Gaps) -> tuple[np.ndarray, ...] | None:
    """:func:`_infer` through gaps.c's scans (None when one fails: then numpy's)."""
    if not gaps.ngaps:
        return None
    last_a, first_b = gaps.g_t0.copy(), gaps.g_t1.copy()
    other_u8 = np.zeros(gaps.ngaps, np.uint8)
    tables = _event_tables(trace)
    if not gaps.bounds(tables, last_a, first_b, other_u8):
        return None
    other = other_u8.astype(bool)
    want = (other | (last_a > first_b)).astype(np.uint8)
    found = gaps.events(tables, want) if want.any() else []
    if found is None:
        return None
    return _infer_finish(trace, gaps.g_cpu, gaps.g_t0, gaps.g_t1, gaps.g_a, gaps.g_b,
                         last_a, first_b, other, [f[0] for f in found],
                         [f[1] for f in found], [f[2] for f in found])


def _infer(trace: Trace, c_s: np.ndarray, t_s: np.ndarray, p_s: np.ndarray,
           n_s: np.ndarray, broken: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """Inferred switches (time, latest time, cpu, prev pid, next pid) for the broken chains
    ``broken`` (indices of the switch before each, in the (cpu, time) order given), or
    None when there is none. The reference of :func:`_infer_scanned`."""
    if not len(broken):
        return None
    # Gap g: (t0, t1) on one CPU, between switch broken[g] (next = A) and the next (prev = B).
    g_cpu, g_t0, g_t1 = c_s[broken].astype(np.int64), t_s[broken], t_s[broken + 1]
    g_a, g_b = n_s[broken].astype(np.int64), p_s[broken + 1].astype(np.int64)
    ng = len(broken)
    # The common case, one missing switch A -> B: A's last event and B's first in the gap
    # bound it. A gap where a third task shows up, or A again after B, is "complex".
    last_a, first_b, other = g_t0.copy(), g_t1.copy(), np.zeros(ng, bool)
    ev_gap, ev_ts, ev_pid = [], [], []
    tables = _event_tables(trace)
    cpus = distinct(g_cpu).tolist()
    # Per CPU: its switch times (sorted), and for each switch the gap that follows it
    # (-1: the chain holds there).
    sw_of: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for cpu in cpus:
        lo_sw, hi_sw = np.searchsorted(c_s, [cpu, cpu + 1])
        gap_after = np.full(hi_sw - lo_sw, -1, np.int64)
        gi = np.flatnonzero(g_cpu == cpu)
        gap_after[broken[gi] - lo_sw] = gi
        sw_of[cpu] = (t_s[lo_sw:hi_sw], gap_after)
    for tb in tables:
        tcpu = tb["cpu"]
        for cpu in cpus:
            sel = np.flatnonzero(tcpu == cpu) if len(cpus) > 1 or np.any(tcpu != cpu) \
                else None
            t = (tb["ts"][sel] if sel is not None else tb["ts"]).astype(np.int64)
            if not len(t):
                continue
            # The gap of each event: the last switch of its CPU strictly before it, if a
            # gap follows that switch and the event is strictly before the next switch
            # (switches of one CPU are time ordered, so no switch lies inside a gap).
            sw_t, gap_after = sw_of[cpu]
            j = np.searchsorted(sw_t, t, "left") - 1
            g = gap_after[np.maximum(j, 0)]
            inside = np.flatnonzero((j >= 0) & (g >= 0))
            if not len(inside):
                continue
            g = g[inside]
            inside = inside[t[inside] < g_t1[g]]
            if not len(inside):
                continue
            g = gap_after[j[inside]]
            t = t[inside]
            pid = tb["common_pid"][sel[inside] if sel is not None else inside].astype(np.int64)
            is_a, is_b = pid == g_a[g], pid == g_b[g]
            # Within a table, events (and so their gaps) are in time order: A's last event
            # of a gap is its last one in the array, B's first the first one.
            ga, ta = g[is_a], t[is_a]
            if len(ga):
                end = np.flatnonzero(np.r_[ga[1:] != ga[:-1], True])
                ge = ga[end]
                last_a[ge] = np.maximum(last_a[ge], ta[end])
            gb, tb_ = g[is_b], t[is_b]
            if len(gb):
                beg = np.flatnonzero(np.r_[True, gb[1:] != gb[:-1]])
                ge = gb[beg]
                first_b[ge] = np.minimum(first_b[ge], tb_[beg])
            other[g[~(is_a | is_b)]] = True
            ev_gap.append(g), ev_ts.append(t), ev_pid.append(pid)
    return _infer_finish(trace, g_cpu, g_t0, g_t1, g_a, g_b, last_a, first_b, other,
                         ev_gap, ev_ts, ev_pid)


def _infer_finish(trace: Trace, g_cpu: np.ndarray, g_t0: np.ndarray, g_t1: np.ndarray,
                  g_a: np.ndarray, g_b: np.ndarray, last_a: np.ndarray,
                  first_b: np.ndarray, other: np.ndarray, ev_gap: list, ev_ts: list,
                  ev_pid: list) -> tuple[np.ndarray, ...]:
    """The inferred switches from the gaps' bounds and their events (the events of
    simple gaps may be included or not: only the others' are read)."""
    simple = ~other & (last_a <= first_b)
    s = np.flatnonzero(simple)
    lo, hi, old, new, gap = last_a[s], first_b[s], g_a[s], g_b[s], s
    c = np.flatnonzero(~simple)
    if len(c):
        # Complex gaps: every change of the current task between consecutive events.
        keep = [~simple[g] for g in ev_gap]
        gap_c = np.concatenate([c] + [g[k] for g, k in zip(ev_gap, keep)] + [c])
        rts = np.concatenate([g_t0[c]] + [t[k] for t, k in zip(ev_ts, keep)] + [g_t1[c]])
        pid = np.concatenate([g_a[c]] + [p[k] for p, k in zip(ev_pid, keep)] + [g_b[c]])
        rank = np.concatenate([np.zeros(len(c), np.int8)]
                              + [np.ones(int(k.sum()), np.int8) for k in keep]
                              + [np.full(len(c), 2, np.int8)])
        o = np.lexsort((rank, rts, gap_c))
        gap_c, rts, pid = gap_c[o], rts[o], pid[o]
        ch = np.flatnonzero((gap_c[1:] == gap_c[:-1]) & (pid[1:] != pid[:-1]))
        lo = np.concatenate([lo, rts[ch]])
        hi = np.concatenate([hi, rts[ch + 1]])
        old = np.concatenate([old, pid[ch]])
        new = np.concatenate([new, pid[ch + 1]])
        gap = np.concatenate([gap, gap_c[ch]])
    at = np.maximum(lo, _last_wakeup_before(trace, new, hi, lo))
    return at, hi, g_cpu[gap], old, new


def _last_wakeup_before(trace: Trace, pids: np.ndarray, before: np.ndarray,
                        floor: np.ndarray) -> np.ndarray:
    """Latest sched_waking/sched_wakeup of each pid strictly before ``before`` (else floor):
    a task cannot start running before it was woken."""
    out = floor.copy()
    parts_ts, parts_pid = [], []
    if not len(pids):
        return out
    # Membership and rank by table lookup (pids are small integers): one gather, no sort.
    uniq = distinct(pids)
    lut = np.full(int(pids.max()) + 2, -1, np.int64)
    lut[uniq] = np.arange(len(uniq))
    tables = [tb for tb in (trace.t("sched_waking"), trace.t("sched_wakeup"))
              if len(tb) and "pid" in tb.cols]
    if gapscan.available():
        q_rank = lut[pids]
        got = [gapscan.last_event_before(tb, lut, len(uniq), q_rank, before)
               for tb in tables]
        if all(g is not None for g in got):
            for found, has in got:
                out[has] = np.maximum(out[has], found[has])
            return out
    parts_rank = []
    for name in ("sched_waking", "sched_wakeup"):
        tb = trace.t(name)
        if len(tb) and "pid" in tb.cols:
            wp = tb["pid"]
            rank = lut[np.clip(wp, 0, len(lut) - 1)]
            keep = np.flatnonzero((rank >= 0) & (wp >= 0) & (wp < len(lut) - 1))
            parts_ts.append(tb["ts"][keep].astype(np.int64))
            parts_pid.append(wp[keep].astype(np.int64))
            parts_rank.append(rank[keep])
    if not parts_ts:
        return out
    wts, wpid = np.concatenate(parts_ts), np.concatenate(parts_pid)
    if not len(wts):
        return out
    # One sorted key (pid rank, time) answers every query with one searchsorted.
    t_min = min(int(wts.min()), int(before.min()))
    span = max(int(wts.max()), int(before.max())) - t_min + 1
    if span * (len(uniq) + 1) >= 1 << 62:                 # would overflow: per pid
        for p in uniq.tolist():
            t = np.sort(wts[wpid == p])
            q = np.flatnonzero(pids == p)
            k = np.searchsorted(t, before[q], "left") - 1
            has = k >= 0
            out[q[has]] = np.maximum(floor[q[has]], t[k[has]])
        return out
    key = np.concatenate(parts_rank) * span + (wts - t_min)
    key.sort()
    q_rank = np.searchsorted(uniq, pids)
    k = np.searchsorted(key, q_rank * span + (before - t_min), "left") - 1
    has = (k >= 0) & (key[np.maximum(k, 0)] // span == q_rank)
    found = key[np.maximum(k, 0)] % span + t_min
    out[has] = np.maximum(floor[has], found[has])
    return out


def _comm_of(sw: Table, pids: np.ndarray) -> np.ndarray:
    """A comm for each pid, from a recorded switch that names it: the first one switching
    it in, else the first one switching it out."""
    comm_dtype = _comm_dtype(sw, "next_comm")
    if not len(pids):
        return np.zeros(0, comm_dtype)
    want = distinct(pids[pids >= 0])
    if not len(want):
        return np.full(len(pids), b"?", comm_dtype)
    # pid -> rank of the wanted pid (-1: not wanted), by table lookup: pids are small.
    lut = np.full(int(want[-1]) + 1, -1, np.int64)
    lut[want] = np.arange(len(want))
    src_next = _first_index(sw["next_pid"], lut, len(want))
    src_prev = _first_index(sw["prev_pid"], lut, len(want), src_next < 0)
    comms = np.full(len(want), b"?", comm_dtype)
    has = src_next >= 0
    comms[has] = _rows(sw, "next_comm", src_next[has])
    has = (src_next < 0) & (src_prev >= 0)
    comms[has] = _rows(sw, "prev_comm", src_prev[has]).astype(comm_dtype)
    out = np.full(len(pids), b"?", comm_dtype)
    ok = pids >= 0
    out[ok] = comms[lut[pids[ok]]]
    return out


def _comm_dtype(tb: Table, key: str) -> np.dtype:
    """A string column's dtype, without building it when it is coded."""
    coded = tb.coded(key)
    return coded.values.dtype if coded is not None else tb[key].dtype


def _rows(tb: Table, key: str, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` of a column, without building it when it is coded."""
    coded = tb.coded(key)
    return coded.values[coded.codes[idx]] if coded is not None else tb[key][idx]


def _first_index(col: np.ndarray, lut: np.ndarray, nkeys: int,
                 todo: np.ndarray | None = None) -> np.ndarray:
    """Index of the first element of ``col`` whose key ``lut[value]`` is k, for each key
    k (-1: none; only keys where ``todo`` is set are looked for). Read in growing chunks:
    the tasks of a gap are usually switched early in the capture, so most of a column
    with millions of rows is never touched."""
    first = np.full(nkeys, -1, np.int64)
    missing = np.ones(nkeys, bool) if todo is None else todo.copy()
    n, lo, step = len(col), 0, 1 << 14
    big = np.iinfo(np.int64).max
    while lo < n and missing.any():
        c = np.asarray(col[lo:lo + step]).astype(np.int64)
        inside = (c >= 0) & (c < len(lut))
        key = np.where(inside, lut[np.where(inside, c, 0)], -1)
        hit = np.flatnonzero(key >= 0)
        if len(hit):
            at = np.full(nkeys, big, np.int64)
            np.minimum.at(at, key[hit], hit)
            new = missing & (at < big)
            first[new] = at[new] + lo
            missing &= ~new
        lo += step
        step *= 2
    return first


# -- thread states -----------------------------------------------------------------------

_WOKEN_FROM = np.zeros(len(_STATE_NAMES), bool)           # states a waking ends
_WOKEN_FROM[[_SLEEPING, _STOPPED, _UNKNOWN]] = True


def _state_after_switch_out(sw: Table, i: np.ndarray) -> np.ndarray:
    """State (int8) a thread enters at switch-outs ``i``, from prev_state."""
    arg = sw["prev_state"][i].astype(np.int64)
    if "inferred" in sw.cols:                                  # the kernel never said
        arg = np.where(sw["inferred"][i], PREV_STATE_UNKNOWN, arg)
    state = np.where((arg & 0xFF) == 0, _RUNNABLE,
                     np.where(arg & _STOP_BITS, _STOPPED, _SLEEPING)).astype(np.int8)
    state[arg == PREV_STATE_UNKNOWN] = _UNKNOWN
    return state


def _member(col: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``np.isin(col, keys)``; a few keys by comparisons (no table of every pid)."""
    if len(keys) > 4:
        return np.isin(col, keys)
    hit = col == keys[0]
    for k in keys[1:]:
        hit |= col == k
    return hit


def _by_thread_time(tid: np.ndarray, ts: np.ndarray, tids: np.ndarray) -> np.ndarray:
    """Stable order by (thread, time): = np.lexsort((kind, ts, tid)) for events laid out
    as switch-outs, switch-ins, wakings (kind 0, 1, 2 in that order), each part in time
    order. One stable sort of a single key (timsort, which merges the few sorted runs)
    instead of a sort by three keys."""
    if len(tids) == 1:
        return np.argsort(ts, kind="stable")
    t_min = int(ts.min())
    span = int(ts.max()) - t_min + 1
    if span * len(tids) >= 1 << 62:                       # would overflow
        return np.lexsort((ts, tid))
    key = np.searchsorted(tids, tid) * span + (ts - t_min)
    return np.argsort(key, kind="stable")



def wakings_of(trace: Trace, tidarr: np.ndarray) -> Table:
    """The wakings of the threads ``tidarr`` (sorted): their sched_waking rows and their
    sched_wakeup rows, merged in time order (columns ts, pid, target_cpu, common_pid).

    Why both: a waker that calls try_to_wake_up() while its target is still switching out
    (the target set itself sleeping, was dequeued, but has not left its CPU) writes
    sched_waking *before* the target's sleeping sched_switch, and the wake-up completes
    after it, on the target's CPU (ttwu_queue_wakelist(), kernel/sched/core.c), where
    sched_wakeup is written. A waking alone then counts for nothing (it falls while the
    thread ran) and the thread looked asleep until it next ran: a vCPU thread woken by
    QEMU's main loop this way, then kept off its CPU 2 ms by a SCHED_FIFO hog, was taken
    as halted (the guest's time) instead of preempted. The wakeup ends the sleep; the
    waker it carries is the one of the thread's latest sched_waking (its own
    ``common_pid`` is whatever ran on the target's CPU, often the idle task). In the
    common order (waking, then wakeup, both after the switch-out) the waking comes first
    and the wakeup changes nothing: only the first waking after a switch-out counts."""
    cols = ("ts", "pid", "target_cpu", "common_pid")
    parts = []
    for name in ("sched_waking", "sched_wakeup"):
        tb = trace.t(name)
        if len(tb) and all(c in tb.cols for c in cols):
            # the tables' own column types, which the C pass reads without a copy
            keep = np.flatnonzero(_member(tb["pid"], tidarr))
            parts.append({c: np.asarray(tb[c])[keep] for c in cols})
    if len(parts) < 2:                  # one of them not captured: as it is
        return Table("sched_waking", parts[0] if parts else {})
    waking, wakeup = parts
    if len(wakeup["ts"]) and len(waking["ts"]):
        # The waker of each wakeup: the same thread's latest waking at or before it, by
        # one sorted key (thread rank, time), as _by_thread_time orders events.
        t_min = int(min(waking["ts"].min(), wakeup["ts"].min()))
        span = int(max(waking["ts"].max(), wakeup["ts"].max())) - t_min + 1
        kw = np.searchsorted(tidarr, waking["pid"]) * span + \
            (waking["ts"].astype(np.int64) - t_min)
        ku = np.searchsorted(tidarr, wakeup["pid"]) * span + \
            (wakeup["ts"].astype(np.int64) - t_min)
        o = np.argsort(kw, kind="stable")
        j = np.searchsorted(kw[o], ku, "right") - 1
        same = (j >= 0) & (waking["pid"][o[np.maximum(j, 0)]] == wakeup["pid"])
        wakeup["common_pid"] = np.where(same, waking["common_pid"][o[np.maximum(j, 0)]],
                                        wakeup["common_pid"]).astype(
                                            wakeup["common_pid"].dtype)
    merged = {c: np.concatenate([waking[c], wakeup[c]]) for c in cols}
    o = np.argsort(merged["ts"], kind="stable")          # wakings first on equal times
    return Table("sched_waking", {c: merged[c][o] for c in cols})


def thread_timelines(trace: Trace, tids: list[int], end_ts: int,
                     switches: Table | None = None) -> dict[int, ThreadTimeline]:
    """States of the given threads from sched_switch (completed) and their wakings
    (wakings_of: sched_waking, and sched_wakeup for a wake-up that raced a switch-out).

    A waking only ends a sleeping, stopped or unknown state (it is the first waking after
    such a switch-out, or before the thread's first switch); a running or runnable thread
    is not changed by one. A runnable stretch ended by a switch-in is charged to the CPU
    it was switched in on (where it waited to run).
    """
    sw = switches if switches is not None else complete_switches(trace)
    if len(sw) and "ts_max" not in sw.cols:
        sw = Table(sw.name, {**sw.cols, "ts_max": sw["ts"]})
    tidarr = np.array(sorted(set(tids)), np.int64)
    out = {t: ThreadTimeline(t) for t in tids}
    if not len(tidarr):
        return out
    wk = wakings_of(trace, tidarr)
    # C: one ordered pass per thread over the switches and wakings (no sort of its events).
    fast = fastsetup.thread_timelines(sw.cols, wk.cols, len(wk), tidarr.tolist(), end_ts) \
        if len(sw) else None
    if fast is not None:
        for t, cols in fast.items():
            out[t] = ThreadTimeline(t, *cols)
        return out
    # Per event: time, kind (0 out, 1 in, 2 woken), thread, CPU, waker (wakings only),
    # latest possible time, and the state it starts (int8: computed on each part, so the
    # passes over the merged events move bytes, not 64-bit words).
    ts_l, kind_l, tid_l, cpu_l, arg_l, max_l, st_l = [], [], [], [], [], [], []
    if len(sw):
        prev, nxt = sw["prev_pid"], sw["next_pid"]
        i = np.flatnonzero(_member(prev, tidarr))               # switched out
        ts_l.append(sw["ts"][i]), kind_l.append(np.zeros(len(i), np.int8))
        tid_l.append(prev[i].astype(np.int64)), cpu_l.append(sw["cpu"][i].astype(np.int64))
        st_l.append(_state_after_switch_out(sw, i))
        arg_l.append(np.zeros(len(i), np.int64)), max_l.append(sw["ts_max"][i])
        i = np.flatnonzero(_member(nxt, tidarr))                # switched in
        ts_l.append(sw["ts"][i]), kind_l.append(np.ones(len(i), np.int8))
        tid_l.append(nxt[i].astype(np.int64)), cpu_l.append(sw["cpu"][i].astype(np.int64))
        st_l.append(np.full(len(i), _RUNNING, np.int8))
        arg_l.append(np.zeros(len(i), np.int64)), max_l.append(sw["ts_max"][i])
    if len(wk):
        pid = wk["pid"]
        i = np.flatnonzero(_member(pid, tidarr))                # woken
        w_ts = wk["ts"][i].astype(np.int64)
        ts_l.append(w_ts), kind_l.append(np.full(len(i), 2, np.int8))
        tid_l.append(pid[i].astype(np.int64))
        cpu_l.append(wk["target_cpu"][i].astype(np.int64))
        st_l.append(np.full(len(i), _RUNNABLE, np.int8))
        arg_l.append(wk["common_pid"][i].astype(np.int64)), max_l.append(w_ts)
    ts = np.concatenate(ts_l).astype(np.int64) if ts_l else np.empty(0, np.int64)
    if not len(ts):             # none of the threads appears in the capture
        return out
    kind = np.concatenate(kind_l)
    tid = np.concatenate(tid_l)
    cpu = np.concatenate(cpu_l)
    arg = np.concatenate(arg_l)
    tmax = np.concatenate(max_l).astype(np.int64)
    o = _by_thread_time(tid, ts, tidarr)                       # by thread, time, out<in<wake
    kind, tid, state = kind[o], tid[o], np.concatenate(st_l)[o]
    n = len(kind)
    new_tid = np.r_[True, tid[1:] != tid[:-1]]
    # Which wakings take effect: the first one after a sleeping/stopped/unknown switch-out,
    # or the first one of the thread before any switch.
    idx = np.arange(n)
    last_sw = np.maximum.accumulate(np.where((kind != 2) | new_tid, idx, 0))
    sw_before = (kind[last_sw] != 2)                          # the epoch starts at a switch
    epoch_state = np.where(sw_before, state[last_sw], np.int8(_SLEEPING))
    # The first waking of an epoch: right after its switch, or the thread's first event.
    first_after = np.where(sw_before, idx == last_sw + 1, idx == last_sw)
    eff = (kind != 2) | (first_after & _WOKEN_FROM[epoch_state])
    e = np.flatnonzero(eff)
    oe = o[e]
    ts, cpu, arg, tmax = ts[oe], cpu[oe], arg[oe], tmax[oe]
    kind, tid, state = kind[e], tid[e], state[e]
    m = len(e)
    last_of_tid = np.r_[tid[1:] != tid[:-1], True]
    nx = np.minimum(np.arange(m) + 1, m - 1)
    end = np.where(last_of_tid, np.maximum(end_ts, ts), ts[nx])
    end_max = np.where(last_of_tid, np.maximum(end_ts, ts), tmax[nx])
    ended_by = np.where(last_of_tid, -1, kind[nx])
    # An unknown state is known once it ends: woken = it slept, switched in = runnable.
    state = np.where((state == _UNKNOWN) & (ended_by == 2), _SLEEPING, state)
    state = np.where((state == _UNKNOWN) & (ended_by == 1), _RUNNABLE, state)
    cpu = np.where((state == _RUNNABLE) & (ended_by == 1), cpu[nx], cpu)
    waker = np.where(ended_by == 2, arg[nx], -1)
    bounds = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        t = int(tid[a])
        out[t] = ThreadTimeline(t, ts[a:b], end[a:b], state[a:b].astype(np.int8),
                                cpu[a:b], waker[a:b], end_max[a:b])
    return out


# -- interrupts ----------------------------------------------------------------------------

@dataclass
class Intervals:
    """Sorted, non-overlapping intervals of one kind on one CPU, each with a label."""

    start: np.ndarray
    end: np.ndarray
    label: np.ndarray                # object array of str

    def overlapping(self, a: int, b: int) -> list[tuple[int, int, str]]:
        i = max(0, int(self.end.searchsorted(a, "right")))
        out = []
        while i < len(self.start) and self.start[i] < b:
            lo, hi = max(a, int(self.start[i])), min(b, int(self.end[i]))
            if hi > lo:
                out.append((lo, hi, self.label[i]))
            i += 1
        return out


def _pair(ts_in, cpu_in, names: np.ndarray, codes: np.ndarray, ts_out,
          cpu_out) -> dict[int, tuple]:
    """Entry/exit pairs per CPU: an entry directly followed by an exit on that CPU.
    Entry ``i`` is labelled ``names[codes[i]]`` (small integer codes: object arrays of
    millions of labels are slow to shuffle)."""
    ts_in, ts_out = np.asarray(ts_in).astype(np.int64), np.asarray(ts_out).astype(np.int64)
    if _sorted(ts_in) and _sorted(ts_out):
        return _pair_sorted(ts_in, np.asarray(cpu_in), names, codes, ts_out,
                            np.asarray(cpu_out))
    ts = np.concatenate([ts_in, ts_out]).astype(np.int64)
    cpu = np.concatenate([cpu_in, cpu_out]).astype(np.int64)
    kind = np.concatenate([np.ones(len(ts_in), np.int8), np.zeros(len(ts_out), np.int8)])
    lab = np.concatenate([codes, np.full(len(ts_out), -1, np.int64)])
    order = np.lexsort((ts, cpu))
    ts, cpu, kind, lab = ts[order], cpu[order], kind[order], lab[order]
    ok = np.flatnonzero((kind[:-1] == 1) & (kind[1:] == 0) & (cpu[:-1] == cpu[1:]))
    out = {}
    for c in distinct(cpu[ok]).tolist():
        sel = ok[cpu[ok] == c]
        out[c] = (ts[sel], ts[sel + 1], names[lab[sel]])
    return out


def _sorted(a: np.ndarray) -> bool:
    return len(a) < 2 or bool(np.all(a[1:] >= a[:-1]))


def distinct(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values, = np.unique(a) for integers: a plain np.unique imports
    numpy.ma on its first call (numpy 2.x checks for masked arrays), 0.1-0.3 s of a
    process's first explain."""
    a = np.asarray(a).ravel()
    if len(a) > 4096 and a.dtype.kind in "iu":
        # Pids and CPU numbers span a small range: a flag per value (one scattered write
        # per element) instead of a sort (2.3 M pids: 25 ms to sort, 4 ms to flag).
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < 2 * len(a):
            seen = np.zeros(hi - lo + 1, bool)
            seen[a if lo == 0 else a - lo] = True
            return (np.flatnonzero(seen) + lo).astype(a.dtype)
    s = np.sort(a)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


def _small_ints(a: np.ndarray) -> list[int]:
    """Distinct values of an array of CPU numbers, sorted."""
    a = np.asarray(a)
    if not len(a):
        return []
    if a.min() >= 0 and a.max() < 1 << 16:
        return np.flatnonzero(np.bincount(a.astype(np.int64))).tolist()
    return distinct(a).tolist()


def _pair_sorted(ts_in, cpu_in, names, codes, ts_out, cpu_out) -> dict[int, tuple]:
    """:func:`_pair` for time-ordered entries and exits, CPU by CPU without a sort: in the
    merged order (entries first on equal stamps, as the stable sort there) entry ``i`` is
    followed by exit ``s_i`` (the exits strictly before it) unless entry ``i+1`` comes
    first, i.e. has the same ``s``."""
    fast = fastsetup.pair_intervals(ts_in, cpu_in, ts_out, cpu_out)
    if fast is not None:
        # C: one pass over entries and exits, each CPU's exits chained (no searches).
        return {c: (s, t, names[codes[i]]) for c, (s, t, i) in fast.items()}
    out = {}
    one_in = len(cpu_in) and cpu_in.min() == cpu_in.max()
    one_out = len(cpu_out) and cpu_out.min() == cpu_out.max()
    for c in _small_ints(cpu_in):
        ei = None if one_in else np.flatnonzero(cpu_in == c)
        xi = None if (one_out and cpu_out[0] == c) else np.flatnonzero(cpu_out == c)
        te = ts_in if ei is None else ts_in[ei]
        tx = ts_out if xi is None else ts_out[xi]
        if not len(tx):
            continue
        si = np.searchsorted(tx, te, "left")
        ok = np.flatnonzero((si < len(tx)) & np.r_[si[1:] != si[:-1], True])
        if not len(ok):
            continue
        lab = codes[ok] if ei is None else codes[ei[ok]]
        out[c] = (te[ok], tx[si[ok]], names[lab])
    return out


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of one element of each distinct value, code of each element): rows hashed
    to 64 bits and checked element by element (np.unique on the values when they differ
    from their representative, i.e. a hash collision)."""
    values = np.ascontiguousarray(values)
    n = len(values)
    size = values.dtype.itemsize
    if n and size % 8 == 0 and values.dtype.kind in "SU":
        found = unique_rows(values.view(np.uint8).reshape(n, size).view("<u8"))
        if found is not None:
            return found
    _, rep, inv = np.unique(values, return_index=True, return_inverse=True)
    return rep, inv.ravel()


def _labels(prefix: str, values: np.ndarray, names: np.ndarray | None = None,
            coded: Coded | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct labels ``f"{prefix}{value} {name}"``, code of each event): formatted once
    per distinct (value, name). ``coded``: the names as codes into their distinct
    strings (one code per string), read instead of ``names`` when given."""
    values = np.asarray(values).astype(np.int64)
    if coded is not None and len(coded.codes) == len(values):
        # C: distinct (value, name code) pairs, in order of first appearance: the same
        # pairs and order as the strings' rows give below, without the strings per row.
        codes = np.ascontiguousarray(coded.codes, np.int64)
        found = fastpath.factorize_rows(codes.view(np.uint64).reshape(-1, 1), values)
        if found is not None:
            rep, code = found
            text = np.array([f"{prefix}{v} {s}" for v, s in
                             zip(values[rep].tolist(),
                                 coded.values[codes[rep]].tolist())], dtype=object)
            return text, code
        names = coded.build()
    if names is None:
        uniq, inv = np.unique(values, return_inverse=True)
        return (np.array([f"{prefix}{v}" for v in uniq.tolist()], dtype=object),
                inv.ravel().astype(np.int64))
    names = np.asarray(names)
    if names.dtype.kind == "U" and names.dtype.itemsize % 8:
        names = names.astype(f"U{-(-names.dtype.itemsize // 8) * 2}")
    if names.dtype.kind in "SU" and names.dtype.itemsize % 8 == 0 and len(names):
        # C: distinct (value, name) pairs by an exact hash table, in one pass.
        rows = np.ascontiguousarray(names).view(np.uint8).reshape(len(names), -1)
        found = fastpath.factorize_rows(rows.view("<u8"), values)
        if found is not None:
            rep, code = found
            text = np.array([f"{prefix}{v} {s}" for v, s in
                             zip(values[rep].tolist(), names[rep].tolist())], dtype=object)
            return text, code
    nrep, ninv = _factorize(names)
    nuniq = names[nrep]
    key = values * len(nuniq) + ninv.ravel()
    kuniq, kinv = np.unique(key, return_inverse=True)
    text = np.array([f"{prefix}{k // len(nuniq)} {nuniq[k % len(nuniq)]}"
                     for k in kuniq.tolist()], dtype=object)
    return text, kinv.ravel().astype(np.int64)


def irq_intervals(trace: Trace) -> tuple[dict[int, Intervals], dict[int, Intervals]]:
    """(hard, soft) intervals per CPU; hard = irq handlers and x86 system vectors."""
    hard_parts: dict[int, list[tuple]] = {}
    e, x = trace.t("irq_handler_entry"), trace.t("irq_handler_exit")
    pairs = []
    if len(e) and len(x):
        coded = e.coded("name")
        labels = _labels("irq ", e["irq"], coded=coded) if coded is not None else \
            _labels("irq ", e["irq"], e["name"])
        pairs.append(_pair(e["ts"], e["cpu"], *labels, x["ts"], x["cpu"]))
    # kvm_entry..kvm_exit is guest mode, not an interrupt (the vCPU thread running).
    for name in list(trace.tables):
        if name.endswith("_entry") and name[:-6] + "_exit" in trace.tables and name not in (
                "irq_handler_entry", "softirq_entry", "hrtimer_expire_entry", "kvm_entry"):
            e, x = trace.t(name), trace.t(name[:-6] + "_exit")
            if len(e):
                pairs.append(_pair(e["ts"], e["cpu"],
                                   np.array([f"vector {name[:-6]}"], dtype=object),
                                   np.zeros(len(e), np.int64), x["ts"], x["cpu"]))
    for p in pairs:
        for c, v in p.items():
            hard_parts.setdefault(c, []).append(v)
    soft: dict[int, Intervals] = {}
    e, x = trace.t("softirq_entry"), trace.t("softirq_exit")
    if len(e) and len(x):
        vec = np.asarray(e["vec"]).astype(np.int64)
        if len(vec) and vec.min() >= 0 and vec.max() < 1 << 16:
            # Small integers: distinct values and codes by table lookup (= np.unique's).
            uniq = np.flatnonzero(np.bincount(vec))
            lut = np.zeros(int(vec.max()) + 1, np.int64)
            lut[uniq] = np.arange(len(uniq))
            inv = lut[vec]
        else:
            uniq, inv = np.unique(vec, return_inverse=True)
        text = np.array([f"softirq {SOFTIRQ_NAMES[v] if 0 <= v < len(SOFTIRQ_NAMES) else v}"
                         for v in uniq.tolist()], dtype=object)
        for c, (s, t, lab) in _pair(e["ts"], e["cpu"], text, inv.ravel().astype(np.int64),
                                    x["ts"], x["cpu"]).items():
            soft[c] = Intervals(s, t, lab)
    hard: dict[int, Intervals] = {}
    for c, parts in hard_parts.items():
        s = np.concatenate([p[0] for p in parts])
        t = np.concatenate([p[1] for p in parts])
        lab = np.concatenate([p[2] for p in parts])
        o = np.argsort(s, kind="stable")
        hard[c] = Intervals(s[o], t[o], lab[o])
    return hard, soft


# -- CPU occupancy -------------------------------------------------------------------------

@dataclass
class CpuRuns:
    """Which task ran on each CPU: switch times and the task switched in (``comm``: its
    name, or its code into ``names`` when that is given)."""

    ts: dict[int, np.ndarray]
    pid: dict[int, np.ndarray]
    comm: dict[int, np.ndarray]
    names: np.ndarray | None = None

    def comm_at(self, cpu: int, i: int) -> bytes | str:
        """The name of the ``i``-th task switched in on ``cpu``."""
        raw = self.comm[cpu][i]
        return self.names[raw] if self.names is not None else raw

    def pieces(self, cpu: int, a: int, b: int) -> list[tuple[int, int, int, str]]:
        """(lo, hi, pid, comm) of the tasks on ``cpu`` during [a, b]; pid -1 = unknown."""
        ts = self.ts.get(cpu)
        if ts is None or not len(ts):
            return [(a, b, -1, "?")]
        i = int(ts.searchsorted(a, "right")) - 1
        out = []
        t = a
        while t < b:
            nxt = int(ts[i + 1]) if i + 1 < len(ts) else b
            hi = min(b, nxt)
            if i < 0:
                out.append((t, hi, -1, "?"))
            else:
                out.append((t, hi, int(self.pid[cpu][i]), _s(self.comm_at(cpu, i))))
            t, i = hi, i + 1
        return out


def _s(raw) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def cpu_runs(trace: Trace, switches: Table | None = None) -> CpuRuns:
    sw = switches if switches is not None else complete_switches(trace)
    ts, pid, comm = {}, {}, {}
    coded = sw.coded("next_comm") if len(sw) else None
    if len(sw):
        cpus = sw["cpu"]
        names = coded.codes if coded is not None else sw["next_comm"]
        for c in _small_ints(cpus):
            sel = np.flatnonzero(cpus == c)
            ts[c] = sw["ts"][sel].astype(np.int64, copy=False)    # the gather is a copy
            pid[c] = sw["next_pid"][sel]
            comm[c] = names[sel]
    return CpuRuns(ts, pid, comm, coded.values if coded is not None else None)
