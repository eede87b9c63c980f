"""A Xen run's explanation as a native Perfetto trace (`irqlab explain RUN --perfetto F`):
the Xen events on tracks of their own — per pCPU, which vCPU ran (from xentrace's runstate
records), dom0's long hypercalls — then, as for host captures (irqlab.explain.perfetto),
the probe's latency counter, the spikes with their stages and the attribution laid end
to end. Timestamps are ns from the capture's first record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from irqlab.explain.perfetto import SEQUENCE_ID, _lanes, _pb, _track, _track_event
from irqlab.xen.explain import LONG_HYPERCALLS, PV_HYPERCALL_V2, XenExplained, _call_name
from irqlab.xen.timeline import vcpu_name

ROOT, SPIKES, CAUSES, PCPU = 1, 11, 12, 1000


def write_xen_perfetto(res: XenExplained, path: Path) -> dict[str, Any]:
    pb = _pb()
    cap = res.cap
    t0 = cap.first_tsc

    def ns(tick: int) -> int:
        return max(0, round((tick - t0) * 1e9 / res.hz))
    packets = [_track(pb, ROOT, f"irqlab run {res.run.run_id} (xentrace)")]
    packets[0].first_packet_on_sequence = True
    packets[0].sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    events = 0
    for c in sorted(cap.runs):
        track = PCPU + 10 * c
        packets.append(_track(pb, track, f"Xen pCPU {c}: vCPU running", ROOT))
        starts, ends, who = cap.runs[c]
        for s, e, v in zip(starts.tolist(), ends.tolist(), who):
            packets.append(_track_event(pb, ns(s), track, "begin", vcpu_name(v)))
            packets.append(_track_event(pb, ns(e), track, "end"))
            events += 1
        pv = cap.pv.get(c)
        if pv is None:
            continue
        calls = PCPU + 10 * c + 1
        packets.append(_track(pb, calls, f"Xen pCPU {c}: hypercalls (to the next PV "
                                         f"record)", ROOT))
        t, minor, op, arg = pv
        for k in range(len(t)):
            if minor[k] != PV_HYPERCALL_V2 or int(op[k]) not in LONG_HYPERCALLS:
                continue
            end = int(t[k + 1]) if k + 1 < len(t) else int(t[k])
            packets.append(_track_event(pb, ns(int(t[k])), calls, "begin",
                                        _call_name(int(op[k]), int(arg[k]))))
            packets.append(_track_event(pb, ns(end), calls, "end"))
            events += 1
    spikes = sorted((a for a in res.samples if a.status == "explained"),
                    key=lambda a: (a.start, a.seq))
    lanes = _lanes([(a.start, max(a.end, a.start)) for a in spikes])
    for lane in range(max(lanes, default=-1) + 1):
        suffix = f" ({lane + 1})" if lane else ""
        packets.append(_track(pb, SPIKES + 10 * lane,
                              f"spikes (deadline → handler entry){suffix}", ROOT))
        packets.append(_track(pb, CAUSES + 10 * lane,
                              f"attribution (causes end to end, largest first){suffix}",
                              ROOT))
    for a, lane in zip(spikes, lanes):
        track, causes = SPIKES + 10 * lane, CAUSES + 10 * lane
        start, end = ns(a.start), ns(max(a.end, a.start))
        packets.append(_track_event(pb, start, track, "begin", f"sample {a.seq}", {
            "seq": a.seq, "latency_ns": res.ns(a.latency_tick),
            **{f"cause: {k}": res.ns(v) for k, v in a.ranked()}}))
        for (name, t), (_n, t2) in zip(a.stages, a.stages[1:]):
            s0, s1 = max(start, ns(t)), min(end, max(ns(t), ns(t2)))
            if s0 <= s1:
                packets.append(_track_event(pb, s0, track, "begin", name))
                packets.append(_track_event(pb, s1, track, "end"))
        packets.append(_track_event(pb, end, track, "end"))
        at = a.start
        for cause, tick in a.ranked():
            if tick:
                packets.append(_track_event(pb, ns(at), causes, "begin", cause,
                                            {"sample": a.seq}))
                packets.append(_track_event(pb, ns(at + tick), causes, "end"))
                at += tick
    trace = pb.Trace()
    for p in packets:
        p.trusted_packet_sequence_id = SEQUENCE_ID
    trace.packet.extend(packets)
    data = trace.SerializeToString()
    path.write_bytes(data)
    return {"file": str(path), "events": events, "samples": len(res.samples),
            "spikes": len(spikes), "bytes": len(data)}
