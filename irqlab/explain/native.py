"""The explainer of a native run (kind ``native``: ``irqlab run --target native --trace``):
each spike of a probe thread on the host, in the shape of rtla timerlat's auto-analysis
(``rtla timerlat --aa``: IRQ latency, the IRQ handler, interference, the blocking thread).

The capture is taken on CLOCK_MONOTONIC (trace clock ``mono``), the clock the probe's
deadlines and wake-ups are read on (probes/native/native.c: clock_nanosleep with
TIMER_ABSTIME), so a sample's window [deadline, entry] is trace time as it is: the clock
map is exact (``error_bound_ns`` 0).

**Stages** (the first of each in the window, on the sample's CPU): deadline → *timer IRQ
entry* (x86: ``irq_vectors:local_timer_entry``; arm64: ``irq:irq_handler_entry`` of the
IRQ named ``arch_timer``; else ``timers:hrtimer_expire_entry``) → *probe
thread woken* (``sched_waking`` of the probe thread) → *switched in* (``sched_switch`` to
it) → *handler* (the probe's clock read after its wake-up: the sample's entry).

**Causes** (every ns of the window in one; "unexplained" always shown), read from the
probe thread's states and what its CPU did meanwhile:
- before the timer IRQ entry (the thread asleep): other hard IRQ handlers and NMIs running
  (``hardirq: …``, by name) and, for the rest, ``IRQ latency in COMM/PID (IRQs off or
  hardware; inferred from the gap)`` — the task that held the CPU — or ``IRQ latency: CPU
  idle exit (C-state)``. No event marks IRQs off on a kernel without ``preemptirq``
  tracepoints (this host's): the cause says it is inferred from the gap;
- asleep after the timer IRQ entry: the IRQ handlers (the timer's own included);
- runnable: whoever held the CPU — ``preempted by COMM/PID prio P`` (P: the SCHED_FIFO/RR
  priority of a real-time task, else ``nice N``), or, for a task of lower priority than
  the probe thread (which cannot preempt it), ``non-preemptible COMM/PID nice N (lower
  priority, held the CPU in the kernel; inferred)``; IRQs and softirqs by name, ``CPU
  idle``;
- running: IRQs, then ``probe thread running (return to user space)``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from irqlab.explain.attribute import UNEXPLAINED, Attribution, Explainer, aggregate
from irqlab.explain.host import tracefs_writers
from irqlab.explain.load import Trace, decode_capture
from irqlab.explain.run import Explained, capture_path
from irqlab.explain.seam import Explanation, Progress, Request, stored_samples
from irqlab.explain.shape import attributed_json, select_samples
from irqlab.explain.timeline import RUNNABLE, RUNNING, SLEEPING
from irqlab.explain.timer_irq import TimerIrqs
from irqlab.store import Store, StoreError
from irqlab.store.db import RunRow
from irqlab.trace.archive import read_archive
from irqlab.trace.formats import parse_format, parse_header_page
from irqlab.trace.ringbuf import decode_tables

STAGE_ORDER = ("deadline", "timer IRQ entry", "probe thread woken", "switched in",
               "handler")
# The probe's thread name, on the host and in a Linux guest (probes/native, prctl).
PROBE_COMM = "irqlab-native"
PROBE_RUNNING = "probe thread running (return to user space)"
CPU_IDLE = "CPU idle while the probe thread was runnable"
class NativeClock:
    """The identity map (samples and trace are both CLOCK_MONOTONIC ns)."""

    def __init__(self, trace_clock: str) -> None:
        self.trace_clock = trace_clock

    def as_dict(self, tick_hz: int) -> dict[str, Any]:
        return {"method": "identity (samples and trace on CLOCK_MONOTONIC)",
                "offset_tick": 0, "error_bound_ns": 0, "lower_tick": 0, "upper_tick": 0,
                "anchors": 0, "consistent": True, "candidates": [],
                "trace_clock": self.trace_clock}



class NativeAttributor:
    """One sample at a time, on top of the timelines irqlab.explain.attribute builds."""

    def __init__(self, ex: Explainer, prio: dict[int, int], probe_tids: list[int]) -> None:
        """``prio``: each task's kernel priority (switch_priorities); ``probe_tids``: the
        probe's threads as the trace names them."""
        self.ex = ex
        self.probe_tids = probe_tids
        sw = ex.switches
        self.prio = prio
        self.timer = TimerIrqs(ex.trace)
        wk = ex.trace.t("sched_waking")
        self.waking = (wk["ts"].astype(np.int64), wk["pid"].astype(np.int64)) if len(wk) \
            else (np.empty(0, np.int64),) * 2
        self.switch_in = (sw["ts"].astype(np.int64), sw["next_pid"].astype(np.int64),
                          sw["cpu"].astype(np.int64)) if len(sw) else (np.empty(0, np.int64),) * 3

    def who(self, pid: int, comm: str) -> str:
        prio = self.prio.get(pid)
        if prio is None:
            return f"{comm}/{pid}"
        return f"{comm}/{pid} prio {99 - prio}" if prio < 100 else \
            f"{comm}/{pid} nice {prio - 120}"

    def probe_tid(self, cpu: int, b: int) -> int | None:
        """The probe thread that ran on ``cpu`` at the sample's entry ``b``."""
        for tid in self.probe_tids:
            tl = self.ex.threads.get(tid)
            seg = tl.state_at(b) if tl else None
            if seg is not None and seg.cpu == cpu and seg.state == RUNNING:
                return tid
        return None

    def explain(self, seq: int, a: int, b: int, cpu: int) -> Attribution:
        ex = self.ex
        att = Attribution(seq, b - a, a, b)
        if a < ex.span[0] or b > ex.span[1]:
            att.status, att.reason = "not traced", "window outside the capture"
            att.causes[UNEXPLAINED] = max(0, b - a)
            return att
        for c, lo, hi, why in ex.lost:
            if c == cpu and lo < b and hi > a:
                att.status, att.reason = "incomplete", why
                att.causes[UNEXPLAINED] = max(0, b - a)
                return att
        tid = self.probe_tid(cpu, b)
        causes: dict[str, int] = defaultdict(int)
        woken = self._woken(tid, a, b)          # once: a scan of every wake-up
        t_irq = self._timer_irq(att, cpu, a, b, woken)
        covered = 0
        tl = ex.threads.get(tid) if tid is not None else None
        for seg, lo, hi in (tl.between(a, b) if tl else []):
            covered += hi - lo
            if seg.state == SLEEPING:
                cut = min(hi, t_irq) if t_irq is not None else hi
                if cut > lo:
                    self._irq_latency(seg.cpu, lo, cut, causes)
                if hi > max(lo, cut):
                    rest = ex._irqs(seg.cpu, max(lo, cut), hi, causes)
                    causes["timer IRQ handler (expiry to wake-up)"] += rest
            elif seg.state == RUNNABLE:
                self._others(seg.cpu, lo, hi, causes, tid)
            elif seg.state == RUNNING:
                causes[PROBE_RUNNING] += ex._irqs(seg.cpu, lo, hi, causes)
            else:
                causes[UNEXPLAINED] += hi - lo
        if b - a > covered:
            causes[UNEXPLAINED] += (b - a) - covered
        if tid is None:
            att.notes.append(f"no probe thread seen running on CPU {cpu} at the entry")
        causes.setdefault(UNEXPLAINED, 0)
        att.causes = dict(causes)
        self._stages(att, tid, cpu, t_irq, woken)
        return att

    def _woken(self, tid: int | None, a: int, b: int) -> int | None:
        """The probe thread's first wake-up in [a, b]."""
        wts, wpid = self.waking
        sel = np.flatnonzero((wts >= a) & (wts <= b) & (wpid == (tid if tid is not None
                                                                  else -1)))
        return int(wts[sel[0]]) if len(sel) else None

    def _timer_irq(self, att: Attribution, cpu: int, a: int, b: int,
                   woken: int | None) -> int | None:
        """When the timer IRQ that woke the probe thread was entered (TimerIrqs.entered);
        a note says how long before the deadline an IRQ running its expiry began."""
        t, before = self.timer.entered(cpu, a, b, woken)
        if before is not None:
            att.notes.append(f"the deadline passed inside a timer IRQ entered "
                             f"{before} ns before it, which ran the probe's expiry")
        return t

    def _irq_latency(self, cpu: int, lo: int, hi: int, causes: dict[str, int]) -> None:
        """Before the timer IRQ was entered: other handlers, else IRQs off or idle exit."""
        for l2, h2, pid, comm in self.ex.runs.pieces(cpu, lo, hi):
            rest = self.ex._irqs(cpu, l2, h2, causes)
            if pid == 0:
                causes["IRQ latency: CPU idle exit (C-state)"] += rest
            elif pid < 0:
                causes[UNEXPLAINED] += rest
            else:
                causes[f"IRQ latency in {self.who(pid, comm)} (IRQs off or hardware; "
                       f"inferred from the gap)"] += rest

    def _others(self, cpu: int, lo: int, hi: int, causes: dict[str, int],
                tid: int | None) -> None:
        for l2, h2, pid, comm in self.ex.runs.pieces(cpu, lo, hi):
            rest = self.ex._irqs(cpu, l2, h2, causes)
            label = (CPU_IDLE if pid == 0 else UNEXPLAINED if pid < 0
                     else self._holder(pid, comm, tid))
            causes[label] += rest

    def _holder(self, pid: int, comm: str, tid: int | None) -> str:
        """Who kept the runnable probe thread off its CPU. A task of lower priority
        (kernel prio numerically higher) cannot preempt it: it held the CPU in kernel
        code the scheduler could not interrupt (preemption or BH disabled, or a
        PREEMPT_NONE/VOLUNTARY kernel between preemption points) — a flood's sendmsg
        does so. No event marks it on a kernel without preemptirq tracepoints."""
        mine = self.prio.get(tid) if tid is not None else None
        theirs = self.prio.get(pid)
        if mine is not None and theirs is not None and theirs > mine:
            return (f"non-preemptible {self.who(pid, comm)} (lower priority, held the "
                    f"CPU in the kernel; inferred)")
        return f"preempted by {self.who(pid, comm)}"

    def _stages(self, att: Attribution, tid: int | None, cpu: int,
                t_irq: int | None, woken: int | None) -> None:
        """The stages found in the window; a stage that should be there and is not goes
        to ``stages_missing`` with the event looked for. When the deadline passed while
        the probe thread was not asleep (kept off its CPU after its last sample, before it
        slept again), no timer IRQ or wake-up is waited for, and a note says so."""
        a, b = att.start, att.end
        att.stages = [("deadline", a)]
        tl = self.ex.threads.get(tid) if tid is not None else None
        seg = tl.state_at(a) if tl else None
        awake = seg is not None and seg.state in (RUNNABLE, RUNNING)
        if awake:
            att.notes.append(f"the deadline passed while the probe thread was "
                             f"{seg.state}: no timer IRQ or wake-up to wait for")
        t = a
        if t_irq is not None:
            att.stages.append(("timer IRQ entry", t_irq))
            t = t_irq
        elif not awake:
            att.stages_missing.append("timer IRQ entry (no local_timer_entry, arch_timer "
                                      "IRQ or hrtimer_expire_entry on the CPU in the "
                                      "window)")
        if woken is not None and woken < t:     # the timer IRQ found came after it
            woken = self._woken(tid, t, b)
        if woken is not None:
            t = woken
            att.stages.append(("probe thread woken", t))
        elif not awake:
            att.stages_missing.append("probe thread woken (no sched_waking in the window)")
        sts, spid, scpu = self.switch_in
        sel = np.flatnonzero((sts >= t) & (sts <= b) & (spid == (tid if tid is not None
                                                                 else -1)) & (scpu == cpu))
        if len(sel):
            att.stages.append(("switched in", int(sts[sel[0]])))
        elif not (awake and seg.state == RUNNING):
            att.stages_missing.append("switched in (no sched_switch to it in the window)")
        att.stages.append(("handler", b))


def switch_priorities(header: dict[str, Any], per_cpu: dict[int, bytes]) -> dict[int, int]:
    """Each task's last priority seen at a switch (``sched_switch`` prev_prio when it left
    the CPU, next_prio when it took it: the kernel's prio, 0-99 real-time with
    SCHED_FIFO/RR priority 99 - prio, 100-139 CFS with nice = prio - 120). Both sides are
    read because a busy ring can lose the page with a task's switch-in and keep its
    switch-out. Decoded here, not by explain's shared tables, whose columns the other
    explainers' golden outputs fix."""
    key = "sched:sched_switch"
    if key not in header.get("formats", {}):
        return {}
    fmt = parse_format(header["formats"][key], "sched")
    sides = [(p, q) for p, q in (("prev_pid", "prev_prio"), ("next_pid", "next_prio"))
             if p in fmt.fields and q in fmt.fields]
    if not sides:
        return {}
    dec = decode_tables(per_cpu, parse_header_page(header["header_page"]),
                        [(fmt, [f for side in sides for f in side])])
    cols = dec.tables[fmt.id]
    ts = np.concatenate([cols["ts"].astype(np.int64) for _ in sides])
    pid = np.concatenate([cols[p].astype(np.int64) for p, _ in sides])
    prio = np.concatenate([cols[q].astype(np.int64) for _, q in sides])
    # A stable sort by time with the switch-in after the switch-out of the same record:
    # the later of two entries for one pid wins in the dict below.
    order = np.argsort(ts, kind="stable")
    return {int(p): int(q) for p, q in zip(pid[order].tolist(), prio[order].tolist())
            if p > 0}


def probe_threads_named(trace: Trace, comm: str = PROBE_COMM) -> dict[str, str]:
    """The probe's threads by name alone ({tid: comm}, as a header's ``vmm_threads``):
    a guest's capture has no VMM pid and the host's /proc cannot see inside the guest,
    so its threads are the tasks the trace switched in under ``comm``."""
    sw = trace.t("sched_switch")
    out: dict[str, str] = {}
    if not len(sw):
        return out
    for pid, name in set(zip(sw["next_pid"].tolist(), sw["next_comm"].tolist())):
        text = name.split(b"\0", 1)[0].decode("utf-8", "replace") \
            if isinstance(name, bytes) else str(name)
        if text == comm:
            out[str(int(pid))] = text
    return out


def probe_threads_by_name(trace: Trace, known: dict[int, str]) -> list[int]:
    """Threads the trace shows under the probe's name that the header does not list.
    The header's tids are read from /proc at the start of the capture: inside a pid
    namespace (a CI container) they are not the kernel's pids the trace records, and a
    thread started later is missing. The probe's threads share one name
    (``irqlab-native``), so the trace's tasks of that name are the probe's — the run's
    CPUs are its own (a second native run on them would be measured by neither)."""
    names = {c for c in known.values() if c}
    sw = trace.t("sched_switch")
    if not names or not len(sw):
        return []
    want = np.array(sorted(n.encode() for n in names))
    found: set[int] = set()
    for pid_col, comm_col in (("next_pid", "next_comm"), ("prev_pid", "prev_comm")):
        comm = np.asarray(sw[comm_col])
        if comm.dtype.kind != "S":               # a decoder that gave str: same names
            comm = comm.astype(str).astype(bytes)
        found.update(np.unique(sw[pid_col][np.isin(comm, want)]).tolist())
    return sorted(found - set(known) - {0})


def explain_native(run: RunRow, trace: Trace, s: dict[str, np.ndarray],
                   request: Request, prio: dict[int, int]
                   ) -> tuple[Explained, int | None]:
    """The explained samples, and the probe thread that took the worst of them (the one
    Perfetto draws)."""
    tick_hz = int(run.tick_hz or 1_000_000_000)
    clock = trace.header.get("clock")
    if clock not in ("mono", "mono_raw") and clock is not None:
        raise StoreError(f"run {run.run_id}'s capture is on the {clock} clock, not the "
                         f"probe's CLOCK_MONOTONIC: record it again with "
                         f"`irqlab run --target native --trace`")
    known = {int(t): c for t, c in trace.header.get("vmm_threads", {}).items()}
    by_name = probe_threads_by_name(trace, known)
    ex = Explainer(trace, vcpu_tids=[], other_tids=by_name)
    nat = NativeAttributor(ex, prio, sorted(set(known) | set(by_name)))
    seq = s["seq"].astype(np.int64)
    dl = s["deadline_tick"].astype(np.int64)
    en = s["entry_tick"].astype(np.int64)
    cpu = s["cpu"].astype(np.int64)
    lat = en - dl
    chosen = select_samples(seq, lat, tick_hz, run.threshold_ns, request.threshold_ns,
                            request.top, request.sample)
    if chosen is None:
        raise StoreError(f"run {run.run_id} has no sample {request.sample}")
    idx, how = chosen
    atts = [nat.explain(int(seq[i]), int(dl[i]), int(en[i]), int(cpu[i]))
            for i in idx.tolist()]
    every = {"seq": seq, "latency_tick": lat, "host_deadline": dl, "host_entry": en}
    res = Explained(run, trace, NativeClock(str(clock)), atts, aggregate(atts), how,
                    tick_hz, ex, every)
    tid = None
    if len(idx):
        worst = int(idx[np.argmax(lat[idx])])
        tid = nat.probe_tid(int(cpu[worst]), int(en[worst]))
    return res, tid


def as_json(res: Explained) -> dict[str, Any]:
    """The ``{"type": "explain"}`` object (docs/formats.md §9), ``source`` "native"."""
    hdr = res.trace.header
    enabled = hdr.get("enabled", [])
    fired = res.trace.fired()
    return {
        "type": "explain", "version": 1, "run_id": res.run.run_id, "source": "native",
        "selected_by": res.selected_by, "clock": res.clock.as_dict(res.tick_hz),
        "events": res.trace.events, "events_missing": hdr.get("missing", []),
        "events_never_fired": [e for e in enabled if e.split(":", 1)[1] not in fired],
        "lost_regions": [{"cpu": c, "from_ns": res.ns(lo - res.explainer.span[0]),
                          "to_ns": res.ns(hi - res.explainer.span[0]), "why": why}
                         for c, lo, hi, why in res.explainer.lost],
        "probe_threads": {str(t): c for t, c in sorted(res.explainer.vmm.items())},
        **attributed_json(res.samples, res.culprits, res.ns, STAGE_ORDER),
    }


class NativeExplainer:
    """A native run's spikes from the host's tracefs (like rtla timerlat --aa)."""

    kind = "native"
    title = "native (host tracefs around the probe's threads)"
    outputs = ("dat", "text", "perfetto", "chrome_json")

    def outputs_hint(self, run: RunRow) -> str:
        return ""

    def explain(self, store: Store, run: RunRow, request: Request,
                progress: Progress) -> Explanation:
        path = request.capture or capture_path(store, run)
        progress.stage(f"decoding capture ({path.stat().st_size / 1e6:.1f} MB gzip)")
        header, per_cpu = read_archive(path)
        trace = decode_capture(header, per_cpu)
        prio = switch_priorities(header, per_cpu)
        del per_cpu
        progress.stage(f"attributing samples ({trace.events:,} events)")
        res, tid = explain_native(run, trace, stored_samples(store, run.run_id), request,
                                  prio)
        return Explanation(as_json(res), tracefs_writers(
            res, path, (tid, "probe thread") if tid is not None else None, "handler"))
