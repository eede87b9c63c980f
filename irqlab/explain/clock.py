"""Guest ticks -> host trace clock: ``host = guest - offset``, with an error bound.

Anchors are the capture thread's ring reads bracketed by two trace markers a, b:
a record seen in that read was entered (guest TSC ``e``) before the read, so
``guest(T_b) >= e``, i.e. ``offset >= e - T_b``, always. The next record (``seq == head``
at the read) was not yet published, but its ISR may already have read the TSC: it reads it
first and publishes the record last, and a vCPU thread preempted, stopped or simply busy
in between delays the publication by any amount (seen: 7-360 us). So ``e_next >= guest(T_a)``
(``offset <= e_next - T_a``) holds only if that ISR had not started at ``T_a``, which the
trace shows when the vCPU thread was blocked at ``T_a`` (halted, or woken but not yet
run since): the ISR's path from its TSC read to the publishing store touches only guest
RAM, so the thread never blocks inside it. Other anchors give no upper bound, and an
upper bound below the lower one is dropped as proven wrong in any case.
The tightest of those bounds give the offset and its error bound; under plain TCG the
guest TSC was expected to be the host TSC (QEMU's rdtsc helper reads it), so offset 0 is
a candidate, used exactly when it falls within the bounds. On QEMU 7.2 it does not: the
anchors put the offset at the host's TSC at VM start (the guest TSC counts from there),
so the candidate is rejected and the bounds' middle is used, as it says. Under KVM,
debugfs ``tsc-offset`` (read
by the capture, irqlab.trace.capture.KvmDebugfs) and ``kvm_write_tsc_offset`` give
candidates that are checked against the same bounds.

**kvm_msr deadline anchors** (KVM, TSC-deadline mode). The probe arms deadline D_j with
``wrmsr(IA32_TSC_DEADLINE, D_j)`` inside the ISR of sample j-1, after that ISR read its
entry tick e_{j-1} (probes/guest/x86_64/main.c, timer_isr() -> probe_timer_rearm()). KVM
traces the write while handling the guest's WRMSR (arch/x86/kvm/x86.c,
kvm_emulate_wrmsr() -> trace_kvm_msr_write()), i.e. at a host time T when the guest is
stopped inside that instruction, and ``data`` is D_j exactly, which identifies the sample.
So ``guest(T) >= e_{j-1}`` (``offset >= e_{j-1} - T``) and, because the ISR of sample j
runs only after its deadline was armed, ``guest(T) < e_j`` (``offset <= e_j - T``).
``guest(T) < D_j`` is *not* used: a vCPU thread delayed between the ISR's TSC read and its
WRMSR arms an already-passed deadline without the record saying so (the overrun flag is
decided at that earlier TSC read). The upper side of such a pair is weak (about one
period); a tight one comes from the halt wakeups between two consecutive arming events:
``kvm_vcpu_wakeup`` is traced in the vCPU thread when a guest HLT ends
(virt/kvm/kvm_main.c, kvm_vcpu_halt()), before the guest runs again, and the ISR between
the two WRMSRs contains no HLT, so every such wakeup W precedes e_j:
``offset <= e_j - W``. Events are matched by exact ``data`` == a stored deadline, only the
first write of a value counts, and a wakeup pair needs both arming events present (an
event lost from the trace can only remove a bound, never create a wrong one).

**kvm_eoi anchors** (a tighter lower side). The ISR of sample j writes the LAPIC EOI
register after its ring push and before the WRMSR arming D_{j+1} (main.c, timer_isr()),
so that write happens after its TSC read e_j. KVM traces ``kvm_eoi`` in the vCPU thread
while handling such a write (arch/x86/kvm/lapic.c, kvm_lapic_reg_write(APIC_EOI) ->
apic_set_eoi() -> trace_kvm_eoi(); also apic_sync_pv_eoi_from_guest() and
kvm_apic_set_eoi_accelerated()), with ``vector`` the highest in-service vector, -1 when
none is. If T is the host time of the EOI event of ISR j: ``guest(T) >= e_j``, i.e.
``offset >= e_j - T``. The EOI events of the vCPU thread (``common_pid``) whose vector is
the timer's or -1 are taken between two consecutive matched arming writes (D_j, then
D_{j+1} written by ISR j: both present, as for the wakeups), and the *last* of them is
the anchor of sample j: nothing runs between the EOI write and the WRMSR, so an event
after the guest's EOI is no earlier one. Not every kvm_eoi is the guest's write, though:
the software backend measured here (kvm_pvm) traces two per ISR, ``vector 64`` about 3.5 us
after ``kvm_apic_accept_irq`` and *before* the ISR's TSC read (as anchors they contradict
the wakeup bounds by 4 us), then ``vector -1`` >= 60 us after that read and ~35 us
before the WRMSR: the guest's write, finding the in-service bit already cleared. So a
window is used only when its EOI vectors are exactly the most frequent window pattern
(here ``(64, -1)``, upstream KVM ``(64,)``): a lost guest EOI leaves a shorter pattern, and
the window is skipped rather than anchored on an earlier event. The timer vector is read
from the trace (the most frequent ``kvm_apic_accept_irq``/``kvm_inj_virq`` vector inside the
windows, else the most frequent non-negative EOI vector there), not assumed; EOIs of other
vectors (another interrupt's handler) are ignored. Finally the EOI lower bound must not
exceed the tightest upper bound of the other sources: if it does, the events do not mean
what this model says on this host, and the source is reported as rejected, not used.

All lower bounds and all upper bounds are combined (max / min). ``check_causality``
then checks every matched host event against its sample's mapped window at the chosen
offset and flags the samples whose events fall outside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from irqlab.explain.load import Trace
from irqlab.explain.timeline import RUNNABLE, SLEEPING, ThreadTimeline
from irqlab.trace.capture import ANCHOR_PREFIX

# IA32_TSC_DEADLINE (Intel SDM vol. 3, "TSC-Deadline Mode"; Linux MSR_IA32_TSC_DEADLINE).
MSR_TSC_DEADLINE = 0x6E0
RING_READS = "ring-read anchors"
MSR_ANCHORS = "kvm_msr deadline anchors"
WAKE_ANCHORS = "halt wakeups between kvm_msr anchors"
EOI_ANCHORS = "guest EOIs between kvm_msr anchors"
_MAX_LISTED = 100               # samples listed by seq in the causality summary


@dataclass
class SourceBounds:
    """Bounds on the offset from one kind of anchor: the tightest lower one, all uppers
    (each is checked against the combined lower bound before use)."""

    name: str
    lower: int | None = None
    uppers: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    used: int = 0
    rejected: str | None = None   # why this source's bounds are not combined
    extra: dict[str, Any] = field(default_factory=dict)   # source-specific JSON keys

    @property
    def upper(self) -> int | None:
        return int(self.uppers.min()) if len(self.uppers) else None

    def as_dict(self, tick_hz: int) -> dict[str, Any]:
        lo, hi = self.lower, self.upper
        width = None if lo is None or hi is None else round((hi - lo) * 1e9 / tick_hz)
        out = {"used": self.used, "lower_tick": lo, "upper_tick": hi, "width_ns": width}
        if self.rejected is not None:
            out["rejected"] = self.rejected
        out.update(self.extra)
        return out


@dataclass
class MsrMatch:
    """kvm_msr writes of IA32_TSC_DEADLINE matched to samples (indices into the sample
    arrays), and the halt wakeups between consecutive matched writes."""

    ts: np.ndarray                # host time of the write
    idx: np.ndarray               # sample whose deadline it armed (j)
    prev: np.ndarray              # sample whose ISR wrote it (j-1), -1 when not stored
    wake_ts: np.ndarray           # last vCPU halt wakeup between two arming writes
    wake_idx: np.ndarray          # sample whose ISR followed that wakeup

    @staticmethod
    def empty() -> MsrMatch:
        z = np.empty(0, np.int64)
        return MsrMatch(z, z, z, z, z)


@dataclass
class EoiMatch:
    """The guest's EOI of each ISR, from kvm_eoi between consecutive arming writes."""

    ts: np.ndarray                # host time of the EOI anchor (last EOI of the window)
    idx: np.ndarray               # sample whose ISR wrote it (j)
    vector: int | None = None     # the timer vector found in the trace
    pattern: tuple[int, ...] = ()  # EOI vectors of the most frequent window
    windows: int = 0              # windows between two consecutive arming writes
    skipped: int = 0              # windows whose EOI vectors differ from the pattern

    @staticmethod
    def empty() -> EoiMatch:
        z = np.empty(0, np.int64)
        return EoiMatch(z, z)


@dataclass
class ClockMap:
    offset: int                   # guest tick - host trace tick
    error: int                    # +- ticks
    method: str
    lower: int | None = None
    upper: int | None = None
    anchors: int = 0              # ring-read anchors used
    consistent: bool = True
    msr_anchors: int = 0          # kvm_msr deadline writes matched to samples
    eoi_anchors: int = 0          # kvm_eoi anchors used (0 when rejected)
    sources: dict[str, SourceBounds] = field(default_factory=dict)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    uppers_dropped: int = 0       # upper bounds below the combined lower bound
    causality: dict[str, Any] | None = None
    violations: dict[int, list[str]] = field(default_factory=dict, repr=False)
    msr: MsrMatch | None = field(default=None, repr=False, compare=False)
    eoi: EoiMatch | None = field(default=None, repr=False, compare=False)

    def to_host(self, guest_tick: np.ndarray | int):
        return np.asarray(guest_tick, dtype=np.int64) - self.offset

    def as_dict(self, tick_hz: int) -> dict:
        out = {"method": self.method, "offset_tick": self.offset,
               "error_bound_ns": round(self.error * 1e9 / tick_hz),
               "lower_tick": self.lower, "upper_tick": self.upper,
               "anchors": self.anchors, "consistent": self.consistent}
        # Added keys (docs/formats.md section 9); the ones above keep their meaning.
        out.update({
            "msr_anchors": self.msr_anchors,
            "eoi_anchors": self.eoi_anchors,
            "bounds_by_source": {k: v.as_dict(tick_hz) for k, v in self.sources.items()},
            "uppers_dropped": self.uppers_dropped,
            "candidates": self.candidates,
            "causality": self.causality or {"checked": 0, "violations": 0, "samples": []},
        })
        return out


def marker_times(trace: Trace) -> dict[tuple[str, int], int]:
    """{("a"|"b", n): ts} of the anchor markers."""
    t = trace.t("print")
    out: dict[tuple[str, int], int] = {}
    if not len(t):
        return out
    for ts, text in zip(t["ts"].tolist(), t["buf"].tolist()):
        s = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        if s.startswith(ANCHOR_PREFIX):
            _, side, n = s.split()[:3]
            out[(side, int(n))] = int(ts)
    return out


def _isr_not_started(timeline: ThreadTimeline, t: int) -> bool:
    """The vCPU thread was blocked at ``t``: sleeping, or woken from a sleep and not run
    since (so no ISR of the guest was between its TSC read and its publication)."""
    i = int(np.searchsorted(timeline.starts, t, "right")) - 1
    if i < 0 or t >= timeline.ends[i]:
        return False
    state = timeline.segment(i).state
    if state == SLEEPING:
        return True
    return bool(state == RUNNABLE and i > 0 and timeline.segment(i - 1).state == SLEEPING
                and timeline.ends[i - 1] == timeline.starts[i])


def ring_read_bounds(trace: Trace, seq: np.ndarray, entry: np.ndarray,
                     timeline: ThreadTimeline | None) -> SourceBounds:
    """Bounds from the capture's ring reads (module doc, first paragraph)."""
    times = marker_times(trace)
    entry_by_seq = dict(zip(seq.tolist(), entry.tolist()))
    out = SourceBounds(RING_READS)
    uppers = []
    for n, head, seen in trace.header.get("anchors", []):
        ta, tb = times.get(("a", n)), times.get(("b", n))
        if ta is None or tb is None:
            continue
        out.used += 1
        if head and seen:
            b = seen - tb
            out.lower = b if out.lower is None else max(out.lower, b)
        nxt = entry_by_seq.get(head)
        if nxt is not None and (timeline is None or _isr_not_started(timeline, ta)):
            uppers.append(nxt - ta)
    out.uppers = np.asarray(uppers, np.int64)
    return out


def _arming_pairs(idx: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Positions a of matched writes whose successor a+1 was written by the ISR of the
    sample write a armed (arming D_j, then D_{j+1} from ISR j): the window between them
    holds ISR j and nothing of another ISR. A lost write breaks the chain: no pair."""
    if len(idx) < 2:
        return np.empty(0, np.int64)
    return np.flatnonzero(prev[1:] == idx[:-1])


def match_msr(trace: Trace, seq: np.ndarray, deadline: np.ndarray,
              vcpu_tid: int | None = None) -> MsrMatch:
    """Match IA32_TSC_DEADLINE writes to samples by their exact value (module doc)."""
    m = trace.t("kvm_msr")
    if not len(m) or not {"ecx", "write", "data"} <= set(m.cols) or not len(deadline):
        return MsrMatch.empty()
    sel = (m["ecx"] == MSR_TSC_DEADLINE) & (m["write"] == 1)
    if vcpu_tid is not None and "common_pid" in m.cols:
        sel &= m["common_pid"] == vcpu_tid
    ts = m["ts"][sel].astype(np.int64)
    data = m["data"][sel].astype(np.int64)
    order = np.argsort(deadline, kind="stable")
    dl_sorted = deadline[order]
    uniq, counts = np.unique(dl_sorted, return_counts=True)
    pos = np.minimum(np.searchsorted(dl_sorted, data), len(dl_sorted) - 1)
    hit = dl_sorted[pos] == data
    # A deadline value stored twice (several vCPUs' rings) does not name one sample.
    upos = np.minimum(np.searchsorted(uniq, data), len(uniq) - 1)
    hit &= counts[upos] == 1
    ts, idx = ts[hit], order[pos[hit]]
    # Only the first write of a value is the arming one.
    _, first = np.unique(idx, return_index=True)
    first.sort()
    ts, idx = ts[first], idx[first]
    # The ISR that wrote it: the sample with the previous seq, when stored.
    s_order = np.argsort(seq, kind="stable")
    s_sorted = seq[s_order]
    want = seq[idx] - 1
    ppos = np.minimum(np.searchsorted(s_sorted, want), max(len(s_sorted) - 1, 0))
    prev = np.where(s_sorted[ppos] == want, s_order[ppos], -1)
    # Halt wakeups between arming D_j (write a) and arming D_{j+1} (write a+1, in ISR j).
    wake = trace.t("kvm_vcpu_wakeup")
    wsel = np.ones(len(wake), bool)
    if vcpu_tid is not None and "common_pid" in wake.cols:
        wsel = wake["common_pid"] == vcpu_tid
    w = wake["ts"][wsel].astype(np.int64)
    pair = _arming_pairs(idx, prev)
    if len(w) and len(pair):
        k = np.searchsorted(w, ts[pair + 1], "left") - 1
        ok = (k >= 0) & (w[np.maximum(k, 0)] > ts[pair])
        wake_ts, wake_idx = w[k[ok]], idx[pair[ok]]
    else:
        wake_ts = wake_idx = np.empty(0, np.int64)
    return MsrMatch(ts, idx, prev, wake_ts, wake_idx)


def _mode(values: np.ndarray) -> int | None:
    if not len(values):
        return None
    v, c = np.unique(values.astype(np.int64), return_counts=True)
    return int(v[np.argmax(c)])


def _in_windows(ts: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Mask of ``ts`` inside one of the disjoint, time-ordered windows (lo, hi)."""
    k = np.searchsorted(lo, ts, "right") - 1
    kk = np.maximum(k, 0)
    return (k >= 0) & (ts > lo[kk]) & (ts < hi[kk])


def timer_vector(trace: Trace, lo: np.ndarray, hi: np.ndarray,
                 eoi_ts: np.ndarray, eoi_vec: np.ndarray) -> int | None:
    """The probe's timer vector as the trace shows it: the most frequent vector KVM
    accepted into the LAPIC (``kvm_apic_accept_irq``) or injected (``kvm_inj_virq``)
    inside the windows (each holds the delivery of one timer interrupt), else the most
    frequent in-service EOI vector there. Read, not assumed: the guest programs it
    (TIMER_VECTOR in probes/guest/x86_64/hw.h), and a constant here would silently go
    stale."""
    for name, cols in (("kvm_apic_accept_irq", ("vec",)),
                       ("kvm_inj_virq", ("vector", "vec"))):
        t = trace.t(name)
        col = next((c for c in cols if c in t.cols), None)
        if col is None or not len(t):
            continue
        inside = _in_windows(t["ts"].astype(np.int64), lo, hi)
        if inside.any():
            return _mode(t[col][inside])
    inside = _in_windows(eoi_ts, lo, hi) & (eoi_vec >= 0)
    return _mode(eoi_vec[inside])


def match_eoi(trace: Trace, match: MsrMatch, vcpu_tid: int | None = None) -> EoiMatch:
    """The guest EOI of each ISR between two consecutive arming writes (module doc)."""
    e = trace.t("kvm_eoi")
    pair = _arming_pairs(match.idx, match.prev)
    if not len(e) or "vector" not in e.cols or not len(pair):
        return EoiMatch.empty()
    sel = np.ones(len(e), bool)
    if vcpu_tid is not None and "common_pid" in e.cols:
        sel = e["common_pid"] == vcpu_tid
    ets = e["ts"][sel].astype(np.int64)
    evec = e["vector"][sel].astype(np.int64)
    lo, hi = match.ts[pair], match.ts[pair + 1]
    vector = timer_vector(trace, lo, hi, ets, evec)
    # The timer's EOIs and those that found nothing in service (-1); not other vectors.
    keep = (evec < 0) if vector is None else (evec < 0) | (evec == vector)
    ets, evec = ets[keep], evec[keep]
    start = np.searchsorted(ets, lo, "right")
    end = np.searchsorted(ets, hi, "left")
    count = end - start
    n0 = int(np.bincount(count).argmax())
    if n0 == 0:
        return EoiMatch(np.empty(0, np.int64), np.empty(0, np.int64), vector, (),
                        len(pair), int((count > 0).sum()))
    cand = np.flatnonzero(count == n0)
    rows = evec[start[cand][:, None] + np.arange(n0)]
    pats, inv, cnt = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    best = int(np.argmax(cnt))
    ok = cand[np.asarray(inv).reshape(-1) == best]
    return EoiMatch(ets[end[ok] - 1], match.idx[pair[ok]], vector,
                    tuple(int(v) for v in pats[best]), len(pair), len(pair) - len(ok))


def eoi_bounds(eoi: EoiMatch, entry: np.ndarray) -> SourceBounds:
    """Lower bound from the guest EOIs: ``offset >= e_j - T`` (module doc)."""
    out = SourceBounds(EOI_ANCHORS, used=len(eoi.ts), extra={
        "timer_vector": eoi.vector, "pattern": list(eoi.pattern),
        "windows": eoi.windows, "skipped": eoi.skipped})
    if len(eoi.ts):
        out.lower = int((entry[eoi.idx] - eoi.ts).max())
    return out


def _combine(sources: dict[str, SourceBounds]) -> tuple[int | None, np.ndarray]:
    """(max of the lower bounds, all upper bounds) of the sources not rejected."""
    live = [b for b in sources.values() if b.rejected is None]
    lowers = [b.lower for b in live if b.lower is not None]
    uppers = (np.concatenate([b.uppers for b in live]) if live
              else np.empty(0, np.int64))
    return (max(lowers) if lowers else None), uppers


def msr_bounds(match: MsrMatch, entry: np.ndarray) -> tuple[SourceBounds, SourceBounds]:
    """(kvm_msr writes, halt wakeups) bounds; see the module doc for why they hold."""
    msr = SourceBounds(MSR_ANCHORS, used=len(match.ts))
    has_prev = match.prev >= 0
    if has_prev.any():
        msr.lower = int((entry[match.prev[has_prev]] - match.ts[has_prev]).max())
    msr.uppers = (entry[match.idx] - match.ts).astype(np.int64)
    wake = SourceBounds(WAKE_ANCHORS, used=len(match.wake_ts))
    wake.uppers = (entry[match.wake_idx] - match.wake_ts).astype(np.int64)
    return msr, wake


def _capture_span(trace: Trace) -> tuple[int, int] | None:
    firsts = [int(t["ts"][0]) for t in trace.tables.values() if len(t)]
    lasts = [int(t["ts"][-1]) for t in trace.tables.values() if len(t)]
    return (min(firsts), max(lasts)) if firsts else None


def _scaled_offset(host: int, tsc_offset: int, ratio: int, frac_bits: int) -> int:
    """``guest - host`` at host TSC ``host`` under KVM's scaling (kvm_scale_tsc())."""
    return ((host * ratio) >> frac_bits) + tsc_offset - host


def debugfs_candidates(trace: Trace, vcpu_tid: int | None
                       ) -> tuple[list[tuple[int, str, str]], list[dict[str, Any]]]:
    """Offsets from the capture's debugfs reads (header ``kvm_debugfs``), and the reads
    that cannot give one (as candidate entries with the reason).

    KVM: ``guest_tsc = tsc_offset + (host_tsc * ratio >> frac_bits)`` (arch/x86/kvm/x86.c,
    kvm_read_l1_tsc()); with ratio 1 the offset is exactly ``guest - host``, our offset.
    A scaled TSC is no single offset: the offset at the capture's midpoint is proposed and
    its drift over the capture is given. The host TSC is the trace clock only with
    ``trace_clock`` x86-tsc."""
    info = trace.header.get("kvm_debugfs") or {}
    rows = info.get("reads") or []
    if not rows:
        return [], []
    if trace.header.get("clock") != "x86-tsc":
        return [], [{"source": "debugfs", "offset_tick": None, "status": "unusable",
                     "why": f"trace clock {trace.header.get('clock')!r} is not the host TSC"}]
    mine = [r for r in rows if vcpu_tid is not None and r.get("pid") == vcpu_tid]
    if not mine:
        vm0 = rows[0]["vm"]
        mine = [r for r in rows if r["vcpu"] == 0 and r["vm"] == vm0]
    span = _capture_span(trace)
    out: list[tuple[int, str, str]] = []
    seen: dict[tuple, list[str]] = {}
    for r in mine:
        seen.setdefault((r["tsc_offset"], r.get("tsc_scaling_ratio"), r.get("frac_bits")),
                        []).append(r["read_at"])
    for (off, ratio, frac), when in seen.items():
        at = " and ".join(dict.fromkeys(when))
        if ratio is None or frac is None or ratio == 1 << frac:
            out.append((int(off), "debugfs", f"debugfs tsc-offset (read at {at})"))
            continue
        if span is None:
            continue
        mid = (span[0] + span[1]) // 2
        drift = abs(_scaled_offset(span[1], off, ratio, frac)
                    - _scaled_offset(span[0], off, ratio, frac)) // 2
        out.append((_scaled_offset(mid, off, ratio, frac), "debugfs",
                    f"debugfs tsc-offset with tsc-scaling-ratio {ratio}/2^{frac} (read at "
                    f"{at}; offset at the capture's midpoint, drifting +-{drift} ticks "
                    f"over it)"))
    return out, []


def fit_clock(trace: Trace, seq: np.ndarray, entry: np.ndarray, accel: str,
              timeline: ThreadTimeline | None = None, deadline: np.ndarray | None = None,
              vcpu_tid: int | None = None, tcg_host_counter: bool = True) -> ClockMap:
    """Bound the offset from the anchors; see the module doc. ``timeline``: the vCPU
    thread's states (without it every anchor's upper bound is trusted, as before).
    ``deadline``: the samples' deadline ticks, for the kvm_msr anchors (none without it);
    ``vcpu_tid``: the vCPU thread whose kvm_msr/wakeup events count (all without it);
    ``tcg_host_counter``: under plain TCG the guest's ticks are the host trace clock's
    (x86: QEMU's rdtsc reads the host TSC), so offset 0 is a candidate; False when they
    are not (an arm64 guest's counter: QEMU's virtual clock)."""
    seq = np.asarray(seq, np.int64)
    entry = np.asarray(entry, np.int64)
    ring = ring_read_bounds(trace, seq, entry, timeline)
    match = (match_msr(trace, seq, np.asarray(deadline, np.int64), vcpu_tid)
             if deadline is not None else MsrMatch.empty())
    msr, wake = msr_bounds(match, entry)
    eoi_match = match_eoi(trace, match, vcpu_tid)
    eoi = eoi_bounds(eoi_match, entry)
    sources = {b.name: b for b in (ring, msr, wake) if b.used}
    if eoi.used:
        # The EOI model depends on the backend (module doc): a lower bound above what
        # the other sources prove as upper bound means it does not hold here.
        olo, oup = _combine(sources)
        ohi = oup if olo is None else oup[oup >= olo]
        if len(ohi) and eoi.lower is not None and eoi.lower > int(ohi.min()):
            eoi.rejected = (f"lower bound {eoi.lower} above the other sources' upper "
                            f"bound {int(ohi.min())}: these kvm_eoi events do not follow "
                            f"the ISR's TSC read on this host")
        sources[EOI_ANCHORS] = eoi
    lo, uppers = _combine(sources)
    valid = uppers if lo is None else uppers[uppers >= lo]
    hi = int(valid.min()) if len(valid) else None
    used = ring.used
    names = [n for n in (RING_READS, MSR_ANCHORS) if n in sources] or [RING_READS]
    against = " and ".join(names)
    base = dict(anchors=used, msr_anchors=msr.used, sources=sources,
                uppers_dropped=int(len(uppers) - len(valid)), msr=match,
                eoi_anchors=0 if eoi.rejected else eoi.used,
                eoi=None if eoi.rejected else eoi_match)

    candidates: list[tuple[int, str, str]] = []
    info: list[dict[str, Any]] = []
    if tcg_host_counter and accel.startswith("tcg") and "icount" not in accel:
        candidates.append((0, "tcg", "guest TSC = host TSC (TCG)"))
    dbg, dbg_unusable = debugfs_candidates(trace, vcpu_tid)
    candidates += dbg
    info += dbg_unusable
    wto = trace.t("kvm_write_tsc_offset")
    if len(wto) and "next_tsc_offset" in wto.cols:
        # An offset the host programmed: guest = host + offset.
        candidates.append((int(wto["next_tsc_offset"][-1].astype(np.int64)),
                           "kvm_write_tsc_offset", "kvm_write_tsc_offset"))
    chosen = None
    for off, source, how in candidates:
        entry_info: dict[str, Any] = {"source": source, "offset_tick": off, "how": how}
        if lo is None or hi is None:
            entry_info.update(status="unchecked", why="no two-sided anchor bounds")
            if chosen is None:
                chosen = (off, how)
        elif lo <= off <= hi:
            entry_info.update(status="accepted" if chosen is None else "within bounds",
                              why=None)
            if chosen is None:
                chosen = (off, how)
        else:
            gap = lo - off if off < lo else off - hi
            entry_info.update(status="rejected",
                              why=f"outside the anchor bounds [{lo}, {hi}] by {gap} ticks")
        info.append(entry_info)
    base["candidates"] = info

    if lo is None or hi is None:
        if chosen is not None:
            off, how = chosen
            return ClockMap(off, 0, how + " (no anchors: unchecked)", lo, hi,
                            consistent=False, **base)
        return ClockMap(0, 0, "none: no anchors and no known offset", lo, hi,
                        consistent=False, **base)
    if chosen is not None and lo <= chosen[0] <= hi:
        off, how = chosen
        return ClockMap(off, max(off - lo, hi - off), f"{how}, checked against {against}",
                        lo, hi, consistent=True, **base)
    if lo <= hi:
        mid = (lo + hi) // 2
        return ClockMap(mid, (hi - lo + 1) // 2, f"fitted from {against}", lo, hi,
                        consistent=True, **base)
    # Bounds cross: the clocks drift or scale; the midpoint is off by up to the gap.
    return ClockMap((lo + hi) // 2, lo - hi, f"fitted from {against} (inconsistent: "
                    "clocks drift or scale)", lo, hi, consistent=False, **base)


def refine_with_causality(clock: ClockMap, timeline, entry: np.ndarray,
                          max_samples: int = 50_000, what: str = "ISR entries") -> ClockMap:
    """Tighten the bounds: each ISR entry ran on the vCPU thread, so its host time lies in
    one of that thread's running segments. A time whose whole uncertainty interval meets
    exactly one running segment [s, t] gives ``entry - t <= offset <= entry - s``.
    ``what`` names the guest times in the method (any time the guest ran at will do).

    The bounds are the offsets that the most of these constraints allow (a sweep over
    their ends), not the intersection of all: one wrong segment (a switch the capture lost
    or placed late) gives a constraint that excludes the true offset, and intersected in
    time order it narrowed the bounds to a few ns beside it, after which every right
    constraint was dropped as disjoint (seen in CI: a fit of ±157 ns with half of the
    guest's own events outside the vCPU's run periods). Narrower bounds make more times
    unambiguous, so the sweep is repeated until the bounds stop moving."""
    if timeline is None or not clock.consistent or clock.lower is None or clock.upper is None:
        return clock
    # Widest running periods: an inferred switch-out may have come later than placed.
    starts, ends = timeline.spans("running", widest=True)
    if not len(starts):
        return clock
    starts, ends = starts.astype(np.int64), ends.astype(np.int64)
    e = np.asarray(entry, np.int64)[::max(1, len(entry) // max_samples)]
    lo, hi, used = clock.lower, clock.upper, 0
    for _ in range(8):
        got = _most_agreed_offsets(e, starts, ends, lo, hi)
        if got is None:
            break
        (nlo, nhi), used = got
        if (nlo, nhi) == (lo, hi):
            break
        lo, hi = nlo, nhi
    if used == 0:
        return clock
    method = clock.method + f"; refined by {used} {what} inside vCPU run periods"
    # The times no offset in the bounds puts inside any run period: the constraints the
    # rest outvoted (a lost or misplaced switch), said rather than hidden.
    # (Only times inside the capture: the guest traced before the host capture began.)
    inner = e[(e - hi >= starts[0]) & (e - lo < ends[-1])]
    i = np.searchsorted(starts, inner - lo, "right") - 1
    outside = int((ends[np.maximum(i, 0)] <= inner - hi).sum())
    if outside:
        method += f" ({outside} outside every run period at the bounds the rest agree on)"
    candidates = clock.candidates
    if lo <= clock.offset <= hi:
        off = clock.offset
    else:
        off = (lo + hi) // 2
        candidates = [dict(c, status="rejected", why=f"outside the refined bounds "
                           f"[{lo}, {hi}]") if c.get("status") == "accepted" else c
                      for c in candidates]
        if any(c.get("status") == "accepted" for c in clock.candidates):
            method += " (its candidate fell outside: midpoint used)"
    return replace(clock, offset=off, error=max(off - lo, hi - off), method=method,
                   lower=lo, upper=hi, consistent=True, candidates=candidates)


def _most_agreed_offsets(entry: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                         lo: int, hi: int) -> tuple[tuple[int, int], int] | None:
    """The offsets in [lo, hi] the most run-period constraints allow, the hull of every
    stretch that ties, and how many constraints there were (the times that meet exactly
    one running segment); None when there were none."""
    a, b = entry - hi, entry - lo                 # each time's host time lies in [a, b]
    i = np.searchsorted(starts, b, "right") - 1
    prev_end = np.where(i > 0, ends[np.maximum(i - 1, 0)], np.iinfo(np.int64).min)
    one = (i >= 0) & (ends[np.maximum(i, 0)] > a) & (prev_end <= a)
    if not one.any():
        return None
    cl = np.maximum(lo, entry[one] - ends[i[one]])
    ch = np.minimum(hi, entry[one] - starts[i[one]])
    # Sweep: +1 where a constraint's range opens, -1 just past where it closes (ties:
    # closes first, so [5, 9] and [10, 20] never count as overlapping).
    pts = np.concatenate([cl, ch + 1])
    step = np.concatenate([np.ones(len(cl), np.int64), -np.ones(len(ch), np.int64)])
    o = np.lexsort((step, pts))
    pts, depth = pts[o], np.cumsum(step[o])
    best = int(depth.max())
    at = np.flatnonzero(depth == best)            # each opens a stretch of that depth
    return (int(pts[at[0]]), int(pts[at[-1] + 1]) - 1), int(one.sum())


def check_causality(clock: ClockMap, seq: np.ndarray, entry: np.ndarray) -> ClockMap:
    """Flag samples whose host events fall outside their mapped window at the chosen
    offset: the WRMSR arming D_j must lie after the mapped ISR entry of sample j-1 (it ran
    inside that ISR) and before the mapped ISR entry of sample j, a halt wakeup
    between two arming writes before the mapped entry of j, and the EOI anchor of
    sample j (unless rejected) after that entry. A consistent fit satisfies
    every bound it kept, so what is flagged here is an upper bound dropped as below the
    lower one, or the crossing bounds of an inconsistent fit: a clock that drifts,
    scales, or an event the model does not cover."""
    m = clock.msr
    if m is None or not len(m.ts):
        return replace(clock, causality={"checked": 0, "violations": 0, "samples": []})
    seq = np.asarray(seq, np.int64)
    host = np.asarray(entry, np.int64) - clock.offset
    flags: dict[int, list[str]] = {}

    def flag(idx: np.ndarray, text: str, by: np.ndarray) -> None:
        for i, d in zip(idx.tolist(), by.tolist()):
            flags.setdefault(int(seq[i]), []).append(text.format(d))

    late = m.ts >= host[m.idx]
    flag(m.idx[late], "causality: its deadline was armed (kvm_msr) {} ticks after its "
         "mapped ISR entry (clock mapping error?)", (m.ts - host[m.idx])[late])
    hp = m.prev >= 0
    early = np.zeros(len(m.ts), bool)
    early[hp] = m.ts[hp] < host[m.prev[hp]]
    flag(m.prev[early], "causality: the next deadline was armed (kvm_msr) {} ticks before "
         "its mapped ISR entry (clock mapping error?)",
         (host[m.prev[early]] - m.ts[early]))
    wlate = m.wake_ts >= host[m.wake_idx]
    flag(m.wake_idx[wlate], "causality: the vCPU woke from halt {} ticks after its mapped "
         "ISR entry (clock mapping error?)", (m.wake_ts - host[m.wake_idx])[wlate])
    checked = len(m.ts) + len(m.wake_ts)
    eoi = clock.eoi
    if eoi is not None and len(eoi.ts):
        checked += len(eoi.ts)
        before = eoi.ts < host[eoi.idx]
        flag(eoi.idx[before], "causality: its ISR's EOI (kvm_eoi) was traced {} ticks "
             "before its mapped ISR entry (clock mapping error?)",
             (host[eoi.idx] - eoi.ts)[before])
    listed = sorted(flags)
    return replace(clock, violations=flags, causality={
        "checked": int(checked), "violations": len(flags),
        "samples": listed[:_MAX_LISTED]})
