"""Attribute each sample's latency window [deadline, ISR entry] to host-side causes.

All times are host trace ticks (the window is mapped from guest ticks by irqlab.explain.
clock). Every tick of the window lands in exactly one cause, or in "unexplained" when no
trace covers it, so the causes of a sample always add up to its latency.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from irqlab.explain.load import Trace
from irqlab.explain.stops import mark_stop_signals, stop_signal_times
from irqlab.explain.timeline import (RUNNABLE, RUNNING, SLEEPING, STOPPED, UNKNOWN,
                                     CpuRuns, ThreadTimeline, complete_switches, cpu_runs,
                                     distinct, irq_intervals, thread_timelines)

UNEXPLAINED = "unexplained"
VCPU_STOPPED = "vCPU thread stopped"
VCPU_RUNNING = "vCPU thread running (guest/VMM work)"
VCPU_BLOCKED = "vCPU thread blocked (halted, waiting for its timer or kick)"
CPU_IDLE = "CPU idle while vCPU runnable (wakeup/idle-exit latency)"
MSR_TSC_DEADLINE = 0x6E0
# Stages traced in the vCPU thread's own context; the host timer and the interrupt
# acceptance run in hard-IRQ context on whatever task was current (often idle).
_VCPU_CONTEXT = {"kvm_vcpu_wakeup", "kvm_inj_virq", "kvm_entry"}

# KVM timer path, in order (Documentation/virt/kvm/x86 timer path; arch/x86/kvm/lapic.c).
STAGES = (("host timer fired", "hrtimer_expire_entry"),
          ("interrupt accepted", "kvm_apic_accept_irq"),
          ("vCPU woken", "kvm_vcpu_wakeup"),
          ("interrupt injected", "kvm_inj_virq"),
          ("guest entered", "kvm_entry"))
STAGE_ORDER = ("deadline",) + tuple(name for name, _event in STAGES) + ("ISR entry",)


@dataclass
class Attribution:
    seq: int
    latency_tick: int
    start: int                          # host ticks
    end: int
    status: str = "explained"           # explained | incomplete | not traced
    reason: str | None = None
    causes: dict[str, int] = field(default_factory=dict)
    stages: list[tuple[str, int]] = field(default_factory=list)
    stages_missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # IRQ time that hit while a preempting task held the CPU, by that task's cause: the
    # task's inclusive share (its own time is in ``causes``, the IRQs' under their names).
    irq_during: dict[str, int] = field(default_factory=dict)

    def inclusive(self, cause: str) -> int:
        return self.causes.get(cause, 0) + self.irq_during.get(cause, 0)

    def ranked(self) -> list[tuple[str, int]]:
        items = sorted(((k, v) for k, v in self.causes.items() if k != UNEXPLAINED),
                       key=lambda kv: -kv[1])
        return items + [(UNEXPLAINED, self.causes.get(UNEXPLAINED, 0))]


class Explainer:
    """Everything derived once from a capture, then asked about one sample at a time."""

    def __init__(self, trace: Trace, vcpu_tids: list[int] | None = None,
                 other_tids: list[int] | None = None) -> None:
        """``other_tids``: more threads to follow beside the VMM's (the net sender's)."""
        self.trace = trace
        hdr = trace.header
        self.vmm = {int(t): c for t, c in hdr.get("vmm_threads", {}).items()}
        self.vcpus = vcpu_tids or [int(t) for t in hdr.get("vcpu_tids", [])]
        end_ts = int(trace.t("sched_switch")["ts"][-1]) + 1 if len(trace.t("sched_switch")) else 0
        # IRQ intervals need nothing else: built meanwhile in a second thread (numpy
        # releases the GIL in its array work; the trace is only read).
        with ThreadPoolExecutor(1) as pool:
            irqs = pool.submit(irq_intervals, trace)
            # Switches the kernel did not record are put back first (timeline module doc).
            self.switches = complete_switches(trace)
            inferred = np.flatnonzero(self.switches.cols.get("inferred", np.zeros(0, bool)))
            i_cpu, i_ts = self.switches["cpu"][inferred], self.switches["ts"][inferred]
            self.inferred_ts: dict[int, np.ndarray] = {
                int(c): i_ts[i_cpu == c] for c in distinct(i_cpu).tolist()}
            self.threads: dict[int, ThreadTimeline] = thread_timelines(
                trace, sorted(set(self.vmm) | set(self.vcpus) | set(other_tids or ())), end_ts,
                self.switches)
            # A stop signal's wait for the CPU is stopped time (irqlab.explain.stops).
            vmm = set(self.vmm) | set(self.vcpus)
            mark_stop_signals({t: tl for t, tl in self.threads.items() if t in vmm},
                              *stop_signal_times(trace, vmm))
            self.runs: CpuRuns = cpu_runs(trace, self.switches)
            self.hard, self.soft = irqs.result()
        self.span = self._span()
        self.lost = self._lost_regions()
        self.fired = trace.fired()
        self._during: dict[str, int] = defaultdict(int)
        self._enabled_key: tuple | None = None
        self._enabled_val: tuple[set[str], bool] = (set(), False)

    # -- coverage -------------------------------------------------------------------------
    def _span(self) -> tuple[int, int]:
        """[start marker, stop marker] of the capture (else first/last event)."""
        t = self.trace.t("print")
        lo = hi = None
        if len(t):
            for ts, text in zip(t["ts"].tolist(), t["buf"].tolist()):
                s = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
                if s.startswith("irqlab-trace-start"):
                    lo = ts
                elif s.startswith("irqlab-trace-stop"):
                    hi = ts
        all_ts = [tb["ts"] for tb in self.trace.tables.values() if len(tb)]
        if lo is None:
            lo = min(int(x[0]) for x in all_ts) if all_ts else 0
        if hi is None:
            hi = max(int(x[-1]) for x in all_ts) if all_ts else 0
        return int(lo), int(hi)

    def _lost_regions(self) -> list[tuple[int, int, int, str]]:
        """(cpu, from, to, why) where events are known or suspected to be missing."""
        out = []
        per_cpu_ts: dict[int, np.ndarray] = {}
        if not self.trace.missed:
            return out + self._lost_by_stats(set())
        for tb in self.trace.tables.values():
            if len(tb):
                for c in np.unique(tb["cpu"]).tolist():
                    per_cpu_ts.setdefault(c, []).append(tb["ts"][tb["cpu"] == c])
        per_cpu = {c: np.sort(np.concatenate(v)).astype(np.int64) for c, v in per_cpu_ts.items()}
        located = set()
        for cpu, page_ts, count in self.trace.missed:
            ts = per_cpu.get(cpu, np.empty(0, np.int64))
            i = int(np.searchsorted(ts, page_ts, "left")) - 1
            lo = int(ts[i]) if i >= 0 else self.span[0]
            out.append((cpu, lo, int(page_ts),
                        f"{'unknown number of' if count < 0 else count} events lost on CPU "
                        f"{cpu} (ring buffer overrun)"))
            located.add(cpu)
        return out + self._lost_by_stats(located)

    def _lost_by_stats(self, located: set[int]) -> list[tuple[int, int, int, str]]:
        out = []
        for cpu, st in self.trace.header.get("stats", {}).items():
            lost = st.get("overrun", 0) + st.get("dropped events", 0)
            if lost and int(cpu) not in located:
                out.append((int(cpu), self.span[0], self.span[1],
                            f"{lost} events lost on CPU {cpu} (stats; position unknown)"))
        return out

    # -- one sample ---------------------------------------------------------------------
    def explain(self, seq: int, a: int, b: int, latency_tick: int,
                vcpu: int | None = None, deadline_tick: int | None = None,
                follow_waker: bool = True) -> Attribution:
        """One window [a, b] of the vCPU thread's. ``follow_waker``: a blocked vCPU's
        time its waker (QEMU's main loop) could not run is charged to what held that
        thread off its CPU; off, it stays ``VCPU_BLOCKED`` (a caller that charges the
        waker's delay itself, irqlab.explain.linux_guest, would count it twice)."""
        att = Attribution(seq, latency_tick, a, b)
        tid = vcpu if vcpu is not None else (self.vcpus[0] if self.vcpus else -1)
        if a < self.span[0] or b > self.span[1]:
            att.status, att.reason = "not traced", "window outside the capture"
            att.causes[UNEXPLAINED] = max(0, b - a)
            return att
        tl = self.threads.get(tid)
        segs = tl.between(a, b) if tl else []          # once: _cpus_of reads them too
        cpus = self._cpus_of(tid, a, b, segs)
        for cpu, lo, hi, why in self.lost:
            if cpu in cpus and lo < b and hi > a:
                att.status, att.reason = "incomplete", why
                att.causes[UNEXPLAINED] = max(0, b - a)
                return att
        causes: dict[str, int] = defaultdict(int)
        covered = 0
        for seg, lo, hi in segs:
            covered += hi - lo
            self._segment(seg, lo, hi, causes, att, depth=0, follow_waker=follow_waker)
        att.irq_during = dict(self._during)
        self._during.clear()
        if b - a > covered:
            causes[UNEXPLAINED] += (b - a) - covered
        att.causes = dict(causes)
        for cpu in sorted(cpus):
            t = self.inferred_ts.get(cpu)
            k = int(t.searchsorted(b, "right") - t.searchsorted(a, "left")) \
                if t is not None else 0
            if k:
                att.notes.append(f"{k} context switch(es) on CPU {cpu} in the window were not "
                                 f"recorded by the kernel; inferred from the tasks' own events")
        seg = tl.state_at(b, segs) if tl else None
        if seg is not None and seg.state != RUNNING:
            att.notes.append(f"causality: vCPU thread {seg.state} at the mapped ISR entry "
                             f"(clock mapping error?)")
        self._stages(att, tid, a, b, deadline_tick)
        return att

    def _cpus_of(self, tid: int, a: int, b: int,
                 segs: list[tuple[Any, int, int]] | None = None) -> set[int]:
        """CPUs the thread was on in [a, b] (``segs``: its segments there, if known)."""
        if segs is None:
            tl = self.threads.get(tid)
            segs = tl.between(a, b) if tl else []
        cpus = {s.cpu for s, _, _ in segs}
        return cpus or set(int(c) for c in self.trace.header.get("cpus", []))

    def _segment(self, seg, lo: int, hi: int, causes: dict[str, int], att: Attribution,
                 depth: int, follow_waker: bool = True) -> None:
        if seg.state == RUNNING:
            rest = self._irqs(seg.cpu, lo, hi, causes)
            causes[VCPU_RUNNING if depth == 0 else "VMM thread running"] += rest
        elif seg.state == RUNNABLE:
            self._others(seg.cpu, lo, hi, causes)
        elif seg.state == STOPPED:
            causes[VCPU_STOPPED if depth == 0 else "VMM thread stopped"] += hi - lo
        elif seg.state == UNKNOWN:
            # Switched out unrecorded and never seen again: no evidence either way.
            causes[UNEXPLAINED] += hi - lo
        elif seg.state == SLEEPING:
            waker = self.threads.get(seg.waker)
            if depth == 0 and follow_waker and waker is not None and seg.waker != seg.tid:
                # Blocked on a VMM thread (QEMU's main loop fires TCG timers and kicks
                # the vCPU): the time that thread could not run is the real cause.
                covered = 0
                for s2, l2, h2 in waker.between(lo, hi):
                    if s2.state in (RUNNABLE, STOPPED):
                        covered += h2 - l2
                        self._segment(s2, l2, h2, causes, att, depth + 1)
                        if s2.state == RUNNABLE:
                            att.notes.append(f"delayed the vCPU's waker "
                                             f"{self.vmm.get(seg.waker, '?')}/{seg.waker}")
                causes[VCPU_BLOCKED] += (hi - lo) - covered
            else:
                causes[VCPU_BLOCKED if depth == 0 else "VMM thread blocked"] += hi - lo

    def _irqs(self, cpu: int, lo: int, hi: int, causes: dict[str, int]) -> int:
        """Add hard/soft IRQ time on ``cpu`` in [lo, hi]; return the time left."""
        hard = self.hard.get(cpu)
        soft = self.soft.get(cpu)
        used = 0
        hard_iv = hard.overlapping(lo, hi) if hard else []
        for l2, h2, lab in hard_iv:
            causes[f"hardirq: {lab}"] += h2 - l2
            used += h2 - l2
        for l2, h2, lab in (soft.overlapping(lo, hi) if soft else []):
            inner = sum(max(0, min(h2, h3) - max(l2, l3)) for l3, h3, _ in hard_iv)
            causes[f"{lab}"] += (h2 - l2) - inner
            used += (h2 - l2) - inner
        return max(0, (hi - lo) - used)

    def _others(self, cpu: int, lo: int, hi: int, causes: dict[str, int]) -> None:
        """Runnable: charge whoever held ``cpu`` (tasks, IRQs, idle)."""
        for l2, h2, pid, comm in self.runs.pieces(cpu, lo, hi):
            rest = self._irqs(cpu, l2, h2, causes)
            label = (CPU_IDLE if pid == 0 else UNEXPLAINED if pid < 0
                     else f"preempted by {comm}/{pid}")
            causes[label] += rest
            if pid > 0:
                self._during[label] += (h2 - l2) - rest

    # -- KVM stages ---------------------------------------------------------------------
    def _enabled(self) -> tuple[set[str], bool]:
        """(event names the capture enabled, whether a KVM event of them fired), worked
        out again only when the header's list changes (asked once per sample)."""
        listed = (id(self.fired), *self.trace.header.get("enabled", []))
        if listed != self._enabled_key:
            enabled = {e.split(":", 1)[1] for e in listed[1:]}
            kvm = any(ev.startswith("kvm_") and ev in self.fired for ev in enabled)
            self._enabled_key, self._enabled_val = listed, (enabled, kvm)
        return self._enabled_val

    def _stages(self, att: Attribution, tid: int, a: int, b: int,
                deadline_tick: int | None = None) -> None:
        """Timestamps of the KVM timer-path stages inside the window, where traced.

        The arming write of IA32_TSC_DEADLINE is found by its value (the sample's guest
        deadline, exact, independent of the clock mapping: clock.match_msr()); without
        the guest deadline, the last write before the mapped deadline is taken."""
        enabled, kvm = self._enabled()
        if not kvm:
            return                      # not a KVM run (TCG): no stage to show
        t = a
        att.stages = [("deadline", a)]
        msr = self.trace.t("kvm_msr")
        if len(msr):
            arming = (msr["ecx"] == MSR_TSC_DEADLINE) & (msr["write"] == 1) \
                & (msr["common_pid"] == tid)
            if deadline_tick is not None and "data" in msr.cols:
                sel = np.flatnonzero(arming & (msr["data"].astype(np.int64) == deadline_tick))
                at = sel[:1]                      # the first write of the value arms it
            else:
                sel = np.flatnonzero(arming & (msr["ts"] < a))
                at = sel[-1:]
            if len(at):
                att.notes.append(f"timer armed (MSR 0x6e0) {(a - int(msr['ts'][at[0]]))} "
                                 f"ticks before the deadline")
        for stage, event in STAGES:
            tb = self.trace.t(event)
            if event not in enabled or event not in self.fired:
                att.stages_missing.append(f"{stage} ({event} "
                                          f"{'not traced' if event not in enabled else 'never fired'})")
                continue
            mask = (tb["ts"] >= t) & (tb["ts"] <= b)
            if event in _VCPU_CONTEXT:
                mask &= tb["common_pid"] == tid
            sel = np.flatnonzero(mask)
            if not len(sel):
                att.stages_missing.append(f"{stage} (no {event} in the window)")
                continue
            t = int(tb["ts"][sel[0]])
            att.stages.append((stage, t))
        att.stages.append(("ISR entry", b))


def aggregate(atts: list[Attribution]) -> list[dict[str, Any]]:
    """Culprits over all explained samples: total and worst time, sample count."""
    tot: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for att in atts:
        if att.status != "explained":
            continue
        for k, v in att.causes.items():
            row = tot[k]
            row[0] += v
            row[1] = max(row[1], v)
            row[2] += 1 if v else 0
    return [{"cause": k, "total_tick": v[0], "worst_tick": v[1], "samples": v[2]}
            for k, v in sorted(tot.items(), key=lambda kv: -kv[1][0])]


def stage_summary(atts: list[Attribution], ns: Callable[[int], int],
                  order: Sequence[str]) -> list[dict[str, Any]]:
    """Where the time goes, run-wide: per step between consecutive stages of the explained
    samples, how many have it and its p50/p90/p99/max (ns; nearest rank, Hyndman & Fan
    1996 definition 1, as the run summary). Steps are listed in ``order`` of their
    stages (names not in it last), so a path reads top to bottom."""
    steps: dict[tuple[str, str], list[int]] = {}
    for a in atts:
        if a.status != "explained":
            continue
        for (s0, t0), (s1, t1) in zip(a.stages, a.stages[1:]):
            steps.setdefault((s0, s1), []).append(t1 - t0)
    rank = {name: k for k, name in enumerate(order)}
    out = []
    for (s0, s1), vals in sorted(steps.items(), key=lambda kv: (
            rank.get(kv[0][0], len(rank)), rank.get(kv[0][1], len(rank)), kv[0])):
        v = np.sort(np.array(vals, np.int64))

        def q(p: float) -> int:
            return ns(int(v[max(0, int(np.ceil(p * len(v))) - 1)]))
        out.append({"from": s0, "to": s1, "samples": len(v), "p50_ns": q(0.5),
                    "p90_ns": q(0.9), "p99_ns": q(0.99), "max_ns": ns(int(v[-1]))})
    return out
