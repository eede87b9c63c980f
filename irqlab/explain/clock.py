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
guest TSC is the host TSC (QEMU's rdtsc helper reads it), so offset 0 must fall within
the bounds: we check it and then use exactly 0. Under KVM, ``kvm_write_tsc_offset``
(or debugfs ``tsc-offset``) gives candidates that are checked against the same bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irqlab.explain.load import Trace
from irqlab.explain.timeline import RUNNABLE, SLEEPING, ThreadTimeline
from irqlab.trace.capture import ANCHOR_PREFIX


@dataclass
class ClockMap:
    offset: int                   # guest tick - host trace tick
    error: int                    # +- ticks
    method: str
    lower: int | None = None
    upper: int | None = None
    anchors: int = 0
    consistent: bool = True

    def to_host(self, guest_tick: np.ndarray | int):
        return np.asarray(guest_tick, dtype=np.int64) - self.offset

    def as_dict(self, tick_hz: int) -> dict:
        return {"method": self.method, "offset_tick": self.offset,
                "error_bound_ns": round(self.error * 1e9 / tick_hz),
                "lower_tick": self.lower, "upper_tick": self.upper,
                "anchors": self.anchors, "consistent": self.consistent}


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


def fit_clock(trace: Trace, seq: np.ndarray, entry: np.ndarray, accel: str,
              timeline: ThreadTimeline | None = None) -> ClockMap:
    """Bound the offset from the anchors; see the module doc. ``timeline``: the vCPU
    thread's states (without it every anchor's upper bound is trusted, as before)."""
    times = marker_times(trace)
    entry_by_seq = dict(zip(seq.tolist(), entry.tolist()))
    lo, used = None, 0
    uppers = []
    for n, head, seen in trace.header.get("anchors", []):
        ta, tb = times.get(("a", n)), times.get(("b", n))
        if ta is None or tb is None:
            continue
        used += 1
        if head and seen:
            b = seen - tb
            lo = b if lo is None else max(lo, b)
        nxt = entry_by_seq.get(head)
        if nxt is not None and (timeline is None or _isr_not_started(timeline, ta)):
            uppers.append(nxt - ta)
    valid = [u for u in uppers if lo is None or u >= lo]
    hi = min(valid) if valid else None
    candidates = []
    if accel.startswith("tcg") and "icount" not in accel:
        candidates.append((0, "guest TSC = host TSC (TCG), checked against ring-read anchors"))
    wto = trace.t("kvm_write_tsc_offset")
    if len(wto) and "next_tsc_offset" in wto.cols:
        # An offset the host programmed: guest = host + offset.
        candidates.append((int(wto["next_tsc_offset"][-1].astype(np.int64)),
                           "kvm_write_tsc_offset, checked against ring-read anchors"))
    if lo is None or hi is None:
        if candidates:
            off, how = candidates[0]
            return ClockMap(off, 0, how + " (no anchors: unchecked)", lo, hi, used, False)
        return ClockMap(0, 0, "none: no anchors and no known offset", lo, hi, used, False)
    for off, how in candidates:
        if lo <= off <= hi:
            return ClockMap(off, max(off - lo, hi - off), how, lo, hi, used, True)
    if lo <= hi:
        mid = (lo + hi) // 2
        return ClockMap(mid, (hi - lo + 1) // 2, "fitted from ring-read anchors", lo, hi,
                        used, True)
    # Bounds cross: the clocks drift or scale; the midpoint is off by up to the gap.
    return ClockMap((lo + hi) // 2, lo - hi, "fitted from ring-read anchors (inconsistent: "
                    "clocks drift or scale)", lo, hi, used, False)


def refine_with_causality(clock: ClockMap, timeline, entry: np.ndarray,
                          max_samples: int = 5000) -> ClockMap:
    """Tighten the bounds: each ISR entry ran on the vCPU thread, so its host time lies in
    one of that thread's running segments. A sample whose whole uncertainty interval meets
    exactly one running segment [s, t] gives ``entry - t <= offset <= entry - s``."""
    if timeline is None or not clock.consistent or clock.lower is None or clock.upper is None:
        return clock
    # Widest running periods: an inferred switch-out may have come later than placed.
    starts, ends = timeline.spans("running", widest=True)
    if not len(starts):
        return clock
    starts, ends = starts.astype(np.int64), ends.astype(np.int64)
    lo, hi = clock.lower, clock.upper
    step = max(1, len(entry) // max_samples)
    used = 0
    for e in entry[::step].tolist():
        a, b = e - hi, e - lo                     # host time of this entry lies in [a, b]
        i = int(np.searchsorted(starts, b, "right")) - 1
        if i < 0 or ends[i] <= a or (i > 0 and ends[i - 1] > a):
            continue                              # no, or more than one, candidate segment
        nlo, nhi = max(lo, e - int(ends[i])), min(hi, e - int(starts[i]))
        if nlo <= nhi:
            lo, hi = nlo, nhi
            used += 1
    if used == 0:
        return clock
    off = clock.offset if lo <= clock.offset <= hi else (lo + hi) // 2
    return ClockMap(off, max(off - lo, hi - off),
                    clock.method + f"; refined by {used} ISR entries inside vCPU run periods",
                    lo, hi, clock.anchors, True)
