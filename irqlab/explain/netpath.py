"""``irqlab explain`` of a net run (``--target net --trace``): each slow round trip
followed along the packet's path on the host, step by step.

The net target records its host capture on CLOCK_MONOTONIC, the clock the sender stamps
its packets with (docs/formats.md §10), so a sample's send and receive times are trace
times as they are: the clock map is exact (``error_bound_ns`` 0; the stamps are the
kernel's software timestamps of the send and of the reply's arrival).

**Stages** (the first of each in the window, in order; those the trace does not show are
listed as missing):
sent → *host stack: to <dev>* (net_dev_queue in a sender thread's context: the bridge and
tap, or lo for QEMU's user network) → *QEMU woken* (the first sched_waking of a VMM
thread: its I/O thread, QEMU's main loop under TCG, or vhost) → *QEMU running* (that
thread switched in) → *reply from the guest: <dev>* (the last hand-over of a VMM thread
to the host stack before the reply arrived: netif_receive_skb / netif_rx of the tap or
bridge, or net_dev_queue on lo; not the first after QEMU ran, which with packets in flight
is another packet's) → *sender
woken* (sched_waking of a sender thread) → received.

**Causes** (every ns of [sent, received] in one; "unexplained" always shown), by who
has to act in each step:
- up to *QEMU woken* and from *reply from the guest* on: ``host stack: sender → QEMU``
  and ``host stack: QEMU → sender`` (the kernel's path, the bridge and tap softirqs);
- *QEMU woken* → *QEMU running*: the I/O thread was runnable: whoever held its CPU
  (``preempted by comm/pid``, IRQs by name, ``CPU idle …``), as the timer explain does;
- *QEMU running* → *reply from the guest*: the guest's part, read from the vCPU thread as
  the timer explain reads it (running: the guest's own work, virtio-net, the responder;
  runnable: preempted by whom; blocked: halted until QEMU kicked it, with the kicking
  thread's delays), named for the packet (``guest: …``);
- *sender woken* → received: the sender's receive thread runnable (preempted by whom)
  or running.
Where stages are missing, the span between the stages found is read from the vCPU
thread (the guest's part), the path's longest.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irqlab.explain.attribute import (UNEXPLAINED, VCPU_BLOCKED, VCPU_RUNNING, VCPU_STOPPED,
                                      Attribution, Explainer, aggregate)
from irqlab.explain.load import Trace, load_capture
from irqlab.explain.run import capture_path
from irqlab.explain.seam import Explanation, Progress, Request, stored_samples
from irqlab.explain.shape import attributed_json, select_samples
from irqlab.explain.timeline import RUNNABLE, RUNNING
from irqlab.store import Store, StoreError

SENDER_COMM = "irqlab-netsend"          # probes/native/netsend.c's threads
TO_QEMU = "host stack: sender → QEMU (bridge, tap or loopback)"
TO_SENDER = "host stack: QEMU → sender (tap, bridge or loopback)"
SENDER_RUNNING = "sender thread running (receiving)"
# The timer explain's vCPU causes, named for a packet's trip through the guest.
GUEST_NAMES = {
    VCPU_RUNNING: "guest: vCPU running (virtio-net, the guest's stack, the echo)",
    VCPU_BLOCKED: "guest: vCPU halted until QEMU kicked it",
    VCPU_STOPPED: "guest: vCPU thread stopped",
}
STAGE_ORDER = ("sent", "host stack: to irqbr0", "host stack: to irqtap0", "host stack: to lo",
               "QEMU woken", "QEMU running", "reply from the guest: irqtap0",
               "reply from the guest: irqbr0", "reply from the guest: lo", "sender woken",
               "received")
RX_EVENTS = ("netif_receive_skb", "netif_rx", "net_dev_queue")


@dataclass
class NetExplained:
    run: Any
    samples: list[Attribution]
    culprits: list[dict[str, Any]]
    selected_by: str
    events: int
    lost: list[tuple[int, int, int, str]]
    span0: int
    sender_tids: list[int] = field(default_factory=list)

    @staticmethod
    def ns(tick: int) -> int:
        return int(tick)                    # CLOCK_MONOTONIC ns: ticks are ns


class NetPathExplainer:
    """The timer explain's timelines plus the sender's threads and the net events."""

    def __init__(self, trace: Trace) -> None:
        hdr = trace.header
        sw = trace.t("sched_switch")
        comms = dict(zip(sw["next_pid"].tolist(), sw["next_comm"].tolist())) if len(sw) \
            else {}
        self.sender = sorted({int(t) for t in hdr.get("peer_threads", {})}
                             | {t for t, c in comms.items() if c == SENDER_COMM})
        self.ex = Explainer(trace, other_tids=self.sender)
        self.vmm = set(self.ex.vmm)
        self.trace = trace

    def _find(self, event: str, after: int, before: int, mask_fn,
              last: bool = False) -> tuple[int, Any] | None:
        """(time, row) of the first (or ``last``) ``event`` in [after, before] whose rows
        pass ``mask_fn(table, slice)``; None when there is none."""
        t = self.trace.t(event)
        if not len(t):
            return None
        ts = t["ts"].astype(np.int64)
        lo, hi = int(np.searchsorted(ts, after, "left")), int(np.searchsorted(ts, before, "right"))
        sel = np.flatnonzero(mask_fn(t, slice(lo, hi))) if lo < hi else []
        if not len(sel):
            return None
        k = lo + int(sel[-1] if last else sel[0])
        return int(ts[k]), k

    def _stages(self, a: int, b: int) -> list[tuple[str, int]]:
        st: list[tuple[str, int]] = [("sent", a)]
        sender, vmm = np.array(self.sender, np.int64), np.array(sorted(self.vmm), np.int64)
        t = a
        q = self.trace.t("net_dev_queue")
        if len(q) and "name" in q.cols:
            ts = q["ts"].astype(np.int64)
            lo, hi = int(np.searchsorted(ts, a)), int(np.searchsorted(ts, b, "right"))
            seen: set[str] = set()
            for k in range(lo, hi):
                if int(q["common_pid"][k]) in self.sender and str(q["name"][k]) not in seen:
                    seen.add(str(q["name"][k]))
                    st.append((f"host stack: to {q['name'][k]}", int(ts[k])))
                    t = int(ts[k])
                    if len(seen) == 2:
                        break
        woke = self._find("sched_waking", t, b,
                           lambda tb, s: np.isin(tb["pid"][s], vmm))
        qemu_tid = None
        if woke is not None:
            t, row = woke
            qemu_tid = int(self.trace.t("sched_waking")["pid"][row])
            st.append(("QEMU woken", t))
            run = self._find("sched_switch", t, b,
                              lambda tb, s: tb["next_pid"][s] == qemu_tid)
            if run is not None:
                t = run[0]
                st.append(("QEMU running", t))
        # The reply: the last hand-over from a VMM thread to the host stack before the
        # reply arrived. (Not the first after QEMU ran: with packets in flight, and while
        # the responder holds one, QEMU hands over other packets' replies meanwhile.)
        last: tuple[int, str] | None = None
        for event in RX_EVENTS if woke is not None else ():
            got = self._find(event, t, b, lambda tb, s: np.isin(tb["common_pid"][s], vmm),
                             last=True)
            if got is not None and (last is None or got[0] > last[0]):
                tb = self.trace.t(event)
                last = (got[0], str(tb["name"][got[1]]) if "name" in tb.cols else "?")
        if last is not None:
            st.append((f"reply from the guest: {last[1]}", last[0]))
            t = last[0]
        back = self._find("sched_waking", t, b,
                           lambda tb, s: np.isin(tb["pid"][s], sender))
        if back is not None and any(s.startswith("reply") for s, _ in st):
            st.append(("sender woken", back[0]))
        st.append(("received", b))
        return st

    def _runnable(self, tid: int, lo: int, hi: int, causes: dict[str, int],
                  running_name: str) -> int:
        """[lo, hi) of thread ``tid``: runnable -> who held its CPU; running -> the name.
        Returns the ns covered."""
        tl = self.ex.threads.get(tid)
        covered = 0
        for seg, l2, h2 in (tl.between(lo, hi) if tl else []):
            covered += h2 - l2
            if seg.state == RUNNABLE:
                self.ex._others(seg.cpu, l2, h2, causes)
            elif seg.state == RUNNING:
                causes[running_name] += self.ex._irqs(seg.cpu, l2, h2, causes)
            else:
                causes[f"thread {tid} {seg.state}"] += h2 - l2
        return covered

    def _guest(self, seq: int, lo: int, hi: int, causes: dict[str, int],
               att: Attribution) -> None:
        if hi <= lo:
            return
        part = self.ex.explain(seq, lo, hi, hi - lo)
        att.notes.extend(n for n in part.notes if not n.startswith("causality"))
        for k, v in part.causes.items():
            causes[GUEST_NAMES.get(k, k)] += v

    def explain(self, seq: int, a: int, b: int) -> Attribution:
        att = Attribution(seq, b - a, a, b)
        span = self.ex.span
        if a < span[0] or b > span[1]:
            att.status, att.reason = "not traced", "window outside the capture"
            att.causes[UNEXPLAINED] = max(0, b - a)
            return att
        for cpu, lo, hi, why in self.ex.lost:
            if lo < b and hi > a:
                att.status, att.reason = "incomplete", why
                att.causes[UNEXPLAINED] = max(0, b - a)
                return att
        att.stages = self._stages(a, b)
        names = [s for s, _ in att.stages]
        at = dict(att.stages)
        causes: dict[str, int] = defaultdict(int)
        woken, running = at.get("QEMU woken"), at.get("QEMU running")
        reply = next((t for s, t in att.stages if s.startswith("reply")), None)
        s_woken = at.get("sender woken")
        if woken is not None and running is not None and reply is not None:
            causes[TO_QEMU] += woken - a
            tid = int(self.trace.t("sched_waking")["pid"][
                np.searchsorted(self.trace.t("sched_waking")["ts"].astype(np.int64), woken)])
            covered = self._runnable(tid, woken, running, causes, "QEMU I/O thread running")
            causes[UNEXPLAINED] += (running - woken) - covered
            self._guest(seq, running, reply, causes, att)
            end = s_woken if s_woken is not None else b
            causes[TO_SENDER] += end - reply
            if s_woken is not None and self.sender:
                covered = sum(self._runnable(t, s_woken, b, causes, SENDER_RUNNING)
                              for t in self.sender[:1])
                causes[UNEXPLAINED] += (b - s_woken) - covered
        else:
            att.stages_missing = [s for s in ("QEMU woken", "QEMU running",
                                              "reply from the guest") if
                                  not any(n.startswith(s) for n in names)]
            self._guest(seq, a, b, causes, att)
        total = sum(causes.values())
        if total != b - a:                  # the guest part's own unexplained, clipped
            causes[UNEXPLAINED] += (b - a) - total
        causes.setdefault(UNEXPLAINED, 0)
        att.causes = {k: v for k, v in causes.items() if v or k == UNEXPLAINED}
        return att


def explain_net_run(run: Any, trace: Trace, s: dict[str, np.ndarray],
                    threshold_ns: int | None, top: int | None,
                    sample: int | None) -> NetExplained:
    """A stored net run (its samples ``s``) and its capture on CLOCK_MONOTONIC."""
    seq = s["seq"].astype(np.int64)
    dl = s["deadline_tick"].astype(np.int64)
    en = s["entry_tick"].astype(np.int64)
    chosen = select_samples(seq, en - dl, int(run.tick_hz), run.threshold_ns, threshold_ns,
                            top, sample)
    if chosen is None:
        raise ValueError(f"run {run.run_id} has no sample {sample}")
    idx, how = chosen
    px = NetPathExplainer(trace)
    atts = [px.explain(int(seq[i]), int(dl[i]), int(en[i])) for i in idx.tolist()]
    return NetExplained(run, atts, aggregate(atts), how, trace.events, px.ex.lost,
                        px.ex.span[0], px.sender)


def as_json(res: NetExplained) -> dict[str, Any]:
    """The ``{"type": "explain"}`` object (docs/formats.md §9, net runs)."""
    ns = res.ns
    return {
        "type": "explain", "version": 1, "run_id": res.run.run_id, "source": "net path",
        "selected_by": res.selected_by,
        "clock": {"method": "identity: samples and trace both on CLOCK_MONOTONIC",
                  "offset_tick": 0, "error_bound_ns": 0, "error_p50_ns": 0,
                  "lower_tick": None, "upper_tick": None, "anchors": 0,
                  "consistent": True},
        "events": res.events, "events_missing": [], "events_never_fired": [],
        "lost_regions": [{"cpu": c, "from_ns": ns(lo - res.span0), "to_ns": ns(hi - res.span0),
                          "why": why} for c, lo, hi, why in res.lost],
        "sender_threads": res.sender_tids,
        **attributed_json(res.samples, res.culprits, ns, STAGE_ORDER),
    }


class NetRunExplainer:
    """A net run's slow round trips along the packet's path (kind ``net-path``)."""

    kind = "net-path"
    title = "net path (host tracefs along the packet's path)"
    outputs: tuple[str, ...] = ()

    def outputs_hint(self, run: Any) -> str:
        return (f"run {run.run_id}'s capture is explained along the packet's path; "
                f"use --json")

    def explain(self, store: Store, run: Any, request: Request,
                progress: Progress) -> Explanation:
        path = capture_path(store, run)
        progress.stage(f"decoding capture ({path.stat().st_size / 1e6:.1f} MB gzip)")
        trace = load_capture(path)
        try:
            res = explain_net_run(run, trace, stored_samples(store, run.run_id),
                                  request.threshold_ns, request.top, request.sample)
        except ValueError as exc:
            raise StoreError(str(exc)) from None
        return Explanation(as_json(res))
