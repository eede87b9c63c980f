"""The explainer of a Linux-guest run (kind ``linux-guest``: ``irqlab run --target
linux-guest --trace``): each spike of the probe inside the guest, attributed across the
guest/host boundary. Every cause names its layer as its first word.

**Guest side.** The guest kernel's own capture (irqlab.trace.guest, on the guest's
CLOCK_MONOTONIC, the clock the probe's samples are read on, so the map is exact) is read
exactly as a native run's (irqlab.explain.native: stages deadline → timer IRQ entry →
probe woken → switched in → handler; ``preempted by COMM/PID prio P``, IRQs, softirqs,
IRQ latency inferred from the gap) and each cause gets ``guest: ``.

**Host side.** The host capture around QEMU (irqlab.trace.capture, trace clock x86-tsc)
is followed along the vCPU thread of the sample's guest CPU (irqlab.explain.attribute):
the time that thread could not run guest code — preempted (``host: vCPU thread
preempted by COMM/PID``), stopped, host hard/soft IRQs on its CPU — is a host-side cause;
the time it ran (or halted, the guest idle waiting for its timer) is the guest's, which
the guest side explains. The guest's clock runs on while its vCPU thread is off the CPU,
and the guest would charge that time to whatever it last ran; so the guest's causes are
taken over the on-CPU pieces of the window only: the periods the host shows the vCPU
thread runnable or stopped are mapped into guest time and cut out (the native
attribution is additive over a window's prefixes: causes of [p, q] = causes of [a, q] -
causes of [a, p]). What is left (host IRQs inside run periods, mapping error) is closed
by scaling the guest's causes, so a sample's causes add up to its latency.

**TCG's timers.** Under TCG the guest's timer interrupt is raised by QEMU's main-loop
thread (it runs QEMU's timers, then kicks the vCPU thread), so a guest timer IRQ entered
late while its vCPU thread ran (the guest says ``IRQ latency in …``) can be the host's
doing: the time that thread was runnable on the host inside that part of the window is
taken from the guest's ``IRQ latency`` causes and named ``host: QEMU main loop (TCG's
timers) preempted by COMM/PID``.

**Clock (guest → host).** The samples are guest CLOCK_MONOTONIC ns; the host capture is
on the host TSC (x86) or the host's CLOCK_MONOTONIC (arm64). The guest reads its
CLOCK_MONOTONIC and its counter back to back at the start and at every drain of its
trace (``guest_anchors``), which gives the counter as a linear function of guest ns; the
host capture's ring-read anchors (a sample seen between two trace markers,
irqlab.explain.clock) then bound the counter → host offset and check the candidates.
x86: the counter is the guest TSC (candidates: plain TCG guest TSC = host TSC, KVM
debugfs tsc-offset; QEMU 7.2's TCG TSC counts from the VM's start, so the anchors reject
that candidate there, by the host TSC at the start). arm64: the counter is CNTVCT_EL0,
taken in ns at its rate (``guest_counter_hz``, 62.5 MHz under QEMU: 16 ns a tick); under
TCG it is QEMU's virtual clock, the host's CLOCK_MONOTONIC plus a constant set when the
VM started (irqlab.runner.linux_arch), so the rate is 1 and the offset, which no
candidate gives, is fitted from the anchors alone. Either way the bounds are then
refined by the ISR entries and by the guest trace's own events on the vCPU's guest CPU
(each recorded while the guest ran, so inside one of the vCPU thread's run periods), and
without an accepted candidate the offset is their middle. The bound is reported as
``error_bound_ns``: the fit's, plus one counter tick on arm64 (the anchors'
resolution), plus half the wider anchor's clock-read gap (region v2: the guest ns →
counter line is that far off at most between its two anchors, which bracket the run).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.explain.attribute import (UNEXPLAINED, VCPU_BLOCKED, VCPU_RUNNING, Attribution,
                                      Explainer, aggregate)
from irqlab.explain.clock import check_causality, fit_clock, refine_with_causality
from irqlab.explain.host import tracefs_writers
from irqlab.explain.load import Trace, decode_capture
from irqlab.explain.native import (STAGE_ORDER, NativeAttributor, explain_native,
                                   probe_threads_named, switch_priorities)
from irqlab.explain.run import Explained, capture_path
from irqlab.explain.seam import Explanation, Progress, Request, stored_samples
from irqlab.explain.shape import attributed_json
from irqlab.explain.timeline import RUNNABLE, STOPPED
from irqlab.store import Store, StoreError
from irqlab.store.db import RunRow
from irqlab.trace.archive import read_archive
from irqlab.trace.guest import guest_trace_file_for

# Host-side states of the vCPU thread that are the guest's own time (running guest code,
# or halted waiting for the guest's timer): the guest side explains them.
GUEST_TIME = (VCPU_RUNNING, VCPU_BLOCKED)


class GuestHostClock:
    """guest CLOCK_MONOTONIC ns -> guest counter (guest anchors; x86: TSC ticks, arm64:
    CNTVCT_EL0 in ns) -> host trace ticks (offset fitted on the host capture's ring-read
    anchors)."""

    def __init__(self, anchors: list[dict[str, int]], counter_hz: int = 0) -> None:
        """``counter_hz``: the counter's rate when the architecture gives it (arm64's
        CNTFRQ_EL0; the counter is then taken in ns, the host's mono clock's unit), 0 for
        the TSC (taken as it is)."""
        if len(anchors) < 2 or anchors[1]["mono_ns"] <= anchors[0]["mono_ns"]:
            raise ValueError("the guest capture has no two clock anchors")
        self.counter_hz = int(counter_hz or 0)
        a0, a1 = anchors[0], anchors[1]
        self.m0, self.t0 = int(a0["mono_ns"]), self._ticks(a0["tsc"])
        self.rate = (self._ticks(a1["tsc"]) - self.t0) / (int(a1["mono_ns"]) - self.m0)
        # Each anchor's clock reading is within half its two reads' gap of the counter's
        # (region v2); the line through both is then that far off at most between them.
        self.anchor_error_ns = max(int(a.get("gap_ns") or 0) for a in (a0, a1)) // 2 + 1 \
            if any("gap_ns" in a for a in (a0, a1)) else 0
        self.offset = 0                 # guest counter - host tick, set by fit()
        self.fitted: Any = None

    def _ticks(self, counter: int) -> int:
        """A counter reading in the clock's unit (ns at ``counter_hz``, else as is)."""
        c = int(counter)
        return c * 1_000_000_000 // self.counter_hz if self.counter_hz else c

    @property
    def counter_tick_ns(self) -> int:
        """One counter tick in ns (0: the TSC, finer than the anchors' own error)."""
        return -(-1_000_000_000 // self.counter_hz) if self.counter_hz else 0

    def guest_tsc(self, mono_ns: np.ndarray | int) -> np.ndarray:
        m = np.asarray(mono_ns, dtype=np.int64)
        return (self.t0 + np.round((m - self.m0) * self.rate)).astype(np.int64)

    def to_host(self, mono_ns: np.ndarray | int) -> np.ndarray:
        return self.guest_tsc(mono_ns) - self.offset

    def to_guest(self, host_tick: int) -> int:
        return self.m0 + round((host_tick + self.offset - self.t0) / self.rate)

    def fit(self, host: Trace, seq: np.ndarray, entry_ns: np.ndarray, accel: str,
            ex: Explainer, vcpu_tid: int | None,
            guest_events_ns: np.ndarray | None = None) -> None:
        """Fit the guest TSC -> host offset on the host capture's anchors, whose sample
        entries are guest ns like the samples (converted here, as the samples are).
        ``guest_events_ns``: the guest trace's events on the vCPU's guest CPU; they
        refine the bounds too: each was recorded while the guest ran, so inside one of
        the vCPU thread's run periods, as an ISR entry is."""
        anchors = host.header.get("anchors", [])
        host.header["anchors"] = [[n, head, int(self.guest_tsc(seen)) if seen else 0]
                                  for n, head, seen in anchors]
        try:
            entry = self.guest_tsc(entry_ns)
            tl = ex.threads.get(vcpu_tid) if vcpu_tid is not None else None
            # Plain TCG's guest TSC is the host's; an arm64 guest's counter is not.
            clock = fit_clock(host, seq, entry, accel, tl, vcpu_tid=vcpu_tid,
                              tcg_host_counter=not self.counter_hz)
            if tl is not None:
                # One vote of both kinds of guest time (the offsets most of them allow):
                # refined one kind after the other, a wrong first pass left the second
                # nothing to correct.
                times, what = entry, "ISR entries"
                if guest_events_ns is not None and len(guest_events_ns):
                    times = np.sort(np.concatenate([entry,
                                                    self.guest_tsc(guest_events_ns)]))
                    what = "ISR entries and guest trace events"
                clock = refine_with_causality(clock, tl, times, what=what)
            if clock.consistent and clock.lower is not None and clock.upper is not None \
                    and not any(c.get("status") == "accepted" for c in clock.candidates):
                # No candidate to keep: the middle of what the anchors leave.
                clock = replace(clock, offset=(clock.lower + clock.upper) // 2,
                                error=(clock.upper - clock.lower + 1) // 2)
            self.fitted = check_causality(clock, seq, entry)
        finally:
            host.header["anchors"] = anchors
        self.offset = int(self.fitted.offset)

    def as_dict(self) -> dict[str, Any]:
        """The explain object's ``clock`` (docs/formats.md §9, source "linux-guest")."""
        c = self.fitted
        host = c.as_dict(1_000_000_000) if c is not None else {}
        bound = (round(c.error / self.rate) + self.counter_tick_ns + self.anchor_error_ns
                 if c is not None else None)
        path = ("guest ns -> guest CNTVCT_EL0 in ns (guest anchors, "
                f"{self.counter_hz} Hz) -> host CLOCK_MONOTONIC (TCG: QEMU's virtual "
                "clock, one offset)" if self.counter_hz
                else "guest ns -> guest TSC (guest anchors) -> host TSC")
        return {
            "method": "guest side exact (guest trace on the samples' CLOCK_MONOTONIC); "
                      f"host side: {path} ("
                      + (c.method if c is not None else "no host capture") + ")",
            "offset_tick": self.offset, "error_bound_ns": bound,
            "lower_tick": host.get("lower_tick"), "upper_tick": host.get("upper_tick"),
            "anchors": host.get("anchors", 0), "consistent": host.get("consistent", False),
            "candidates": host.get("candidates", []),
            "causality": host.get("causality", {"checked": 0, "violations": 0,
                                                "samples": []}),
            "guest_tsc_per_ns": self.rate,
            "guest_counter_hz": self.counter_hz,
            "anchor_error_ns": self.anchor_error_ns,
        }


def _host_label(cause: str) -> str:
    """A host-vcpu cause with its layer ("preempted by" says whose: the vCPU thread's)."""
    return "host: " + ("vCPU thread " + cause if cause.startswith("preempted by ") else cause)


def _floor_shares(parts: dict[str, int], total: int) -> dict[str, int]:
    """``parts`` scaled to ``total`` by floor shares (they add up to at most ``total``;
    none negative)."""
    whole = sum(max(0, v) for v in parts.values())
    return {k: (max(0, v) * total // whole if whole else 0) for k, v in parts.items()}


def merge(g: Attribution, host: dict[str, int] | None) -> Attribution:
    """One sample's causes across both layers (module doc): host-side causes as they
    are, the guest's (``g``: over the vCPU's on-CPU pieces) scaled into the rest; they
    add up to the latency exactly and none is negative. Host causes that add up to more
    than the latency (the window's time counted twice: mapping error at its edges) are
    scaled down to it, and the guest's get nothing."""
    out = Attribution(g.seq, g.latency_tick, g.start, g.end, g.status, g.reason)
    out.stages, out.stages_missing = g.stages, g.stages_missing
    out.notes = list(g.notes)
    if g.status != "explained":
        out.causes = dict(g.causes)
        return out
    host = {k: v for k, v in (host or {}).items() if v > 0}
    if sum(host.values()) > g.latency_tick:
        host = _floor_shares(host, g.latency_tick)
    rest = g.latency_tick - sum(host.values())
    causes: dict[str, int] = defaultdict(int)
    for k, v in host.items():
        causes[k] += v
    scaled = {(k if k == UNEXPLAINED else f"guest: {k}"): v
              for k, v in _floor_shares(g.causes, rest).items()}
    for k, v in scaled.items():
        causes[k] += v
    # Floor shares leave a few ns: to the largest guest cause, else the largest host
    # cause, else unexplained.
    left = g.latency_tick - sum(causes.values())
    if left:
        pool = scaled if sum(scaled.values()) else host
        top = max(pool, key=lambda k: pool[k]) if pool else UNEXPLAINED
        causes[top] += left
    causes.setdefault(UNEXPLAINED, 0)
    out.causes = dict(causes)
    return out


def _outside(lo: int, hi: int, off: list[tuple[int, int]]) -> int:
    """How much of [lo, hi] lies outside the sorted, disjoint periods ``off``."""
    inside = sum(max(0, min(hi, q) - max(lo, p)) for p, q in off)
    return max(0, hi - lo - inside)


class HostSide:
    """The host capture, asked one guest window at a time."""

    def __init__(self, trace: Trace, clock: GuestHostClock, tcg: bool) -> None:
        self.ex = Explainer(trace)
        self.clock = clock
        self.vcpu_by_cpu = self._vcpus(trace.header.get("vmm_threads", {}))
        # QEMU's main thread is its process (tid = pid); only TCG fires guest timers there.
        pid = trace.header.get("vmm_pid")
        self.main_tid = int(pid) if tcg and pid is not None else None

    @staticmethod
    def _vcpus(threads: dict[str, str]) -> dict[int, int]:
        """guest CPU -> its vCPU thread (QEMU names them "CPU N/KVM", "CPU N/TCG")."""
        out = {}
        for tid, comm in threads.items():
            if comm.startswith("CPU ") and "/" in comm:
                try:
                    out[int(comm[4:comm.index("/")])] = int(tid)
                except ValueError:
                    continue
        return out

    def causes(self, att: Attribution, cpu: int
               ) -> tuple[dict[str, int] | None, list[tuple[int, int]], str | None]:
        """Host-side causes in guest ns, the periods (guest ns) the vCPU thread was off
        its CPU, or (None, [], why not)."""
        tid = self.vcpu_by_cpu.get(cpu, self.ex.vcpus[0] if self.ex.vcpus else None)
        if tid is None:
            return None, [], "host: no vCPU thread in the host capture"
        a, b = (int(x) for x in self.clock.to_host(np.array([att.start, att.end])))
        # The waker's (QEMU main loop's) delay is timer_path's, named as the main loop's:
        # followed here too, it came back as "vCPU thread preempted by ..." and twice.
        h = self.ex.explain(att.seq, a, b, b - a, vcpu=tid, follow_waker=False)
        if h.status != "explained":
            return None, [], f"host: {h.reason}"
        tl = self.ex.threads.get(tid)
        off = [(max(att.start, self.clock.to_guest(lo)), min(att.end, self.clock.to_guest(hi)))
               for seg, lo, hi in (tl.between(a, b) if tl else [])
               if seg.state in (RUNNABLE, STOPPED)]
        per_ns = self.clock.rate
        return ({_host_label(k): round(v / per_ns) for k, v in h.causes.items()
                 if k not in GUEST_TIME and k != UNEXPLAINED and v > 0},
                [(p, q) for p, q in off if q > p], None)


    def timer_path(self, g: Attribution, off: list[tuple[int, int]]) -> dict[str, int]:
        """Host time (guest ns) QEMU's main loop was runnable while the guest waited for
        its timer IRQ (deadline to timer IRQ entry) and its vCPU thread was on the CPU
        (``off``: the periods it was not, already host causes of their own; counted
        again, a sample's causes added up to more than its latency): {host cause: ns};
        TCG only."""
        tl = self.ex.threads.get(self.main_tid) if self.main_tid is not None else None
        t_irq = next((t for name, t in g.stages if name == "timer IRQ entry"), None)
        if tl is None or t_irq is None or t_irq <= g.start:
            return {}
        a, b = (int(x) for x in self.clock.to_host(np.array([g.start, t_irq])))
        out: dict[str, int] = defaultdict(int)
        for seg, lo, hi in tl.between(a, b):
            if seg.state != RUNNABLE:
                continue
            for l2, h2, pid, comm in self.ex.runs.pieces(seg.cpu, lo, hi):
                who = "the CPU idle" if pid == 0 else "?" if pid < 0 else f"{comm}/{pid}"
                out[f"host: QEMU main loop (TCG's timers) preempted by {who}"] += \
                    _outside(self.clock.to_guest(l2), self.clock.to_guest(h2), off)
        return dict(out)


def take_from_irq_latency(g: Attribution, host_timer: dict[str, int]) -> dict[str, int]:
    """Move up to the guest's ``IRQ latency`` time to the host's timer-path causes;
    returns what was moved (the host causes, as much as there was to take)."""
    moved: dict[str, int] = {}
    pool = [k for k in g.causes if k.startswith("IRQ latency")]
    for label, want in host_timer.items():
        got = 0
        for k in pool:
            take = min(g.causes[k], want - got)
            g.causes[k] -= take
            got += take
        if got:
            moved[label] = got
    return moved


class OnCpuGuest:
    """The guest's causes of a window without the pieces its vCPU was off the CPU."""

    def __init__(self, nat: NativeAttributor) -> None:
        self.nat = nat

    def causes(self, g: Attribution, cpu: int, off: list[tuple[int, int]]
               ) -> Attribution:
        if not off or g.status != "explained":
            return g
        nat = self.nat
        tid = nat.probe_tid(cpu, g.end)
        # Prefix windows [a, x] keep the sample's own probe thread (the one running at
        # its entry) and its first timer IRQ: F(q) - F(p) is then the piece [p, q].
        keep = nat.probe_tid
        nat.probe_tid = lambda _c, _b: tid            # type: ignore[method-assign]
        try:
            causes = defaultdict(int, g.causes)
            for p, q in off:
                fq = nat.explain(g.seq, g.start, q, cpu).causes
                fp = nat.explain(g.seq, g.start, p, cpu).causes if p > g.start else {}
                for k in set(fq) | set(fp):
                    causes[k] -= fq.get(k, 0) - fp.get(k, 0)
        finally:
            nat.probe_tid = keep                       # type: ignore[method-assign]
        out = Attribution(g.seq, g.latency_tick, g.start, g.end, g.status, g.reason)
        out.stages, out.stages_missing, out.notes = g.stages, g.stages_missing, g.notes
        out.causes = {k: max(0, v) for k, v in causes.items()}
        return out


def guest_events_on(trace: Trace, cpu: int) -> np.ndarray:
    """The sorted times (guest ns) of every event the guest trace recorded on ``cpu``."""
    parts = [t["ts"][t["cpu"] == cpu].astype(np.int64)
             for t in trace.tables.values() if len(t) and "cpu" in t.cols]
    return np.sort(np.concatenate(parts)) if parts else np.empty(0, np.int64)


def explain_linux_guest(store: Store, run: RunRow, request: Request,
                        progress: Progress) -> tuple[dict[str, Any], Explained, int | None]:
    """(explain object, the guest side's Explained for the file writers, probe tid)."""
    meta = ((run.metadata or {}).get("hooks") or {}).get("trace") or {}
    guest_meta = meta.get("guest") or {}
    gpath = Path(guest_meta.get("file") or guest_trace_file_for(store.path, run.run_id))
    if not gpath.exists():
        raise StoreError(f"run {run.run_id} has no guest capture ({gpath} missing: "
                         f"{guest_meta.get('why', 'the guest recorded none')}); record one "
                         f"with `irqlab run --target linux-guest --trace`")
    progress.stage(f"decoding the guest capture ({gpath.stat().st_size / 1e6:.1f} MB gzip)")
    gheader, gpages = read_archive(gpath)
    gtrace = decode_capture(gheader, gpages)
    gheader["vmm_threads"] = probe_threads_named(gtrace)
    prio = switch_priorities(gheader, gpages)
    del gpages
    s = stored_samples(store, run.run_id)
    progress.stage(f"attributing guest side ({gtrace.events:,} guest events)")
    res, tid = explain_native(run, gtrace, s, request, prio)
    on_cpu = OnCpuGuest(NativeAttributor(res.explainer, prio, sorted(res.explainer.vmm)))
    clock = GuestHostClock(gheader.get("guest_anchors", []),
                           gheader.get("guest_counter_hz", 0))
    host: HostSide | None = None
    host_why = None
    try:
        hpath = capture_path(store, run)
        progress.stage(f"decoding the host capture ({hpath.stat().st_size / 1e6:.1f} MB "
                       f"gzip)")
        htrace = decode_capture(*read_archive(hpath))
        host = HostSide(htrace, clock, (run.accel or "").startswith("tcg"))
        cpu0 = min(host.vcpu_by_cpu) if host.vcpu_by_cpu else None
        clock.fit(htrace, s["seq"].astype(np.int64), s["entry_tick"].astype(np.int64),
                  run.accel or "", host.ex, host.vcpu_by_cpu.get(cpu0) if cpu0 is not None
                  else None, guest_events_on(gtrace, cpu0 if cpu0 is not None else 0))
    except StoreError as exc:
        host_why = str(exc)
    cpu_of = dict(zip(s["seq"].astype(np.int64).tolist(), s["cpu"].astype(np.int64).tolist()))
    progress.stage("attributing host side", total=len(res.samples))
    merged = []
    for k, g in enumerate(res.samples):
        cpu = cpu_of.get(g.seq, 0)
        hc, off, why = (host.causes(g, cpu) if host is not None
                        else (None, [], f"host: {host_why}"))
        g = on_cpu.causes(g, cpu, off)
        if hc is not None and host is not None and g.status == "explained":
            hc.update(take_from_irq_latency(g, host.timer_path(g, off)))
        att = merge(g, hc)
        if why:
            att.notes.append(why)
        merged.append(att)
        if k % 64 == 0:
            progress.update(k + 1)
    res.samples = merged
    res.culprits = aggregate(merged)
    return _as_json(res, clock, gheader, host), res, tid


def _as_json(res: Explained, clock: GuestHostClock, gheader: dict[str, Any],
             host: HostSide | None) -> dict[str, Any]:
    fired = res.trace.fired()
    enabled = gheader.get("enabled", [])
    return {
        "type": "explain", "version": 1, "run_id": res.run.run_id, "source": "linux-guest",
        "selected_by": res.selected_by,
        "clock": clock.as_dict() if host is not None else
        {"method": "guest side exact; no host capture", "offset_tick": 0,
         "error_bound_ns": None, "anchors": 0, "consistent": False, "candidates": []},
        "events": res.trace.events + (host.ex.trace.events if host else 0),
        "guest_events": res.trace.events,
        "host_events": host.ex.trace.events if host else 0,
        "guest_kernel": gheader.get("kernel"),
        "events_missing": [f"guest {e}" for e in gheader.get("missing", [])],
        "events_never_fired": [f"guest {e}" for e in enabled
                               if e.split(":", 1)[1] not in fired],
        "lost_regions": [{"cpu": c, "from_ns": res.ns(lo - res.explainer.span[0]),
                          "to_ns": res.ns(hi - res.explainer.span[0]),
                          "why": f"guest: {why}"}
                         for c, lo, hi, why in res.explainer.lost],
        "probe_threads": {str(t): c for t, c in sorted(res.explainer.vmm.items())},
        **attributed_json(res.samples, res.culprits, res.ns, STAGE_ORDER),
    }


class LinuxGuestExplainer:
    """A Linux guest's spikes from its own kernel's capture and the host's."""

    kind = "linux-guest"
    title = "Linux guest (the guest kernel's ftrace and the host's around its vCPU)"
    outputs = ("dat", "text", "perfetto", "chrome_json")

    def outputs_hint(self, run: RunRow) -> str:
        return ""

    def explain(self, store: Store, run: RunRow, request: Request,
                progress: Progress) -> Explanation:
        js, res, tid = explain_linux_guest(store, run, request, progress)
        gpath = Path((((run.metadata or {}).get("hooks") or {}).get("trace") or {})
                     .get("guest", {}).get("file")
                     or guest_trace_file_for(store.path, run.run_id))
        # The files are the guest kernel's events (the host's: the same run's host
        # capture, `irqlab explain` of a host-vcpu run writes those).
        return Explanation(js, tracefs_writers(
            res, gpath, (tid, "probe thread (guest)") if tid is not None else None,
            "handler"))
