"""The explainer of a nested arm64 KVM host's capture (kind ``kvm-arm64``): the L1
kernel's ftrace (irqlab.trace.kvm_host) around the probe's vCPU thread, each spike
followed along KVM on Arm's timer path (seed 003's trace, automated).

Clock: the probe's ticks are its virtual counter, which KVM offsets from the L1's
counter by the VM's CNTVOFF; irqvmm reads that offset (KVM_REG_ARM_TIMER_CNT between
two reads of the L1 counter: ``guest_voffset_tick`` ± ``guest_voffset_bound_tick``),
and gtrace reads the L1's CLOCK_MONOTONIC (the capture's clock) beside its counter at
start and at every drain. So a sample maps exactly: guest tick + offset = L1 counter
-> L1 ns (the anchors' line). The error bound is the offset read's.

Stages of a guest timer IRQ on arm64 KVM (arch/arm64/kvm/arch_timer.c, vgic/), as they
happened: when the vCPU blocked in WFI, KVM armed a background hrtimer for the guest's
deadline; its expiry is a **host timer IRQ** (on the vCPU's CPU, or another: hrtimers
migrate off idle CPUs), whose handler kicks the vCPU thread (**vCPU kick**: its wake-
up); the **vCPU thread switched in**; at vcpu_load KVM finds the timer condition met and
raises the timer PPI (**KVM timer/vGIC injection**: kvm_timer_update_irq /
vgic_update_irq_pending at level 1); then **guest entry** (the last kvm_entry before the
ISR: the one after which the guest took it). When the vCPU thread was preempted rather
than blocked there is no host IRQ and no kick: KVM injects on its way back in. For each
step between consecutive stages the cause that held the vCPU thread up longest is named
(``stage_delays``: who delayed each stage), with the same attribution as x86's host
explainer (irqlab.explain.attribute: who held the CPU while the vCPU thread was
runnable, IRQs, the thread's own states).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from irqlab.explain.attribute import UNEXPLAINED, Attribution, Explainer, aggregate
from irqlab.explain.host import tracefs_writers
from irqlab.explain.load import Trace, load_capture
from irqlab.explain.run import Explained, capture_path
from irqlab.explain.seam import (Explanation, Progress, Request, Silent, hook_meta,
                                 stored_samples)
from irqlab.explain.shape import attributed_json, select_samples
from irqlab.store import Store, StoreError
from irqlab.store.db import RunRow

KIND = "kvm-arm64"
NS_HZ = 1_000_000_000               # the capture's clock (mono): its ticks are ns
HOST_IRQ = "host timer IRQ"
KICK = "vCPU kick"
SWITCH_IN = "vCPU thread switched in"
INJECT = "KVM timer/vGIC injection"
ENTRY = "guest entry"
STAGE_ORDER = ("deadline", HOST_IRQ, KICK, SWITCH_IN, INJECT, ENTRY, "ISR entry")
# The host-side stages: the L1's own work for the guest's IRQ (all but the ends).
HOST_STAGES = (HOST_IRQ, KICK, SWITCH_IN, INJECT, ENTRY)
# The probe's timer PPIs (INTIDs): EL1 virtual and physical timer (docs/arm64.md).
TIMER_INTIDS = (27, 30)
# A stage's event may be stamped this much before the mapped deadline (the offset's
# bound is added): the host timer fires at the deadline, never before it.
STAGE_SLACK_NS = 2_000


class ArmKvmClock:
    """guest counter tick -> L1 counter (+ CNTVOFF, irqvmm's read) -> L1 mono ns
    (gtrace's anchors)."""

    def __init__(self, header: dict[str, Any], tick_hz: int,
                 ref: dict[str, Any] | None = None) -> None:
        anchors = header.get("guest_anchors") or []
        if "guest_voffset_tick" not in header:
            raise StoreError("the capture has no guest counter offset (the KVM host's "
                             "irqvmm did not report one): record the run again")
        if len(anchors) < 2 or anchors[1]["mono_ns"] <= anchors[0]["mono_ns"]:
            raise StoreError("the capture has no two clock anchors (gtrace stopped "
                             "before its first drain): record the run again")
        self.offset_tick = int(header["guest_voffset_tick"])
        self.bound_tick = int(header.get("guest_voffset_bound_tick", 0))
        self.source = "irqvmm"
        self.ref_agrees: bool | None = None
        if ref is not None and ref.get("counter") == "arm64-cntpct":
            # The probe read CNTPCT beside CNTVCT itself (run metadata probe.ref_counter):
            # the guest's physical counter is the L1's (no CNTPOFF before Linux 6.4), and
            # an L1 at EL2 with E2H and TGE reads its virtual counter without an offset,
            # so that difference is the same CNTVOFF, read a few ticks apart instead of a
            # KVM_GET_ONE_REG apart. Used when the two agree within their bounds.
            ref_off, ref_err = int(ref["offset_tick"]), int(ref["error_tick"])
            self.ref_agrees = abs(ref_off - self.offset_tick) <= ref_err + self.bound_tick
            if self.ref_agrees and ref_err < self.bound_tick:
                self.offset_tick, self.bound_tick = ref_off, ref_err
                self.source = "probe"
        self.m0, self.c0 = int(anchors[0]["mono_ns"]), int(anchors[0]["tsc"])
        m1, c1 = int(anchors[-1]["mono_ns"]), int(anchors[-1]["tsc"])
        self.ns_per_tick = (m1 - self.m0) / (c1 - self.c0) if c1 > self.c0 else 1e9 / tick_hz
        self.tick_hz = tick_hz
        self.violations: dict[int, list[str]] = {}

    def to_host(self, guest_tick: np.ndarray | int) -> np.ndarray:
        g = np.asarray(guest_tick, dtype=np.int64)
        return (self.m0 + np.round((g + self.offset_tick - self.c0) * self.ns_per_tick)
                ).astype(np.int64)

    @property
    def error_ns(self) -> int:
        return round(self.bound_tick * self.ns_per_tick)

    def as_dict(self, tick_hz: int = NS_HZ) -> dict[str, Any]:
        checked = len(self.violations.get(-1, []))
        bad = {k: v for k, v in self.violations.items() if k >= 0}
        how = ("the probe's own CNTPCT - CNTVCT read, which agrees with irqvmm's"
               if self.source == "probe" else
               "irqvmm: KVM_REG_ARM_TIMER_CNT between two L1 counter reads")
        return {"method": f"guest counter + CNTVOFF ({how}) -> L1 counter -> L1 "
                          f"CLOCK_MONOTONIC (gtrace's counter anchors)",
                "offset_tick": self.offset_tick, "error_bound_ns": self.error_ns,
                "lower_tick": self.offset_tick - self.bound_tick,
                "upper_tick": self.offset_tick + self.bound_tick, "anchors": 2,
                "consistent": self.ref_agrees is not False, "candidates": [],
                "l1_ns_per_tick": self.ns_per_tick,
                "causality": {"checked": checked, "violations": len(bad),
                              "samples": sorted(bad)[:50]}}


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.split(b"\0", 1)[0].decode("utf-8", "replace")
    return str(value)


class ArmKvmExplainer(Explainer):
    """Explainer (irqlab.explain.attribute) with arm64 KVM's timer path for stages and
    the cause of each step between them."""

    def __init__(self, trace: Trace, vcpu_cpu: int | None, slack_ns: int) -> None:
        super().__init__(trace)
        self.vcpu_cpu = vcpu_cpu
        self.slack_ns = slack_ns
        self.delays: dict[int, list[dict[str, Any]]] = {}
        self._irq_cpu: dict[int, int] = {}          # sample -> CPU of its host timer IRQ
        # The host's timer IRQs ("arch_timer"; "kvm guest vtimer"/"ptimer" when KVM maps
        # the guest's timer), per CPU: the background hrtimer of a blocked vCPU may
        # fire on any CPU (hrtimers migrate off idle CPUs), so the IRQ sought is the one
        # on the CPU that woke the vCPU thread.
        irq = trace.t("irq_handler_entry")
        timer = np.array(["timer" in _text(n) for n in irq.cols.get("name", [])], bool)
        ts, cpu = np.asarray(irq["ts"], np.int64), np.asarray(irq["cpu"], np.int64)
        self._timer_irq_ts = {int(c): ts[timer & (cpu == c)]
                              for c in np.unique(cpu[timer]).tolist()} if len(irq) else {}
        # The guest's own timer as a host IRQ ("kvm guest vtimer"/"ptimer"): KVM maps it
        # while the vCPU runs, e.g. in a WFI KVM did not trap (a lone task on its CPU).
        guest = np.array(["kvm guest" in _text(n) for n in irq.cols.get("name", [])], bool)
        self._guest_timer_irq_ts = {int(c): ts[guest & (cpu == c)]
                                    for c in np.unique(cpu[guest]).tolist()} \
            if len(irq) else {}

    @staticmethod
    def _first(ts: np.ndarray, mask: np.ndarray, lo: int, hi: int, last: bool = False
               ) -> int | None:
        sel = np.flatnonzero(mask & (ts >= lo) & (ts <= hi))
        if not len(sel):
            return None
        return int(ts[sel[-1] if last else sel[0]])

    def _stages(self, att: Attribution, tid: int, a: int, b: int,
                deadline_tick: int | None = None) -> None:
        lo = a - self.slack_ns
        found: dict[str, int] = {}
        missing: dict[str, str] = {}
        wk = self.trace.t("sched_waking")
        kick = None
        if len(wk):
            ts = np.asarray(wk["ts"], np.int64)
            sel = np.flatnonzero((wk["pid"] == tid) & (ts >= lo) & (ts <= b))
            kick = int(ts[sel[0]]) if len(sel) else None
        if kick is not None:
            found[KICK] = kick
            kick_cpu = int(wk["cpu"][sel[0]])
            irq = self._timer_irq_ts.get(kick_cpu, np.empty(0, np.int64))
            sel = irq[(irq >= lo) & (irq <= kick)]
            if len(sel):
                found[HOST_IRQ] = int(sel[-1])
                if self.vcpu_cpu is not None and kick_cpu != self.vcpu_cpu:
                    att.notes.append(f"the host timer IRQ that woke the vCPU came on CPU "
                                     f"{kick_cpu}, not the vCPU thread's CPU "
                                     f"{self.vcpu_cpu} (KVM's background hrtimer migrated "
                                     f"off the idle CPU)")
                self._irq_cpu[att.seq] = kick_cpu
            else:
                missing[HOST_IRQ] = "no timer IRQ before the kick (woken by another path)"
        else:
            missing[KICK] = "the vCPU thread was not blocked (preempted or running)"
            irq = self._guest_timer_irq_ts.get(self.vcpu_cpu if self.vcpu_cpu is not None
                                               else -1, np.empty(0, np.int64))
            sel = irq[(irq >= lo) & (irq <= b)]
            if len(sel):
                found[HOST_IRQ] = int(sel[0])
            else:
                missing[HOST_IRQ] = "no kick: KVM found the timer expired on its way back in"
        sw = self.trace.t("sched_switch")
        since = found.get(KICK, lo)
        switch = self._first(np.asarray(sw["ts"], np.int64), sw["next_pid"] == tid, since,
                             b) if len(sw) else None
        if switch is not None:
            found[SWITCH_IN] = switch
        else:
            missing[SWITCH_IN] = "the vCPU thread stayed on its CPU"
        up = self.trace.t("kvm_timer_update_irq")
        inject = None
        if len(up):
            mask = (up["level"] == 1) & np.isin(up["irq"], TIMER_INTIDS) \
                & (up["common_pid"] == tid)
            inject = self._first(np.asarray(up["ts"], np.int64), mask, lo, b)
        if inject is not None:
            found[INJECT] = inject
        else:
            missing[INJECT] = "no kvm_timer_update_irq at level 1 in the window"
        en = self.trace.t("kvm_entry")
        # The entry that ran the ISR: the last one before it (an exit after the first
        # entry, e.g. to a preempting task, puts the IRQ off until the next).
        entry = self._first(np.asarray(en["ts"], np.int64), en["common_pid"] == tid,
                            found.get(INJECT, lo), b, last=True) if len(en) else None
        if entry is not None:
            found[ENTRY] = entry
        else:
            missing[ENTRY] = "no kvm_entry of the vCPU thread in the window"
        att.stages = [("deadline", a)] + sorted(((s, max(a, min(t, b))) for s, t in
                                                  found.items()), key=lambda st: st[1]) \
            + [("ISR entry", b)]
        att.stages_missing = [f"{s} ({why})" for s, why in missing.items()]
        self.delays[att.seq] = self._step_delays(att, tid)

    def _step_delays(self, att: Attribution, tid: int) -> list[dict[str, Any]]:
        """Per step between consecutive stages: its length and who held the vCPU thread
        up in it (the step's causes, attributed as the whole window's), ranked by their
        inclusive share: a preempting task's time plus the IRQs that hit while it held
        the CPU (``irq_during_ns``; they are also listed as IRQs), the three largest."""
        out = []
        tl = self.threads.get(tid)
        for n, ((s0, t0), (s1, t1)) in enumerate(zip(att.stages, att.stages[1:]), 1):
            causes: dict[str, int] = defaultdict(int)
            covered = 0
            scratch = Attribution(att.seq, t1 - t0, t0, t1)
            for seg, lo, hi in (tl.between(t0, t1) if tl else []):
                covered += hi - lo
                self._segment(seg, lo, hi, causes, scratch, depth=0, follow_waker=False)
            during = dict(self._during)
            self._during.clear()
            if t1 - t0 > covered:
                causes[UNEXPLAINED] += (t1 - t0) - covered
            if s1 == HOST_IRQ and att.seq in self._irq_cpu:
                # The vCPU thread sleeps until the IRQ: what the step waited for is the
                # host's timer interrupt on the CPU that holds KVM's hrtimer.
                causes = {f"host timer IRQ late on CPU {self._irq_cpu[att.seq]}": t1 - t0}
            elif s0 == HOST_IRQ and s1 == KICK and att.seq in self._irq_cpu:
                causes = {f"host timer IRQ handler on CPU {self._irq_cpu[att.seq]} "
                          f"(hrtimer expiry to the kick)": t1 - t0}
            by = sorted(((k, v, during.get(k, 0)) for k, v in causes.items() if v),
                        key=lambda kv: -(kv[1] + kv[2]))
            out.append({"from": s0, "to": s1, "ns": t1 - t0,
                        "by": [{"cause": k, "ns": v, "irq_during_ns": d}
                               for k, v, d in by[:3]]})
            if by and t1 > t0:
                k, v, d = by[0]
                att.notes.append(f"step {n}, {s0} -> {s1}: {(t1 - t0) / 1000:.1f} us, "
                                 f"delayed by "
                                 f"{k} ({v / 1000:.1f} us"
                                 + (f", +{d / 1000:.1f} us of IRQs meanwhile)" if d else ")"))
        return out


@dataclass
class Attributed:
    """The samples of one run attributed on its KVM host's capture (store-free)."""

    samples: list[Attribution]
    explainer: ArmKvmExplainer
    clock: ArmKvmClock
    selected_by: str
    every: dict[str, np.ndarray]


def attribute(trace: Trace, samples: dict[str, np.ndarray], tick_hz: int,
              run_threshold_ns: int | None, request: Request,
              progress: Progress | None = None,
              ref: dict[str, Any] | None = None) -> Attributed:
    """Map the samples (stored columns: seq, deadline_tick, entry_tick) onto the
    capture's clock and attribute the chosen ones; StoreError when the capture cannot
    map them or ``request.sample`` is not a sample."""
    progress = progress or Silent()
    clock = ArmKvmClock(trace.header, tick_hz, ref)
    progress.stage(f"building timelines ({trace.events:,} events)")
    ex = ArmKvmExplainer(trace, trace.header.get("vcpu_cpu"),
                         STAGE_SLACK_NS + clock.error_ns)
    seq = samples["seq"].astype(np.int64)
    dl = samples["deadline_tick"].astype(np.int64)
    lat = samples["entry_tick"].astype(np.int64) - dl
    chosen = select_samples(seq, lat, tick_hz, run_threshold_ns, request.threshold_ns,
                            request.top, request.sample)
    if chosen is None:
        raise StoreError(f"no sample {request.sample}")
    idx, how = chosen
    host_dl = clock.to_host(dl)
    lat_ns = np.round(lat * 1e9 / tick_hz).astype(np.int64)
    host_en = host_dl + lat_ns
    progress.stage("attributing samples", total=len(idx))
    atts = []
    for k, i in enumerate(idx.tolist()):
        att = ex.explain(int(seq[i]), int(host_dl[i]), int(host_en[i]), int(lat_ns[i]),
                         deadline_tick=int(dl[i]), follow_waker=False)
        if att.status == "explained":
            clock.violations.setdefault(-1, []).append("checked")
            bad = [n for n in att.notes if n.startswith("causality:")]
            if bad:
                clock.violations[att.seq] = bad
        atts.append(att)
        if k % 64 == 0:
            progress.update(k + 1)
    progress.update(len(atts))
    every = {"seq": seq, "latency_tick": lat_ns, "host_deadline": host_dl,
             "host_entry": host_en}
    return Attributed(atts, ex, clock, how, every)


def explain_kvm_arm64(store: Store, run: RunRow, request: Request,
                      progress: Progress) -> tuple[dict[str, Any], Explained]:
    """(explain object, the Explained the file writers take)."""
    if not run.tick_hz:
        raise StoreError(f"run {run.run_id} has no tick rate (it never ran)")
    path = capture_path(store, run)
    progress.stage(f"decoding the KVM host's capture ({path.stat().st_size / 1e6:.1f} MB "
                   f"gzip)")
    trace = load_capture(path)
    try:
        at = attribute(trace, stored_samples(store, run.run_id), int(run.tick_hz),
                       run.threshold_ns, request, progress,
                       (run.metadata.get("probe") or {}).get("ref_counter"))
    except StoreError as exc:
        raise StoreError(f"run {run.run_id}: {exc}") from None
    res = Explained(run, trace, at.clock, at.samples, aggregate(at.samples),
                    at.selected_by, NS_HZ, at.explainer, at.every)
    return as_json(res, at.clock, at.explainer), res


def as_json(res: Explained, clock: ArmKvmClock, ex: ArmKvmExplainer) -> dict[str, Any]:
    """The ``{"type": "explain"}`` object (docs/formats.md §9, source "kvm-arm64")."""
    hdr = res.trace.header
    fired = res.trace.fired()
    js = {
        "type": "explain", "version": 1, "run_id": res.run.run_id, "source": KIND,
        "selected_by": res.selected_by, "clock": clock.as_dict(),
        "events": res.trace.events, "host_kernel": hdr.get("kernel"),
        "events_missing": hdr.get("missing", []),
        "events_never_fired": [e for e in hdr.get("enabled", [])
                               if e.split(":", 1)[1] not in fired],
        "lost_regions": [{"cpu": c, "from_ns": lo - ex.span[0], "to_ns": hi - ex.span[0],
                          "why": why} for c, lo, hi, why in ex.lost],
        "vcpu_thread": {"tid": (ex.vcpus or [None])[0], "cpu": ex.vcpu_cpu},
        **attributed_json(res.samples, res.culprits, int, STAGE_ORDER),
    }
    for sample in js["samples"]:
        sample["stage_delays"] = ex.delays.get(sample["seq"], [])
    return js


class KvmArm64Explainer:
    """An arm64 KVM guest's spikes from its (nested) KVM host's ftrace."""

    kind = KIND
    title = "arm64 KVM host (the L1 kernel's ftrace around the vCPU thread)"
    outputs = ("dat", "text", "perfetto", "chrome_json")

    def outputs_hint(self, run: RunRow) -> str:
        return ""

    def explain(self, store: Store, run: RunRow, request: Request,
                progress: Progress) -> Explanation:
        js, res = explain_kvm_arm64(store, run, request, progress)
        meta = hook_meta(run, "trace")
        tid = (meta.get("vcpu_tids") or [None])[0]
        return Explanation(js, tracefs_writers(
            res, capture_path(store, run),
            (tid, "vCPU thread (KVM host)") if tid is not None else None))
