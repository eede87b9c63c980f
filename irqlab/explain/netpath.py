"""``irqlab explain`` of a net run (``--target net --trace``): each slow round trip
followed along the packet's path on the host, step by step.

The net target records its host capture on CLOCK_MONOTONIC, the clock the sender stamps
its packets with (docs/formats.md §10): no clock to map (``error_bound_ns`` 0). A sample
holds the user-space send time (before send()) and, with the kernel's software stamps,
that time plus the kernel's round trip: from the TX stamp (the tap's driver, once the host
stack has queued the packet) to the RX stamp (the reply entering the host stack). So the
window accounted is the sample's shifted by the send's path to the tap as the trace shows
it (the sender's last net_dev_queue); samples timed in user space (flag ``user_ts``) are
the window as they are.

**Stages** (in order; those the trace does not show are listed as missing):
sent → *host stack: to <dev>* (net_dev_queue in a sender thread's context: the bridge and
tap, or lo for QEMU's user network) → *QEMU woken* (the first sched_waking of a VMM
thread that hands packets to the host stack: its I/O thread, QEMU's main loop under TCG,
or vhost), or *QEMU already awake* when such a thread was running or runnable as the
packet reached it (no wake-up is this packet's: the next one is another thread's, such as
the vCPU kicked for it, later) → *QEMU running* (that thread switched in, or at once when
it was running) → *reply from the guest: <dev>* (kernel stamps: the RX stamp, where the
hand-over traced just after it — netif_receive_skb / netif_rx of the tap or bridge, or
net_dev_queue on lo — names the device; user stamps: the last hand-over before the
sender's receiving thread was woken, then *sender woken*) → received. (Not the last
hand-over before the sample's end: that is another packet's reply, handed over while the
responder holds this one.)

**Causes** (every ns of the window in one; "unexplained" always shown), by who has to
act in each step:
- up to *QEMU woken* and from *reply from the guest* on: ``host stack: sender → QEMU``
  and ``host stack: QEMU → sender`` (the kernel's path, the bridge and tap softirqs);
- *QEMU woken* → *QEMU running*: the I/O thread was runnable: whoever held its CPU
  (``preempted by comm/pid``, IRQs by name, ``CPU idle …``), as the timer explain does;
- *QEMU running* → *reply from the guest*: the guest's part, read from the vCPU thread as
  the timer explain reads it (running: the guest's own work, virtio-net, the responder;
  runnable: preempted by whom; blocked: halted until QEMU kicked it, with the kicking
  thread's delays), named for the packet (``guest: …``);
- *sender woken* → received (user stamps): the sender's receiving thread runnable
  (preempted by whom) or running.
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
from irqlab.samples.net import FLAG_USER_TS
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
               "QEMU woken", "QEMU already awake", "QEMU running",
               "reply from the guest: irqtap0",
               "reply from the guest: irqbr0", "reply from the guest: lo", "sender woken",
               "received")
RX_EVENTS = ("netif_receive_skb", "netif_rx", "net_dev_queue")
# How long after the RX stamp the reply's hand-over may be traced: the tracepoint follows
# the stamp in the same call (2.3 us median, 40 us the most of 17,000 round trips at load
# 2 under TCG); the next packet's reply comes a period (1 ms by default) later.
REPLY_SLACK_NS = 250_000


@dataclass
class PacketPath:
    """One packet's path as the trace shows it."""
    stages: list[tuple[str, int]]
    qemu_tid: int                   # the QEMU thread that took it up, -1: none seen
    sender_tid: int                 # the sender thread woken for the reply, -1: none
    shift: int                      # ns from the send to the packet queued to the tap


def _text(comm: bytes | str) -> str:
    return comm.decode("utf-8", "replace") if isinstance(comm, bytes) else comm


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
        # Comms decode as bytes; the header lists the threads alive when the capture began
        # (captures before 2026-11-27 list none): the sender's are found by name as well.
        self.sender = sorted({int(t) for t in hdr.get("peer_threads") or {}}
                             | {t for t, c in comms.items() if _text(c) == SENDER_COMM})
        self.ex = Explainer(trace, other_tids=self.sender)
        self.vmm = set(self.ex.vmm)
        self.trace = trace
        self.io = self._io_threads()

    def _io_threads(self) -> np.ndarray:
        """The VMM threads that move packets between the guest and the host: those that
        hand packets over to the host stack anywhere in the capture (QEMU's main loop under
        TCG, its I/O thread, vhost); every VMM thread when none does."""
        found: set[int] = set()
        for event in RX_EVENTS:
            t = self.trace.t(event)
            if len(t):
                pids = np.unique(t["common_pid"].astype(np.int64)).tolist()
                found.update(p for p in pids if p in self.vmm)
        found -= set(self.ex.vcpus)
        return np.array(sorted(found or self.vmm), np.int64)

    def _awake_at(self, t: int) -> tuple[int, str] | None:
        """(tid, state) of an I/O thread already running or runnable at ``t``: it takes
        the packet up without a wake-up of its own."""
        for tid in self.io.tolist():
            tl = self.ex.threads.get(tid)
            seg = tl.state_at(t) if tl else None
            if seg is not None and seg.state in (RUNNING, RUNNABLE):
                return tid, seg.state
        return None

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

    def _host_stages(self, a: int, b: int) -> list[tuple[str, int]]:
        """The sender's packet queued to each device (at most two: the bridge, the tap;
        or lo) from ``a`` on: the first net_dev_queue of each in a sender thread."""
        st: list[tuple[str, int]] = []
        q = self.trace.t("net_dev_queue")
        if not len(q) or "name" not in q.cols:
            return st
        ts = q["ts"].astype(np.int64)
        lo, hi = int(np.searchsorted(ts, a)), int(np.searchsorted(ts, b, "right"))
        seen: set[str] = set()
        for k in range(lo, hi):
            if int(q["common_pid"][k]) in self.sender and str(q["name"][k]) not in seen:
                seen.add(str(q["name"][k]))
                st.append((f"host stack: to {q['name'][k]}", int(ts[k])))
                if len(seen) == 2:
                    break
        return st

    def _hand_over(self, lo: int, hi: int, last: bool) -> tuple[int, str] | None:
        """(time, device) of the first (or ``last``) hand-over of a packet from a VMM
        thread to the host stack in [lo, hi]."""
        vmm = np.array(sorted(self.vmm), np.int64)
        best: tuple[int, str] | None = None
        for event in RX_EVENTS:
            got = self._find(event, lo, hi, lambda tb, s: np.isin(tb["common_pid"][s], vmm),
                             last=last)
            if got is not None and (best is None or (got[0] > best[0]) == last):
                tb = self.trace.t(event)
                best = (got[0], str(tb["name"][got[1]]) if "name" in tb.cols else "?")
        return best

    def _stages(self, a: int, b: int, kernel_ts: bool) -> PacketPath:
        """The packet's path: stages, the QEMU thread that took it up, the sender thread
        woken for the reply (-1: none) and the window shift (see ``explain``)."""
        host = self._host_stages(a, b)
        st: list[tuple[str, int]] = [("sent", a), *host]
        t = host[-1][1] if host else a
        shift = t - a if kernel_ts else 0
        end = b + shift
        qemu_tid = -1
        # QEMU takes the packet up: woken for it, or already awake when it reached the
        # tap (busy with other packets or the guest's I/O): then the first wake-up of a VMM
        # thread after it is another thread's (a vCPU kicked for this very packet, later).
        awake = self._awake_at(t)
        woke = None
        if awake is not None:
            qemu_tid, state = awake
            woke = (t, -1)
            st.append(("QEMU already awake", t))
            if state == RUNNING:
                st.append(("QEMU running", t))
        else:
            woke = self._find("sched_waking", t, end,
                               lambda tb, s: np.isin(tb["pid"][s], self.io))
            if woke is not None:
                t = woke[0]
                qemu_tid = int(self.trace.t("sched_waking")["pid"][woke[1]])
                st.append(("QEMU woken", t))
        if woke is not None and not any(s == "QEMU running" for s, _ in st):
            run = self._find("sched_switch", t, end,
                              lambda tb, s: tb["next_pid"][s] == qemu_tid)
            if run is not None:
                t = run[0]
                st.append(("QEMU running", t))
        sender_tid = -1
        if woke is not None and kernel_ts:
            # The RX stamp is taken as the reply enters the host stack, just before the
            # tracepoint (netif_receive_skb_internal stamps, __netif_receive_skb_core
            # traces): the reply's hand-over is the first one at or after it. (The last
            # one before it is another packet's: QEMU hands over the other packets'
            # replies while the responder holds one.)
            got = self._hand_over(end, end + REPLY_SLACK_NS, last=False)
            if got is not None:
                st.append((f"reply from the guest: {got[1]}", end))
        elif woke is not None:
            # User-space stamps: the reply reached the socket, then woke the receiver,
            # before ``b``; its hand-over is the last one before that wake-up.
            back = self._find("sched_waking", t, end,
                               lambda tb, s: np.isin(tb["pid"][s], self.sender), last=True)
            got = self._hand_over(t, back[0] if back else end, last=True)
            if got is not None:
                st.append((f"reply from the guest: {got[1]}", got[0]))
                if back is not None:
                    st.append(("sender woken", back[0]))
                    sender_tid = int(self.trace.t("sched_waking")["pid"][back[1]])
        st.append(("received", end))
        return PacketPath(st, qemu_tid, sender_tid, shift)

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

    def explain(self, seq: int, a: int, b: int, kernel_ts: bool = True) -> Attribution:
        """Round trip ``seq``: sent at ``a`` (user space, before send()), received at
        ``b``. With kernel stamps (``kernel_ts``), ``b - a`` is the kernel's RTT, from the
        TX stamp (the tap's driver, after the host stack) to the RX stamp (the reply
        entering the host stack), so the window accounted is ``[a, b]`` shifted by the
        send's path to the tap as the trace shows it (the sample stores the user-space send
        time, the RTT added); user-space stamps are the window as they are."""
        att = Attribution(seq, b - a, a, b)
        path = self._stages(a, b, kernel_ts)
        lo, hi = a + path.shift, b + path.shift
        span = self.ex.span
        if a < span[0] or hi > span[1]:     # the send too: its queueing is in the path
            att.status, att.reason = "not traced", "window outside the capture"
            att.causes[UNEXPLAINED] = max(0, b - a)
            return att
        for cpu, l2, h2, why in self.ex.lost:
            if l2 < hi and h2 > lo:
                att.status, att.reason = "incomplete", why
                att.causes[UNEXPLAINED] = max(0, b - a)
                return att
        if path.shift:
            dev = [n for n, _ in path.stages if n.startswith("host stack: to ")][-1][15:]
            att.notes.append(f"kernel stamps: the round trip runs from the packet queued "
                             f"to {dev} ({path.shift} ns after the send) to the reply "
                             f"entering the host stack")
        att.stages, tid, sender_tid = path.stages, path.qemu_tid, path.sender_tid
        names = [s for s, _ in att.stages]
        at = dict(att.stages)
        causes: dict[str, int] = defaultdict(int)
        woken = at.get("QEMU woken", at.get("QEMU already awake"))
        running = at.get("QEMU running")
        reply = next((t for s, t in att.stages if s.startswith("reply")), None)
        s_woken = at.get("sender woken")
        if woken is not None and running is not None and reply is not None:
            causes[TO_QEMU] += woken - lo
            covered = self._runnable(tid, woken, running, causes, "QEMU I/O thread running")
            causes[UNEXPLAINED] += (running - woken) - covered
            self._guest(seq, running, reply, causes, att)
            end = s_woken if s_woken is not None else hi
            causes[TO_SENDER] += end - reply
            if s_woken is not None:
                # the thread woken for the reply (netsend's receiver), not any sender thread
                covered = self._runnable(sender_tid, s_woken, hi, causes, SENDER_RUNNING)
                causes[UNEXPLAINED] += (hi - s_woken) - covered
        else:
            woke = ("QEMU woken", "QEMU already awake")
            att.stages_missing = [s for s in ("QEMU woken", "QEMU running",
                                              "reply from the guest") if
                                  not any(n.startswith(woke if s in woke else s)
                                          for n in names)]
            self._guest(seq, lo, hi, causes, att)
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
    user_ts = (s["flags"].astype(np.int64) & FLAG_USER_TS) != 0
    atts = [px.explain(int(seq[i]), int(dl[i]), int(en[i]), kernel_ts=not user_ts[i])
            for i in idx.tolist()]
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
