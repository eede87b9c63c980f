"""A run's capture and explanation as a native Perfetto trace (protobuf, `.pftrace`):
`irqlab explain --perfetto FILE`, for ui.perfetto.dev and trace_processor. The one
writer of every explainer (irqlab.explain.seam): each gives a :class:`PerfettoRun`, its
spikes and its own tracks (tracefs events below, Xen's pCPU tracks), and
:func:`write_perfetto` writes the rest the same way for all.

- Host kernel events are ftrace events on Perfetto's CPU tracks (``FtraceEventBundle``
  per CPU): the events Perfetto models (sched_switch, sched_waking, irq_handler_*,
  softirq_*, hrtimer_*, local_timer_*, print, kvm_entry/exit …) in their typed messages,
  so the UI draws scheduling and IRQ slices; every other event as a
  ``GenericFtraceEvent`` with all its fields. Task names go in a ``ProcessTree``.
- The probe's samples on tracks of their own under "irqlab run N": a counter track of
  every sample's latency at its deadline (samples inside the capture), and a "spikes"
  track with one slice per explained sample from its deadline to its ISR entry, the KVM
  stages nested inside, its causes as debug annotations.
- "attribution": each spike's causes laid end to end from its deadline, largest first
  (their lengths are the attributed times, their positions are not when they happened);
  "vCPU thread": the vCPU thread's states in the spike windows.

Timestamps are ns of the capture's clock (irqlab.explain.export.to_ns_function), the
same for ftrace and track events. The messages come from the `perfetto` package's
compiled trace proto (its ``perfetto_trace_pb2``), so the definitions are Perfetto's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from dataclasses import dataclass

from irqlab.explain.attribute import Attribution
from irqlab.explain.export import decode_all, iter_events

SEQUENCE_ID = 1                    # one writer: every packet on one sequence
# Track uuids; spikes and attribution get a lane per overlap (uuid + 10 x lane).
ROOT, SAMPLES, VCPU, SPIKES, CAUSES = 1, 2, 3, 11, 12
EVENTS_PER_BUNDLE = 4096           # ftrace events per packet (one CPU each)


def _pb() -> Any:
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError as exc:      # the package is a dependency; say so if it is gone
        raise RuntimeError("--perfetto needs the perfetto and protobuf packages "
                           "(pip install perfetto; ./setup.sh installs them)") from exc
    return perfetto_trace_pb2


def _set_fields(msg: Any, fields: dict[str, Any]) -> bool:
    """Copy ``fields`` into a typed ftrace message; False when one does not fit (then
    the event goes out as a generic one, with nothing lost)."""
    desc = msg.DESCRIPTOR.fields_by_name
    for key, val in fields.items():
        f = desc.get(key)
        if f is None:
            continue                      # a field Perfetto does not model: dropped
        try:
            if f.type == f.TYPE_STRING:
                setattr(msg, key, str(val))
            elif f.type in (f.TYPE_UINT64, f.TYPE_UINT32, f.TYPE_FIXED64):
                setattr(msg, key, int(val) & ((1 << (64 if f.type != f.TYPE_UINT32 else 32)) - 1))
            elif isinstance(val, int):
                setattr(msg, key, val)
            else:
                return False
        except (TypeError, ValueError):
            return False
    return True


def _generic(ev: Any, name: str, fields: dict[str, Any]) -> None:
    ev.generic.event_name = name
    for key, val in fields.items():
        f = ev.generic.field.add()
        f.name = key
        if isinstance(val, int):
            if val < 0:
                f.int_value = val
            else:
                f.uint_value = val
        else:
            f.str_value = str(val)


def _track(pb: Any, uuid: int, name: str, parent: int | None = None,
           counter_unit_ns: bool = False) -> Any:
    p = pb.TracePacket()
    p.trusted_packet_sequence_id = SEQUENCE_ID
    p.track_descriptor.uuid = uuid
    p.track_descriptor.name = name
    if parent is not None:
        p.track_descriptor.parent_uuid = parent
    if counter_unit_ns:
        p.track_descriptor.counter.unit = pb.CounterDescriptor.UNIT_TIME_NS
    return p


def _track_event(pb: Any, ts: int, track: int, kind: str, name: str | None = None,
                 annotations: dict[str, Any] | None = None,
                 value: int | None = None) -> Any:
    p = pb.TracePacket()
    p.trusted_packet_sequence_id = SEQUENCE_ID
    p.timestamp = ts
    te = p.track_event
    te.type = {"begin": pb.TrackEvent.TYPE_SLICE_BEGIN, "end": pb.TrackEvent.TYPE_SLICE_END,
               "counter": pb.TrackEvent.TYPE_COUNTER}[kind]
    te.track_uuid = track
    if name is not None:
        te.name = name
    if value is not None:
        te.counter_value = value
    for key, val in (annotations or {}).items():
        a = te.debug_annotations.add()
        a.name = key
        if isinstance(val, bool):
            a.bool_value = val
        elif isinstance(val, int):
            a.int_value = val
        else:
            a.string_value = str(val)
    return p


def _lanes(windows: list[tuple[int, int]]) -> list[int]:
    """A lane per window such that windows of one lane never overlap (a slice track is a
    stack: two spikes overlapping on one track would nest wrongly). Windows sorted."""
    ends: list[int] = []
    out = []
    for lo, hi in windows:
        lane = next((k for k, e in enumerate(ends) if e <= lo), len(ends))
        if lane == len(ends):
            ends.append(hi)
        ends[lane] = hi
        out.append(lane)
    return out


def _merged(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of sorted windows, as disjoint windows."""
    out: list[tuple[int, int]] = []
    for lo, hi in windows:
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


# An explainer's own packets, each with how many capture events it carries.
Tracks = Callable[[Any, Callable[[int, int], None] | None], Iterable[tuple[Any, int]]]


@dataclass
class PerfettoRun:
    """What an explainer gives the writer. ``at_ns``: a tick of the explainer's timeline
    (Attribution.start/end/stages) as ns in the file; ``dur_ns``: a duration in those
    ticks as ns; ``counter``: (ns in the file, latency ns) of every sample inside the
    capture; ``tracks(pb, progress)``: the explainer's own packets."""

    title: str
    spikes: list[Attribution]
    at_ns: Callable[[int], int]
    dur_ns: Callable[[int], int]
    counter: list[tuple[int, int]]
    tracks: Tracks
    entry_word: str = "handler entry"


def spike_packets(pb: Any, run: PerfettoRun) -> Iterator[Any]:
    """Track descriptors, the latency counter, the spikes with their stages nested and
    the attribution laid end to end (the same for every explainer)."""
    root = _track(pb, ROOT, run.title)
    root.first_packet_on_sequence = True
    root.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    yield root
    yield _track(pb, SAMPLES, "sample latency (ns, at each deadline)", ROOT, True)
    for t, lat in run.counter:
        yield _track_event(pb, t, SAMPLES, "counter", value=lat)
    one = run.at_ns
    spikes = sorted(run.spikes, key=lambda a: (a.start, a.seq))
    lanes = _lanes([(a.start, max(a.end, a.start)) for a in spikes])
    for lane in range(max(lanes, default=-1) + 1):
        suffix = f" ({lane + 1})" if lane else ""
        yield _track(pb, SPIKES + 10 * lane, f"spikes (deadline → {run.entry_word}){suffix}",
                     ROOT)
        yield _track(pb, CAUSES + 10 * lane,
                     f"attribution (causes end to end, largest first){suffix}", ROOT)
    for a, lane in zip(spikes, lanes):
        track, causes = SPIKES + 10 * lane, CAUSES + 10 * lane
        start, end = one(a.start), one(max(a.end, a.start))
        notes = {f"cause: {cause}": run.dur_ns(tick) for cause, tick in a.ranked()}
        yield _track_event(pb, start, track, "begin", f"sample {a.seq}", {
            "seq": a.seq, "latency_ns": run.dur_ns(a.latency_tick), "status": a.status,
            "reason": a.reason or "", **notes})
        # Stages nested in the spike: clamped to it, so the slices always nest.
        for (name, t), (_n, t2) in zip(a.stages, a.stages[1:]):
            s0, s1 = max(start, one(t)), min(end, max(one(t), one(t2)))
            if s0 <= s1:
                yield _track_event(pb, s0, track, "begin", name)
                yield _track_event(pb, s1, track, "end")
        yield _track_event(pb, end, track, "end")
        at = a.start
        for cause, tick in a.ranked():
            if tick:
                yield _track_event(pb, one(at), causes, "begin", cause,
                                   {"sample": a.seq, "attributed_ns": run.dur_ns(tick)})
                yield _track_event(pb, one(at + tick), causes, "end")
                at += tick


def thread_state_packets(pb: Any, uuid: int, name: str, timeline: Any,
                         windows: list[tuple[int, int]], at_ns: Callable[[int], int]
                         ) -> Iterator[Any]:
    """A thread's states (irqlab.explain.timeline.ThreadTimeline) over the union of the
    sorted ``windows``, each state once."""
    yield _track(pb, uuid, name, ROOT)
    for w_lo, w_hi in _merged(windows):
        for seg, s_lo, s_hi in timeline.between(w_lo, w_hi):
            yield _track_event(pb, at_ns(s_lo), uuid, "begin", seg.state, {"cpu": seg.cpu})
            yield _track_event(pb, at_ns(s_hi), uuid, "end")


def ftrace_packets(pb: Any, header: dict[str, Any], per_cpu: dict[int, bytes],
                   cmdlines: dict[int, str], ns: Callable[[np.ndarray], np.ndarray],
                   progress: Callable[[int, int], None] | None = None
                   ) -> Iterator[tuple[Any, int]]:
    """A tracefs capture's events on Perfetto's CPU tracks, task names in a
    ``ProcessTree`` (for every explainer of a tracefs capture)."""
    tables, _missed = decode_all(header, per_cpu)
    total = sum(len(cols["ts"]) for _f, cols in tables)
    tree = pb.TracePacket()
    vmm_pid = header.get("vmm_pid")
    vmm = {int(k) for k in (header.get("vmm_threads") or {})}
    for pid, comm in sorted(cmdlines.items()):
        th = tree.process_tree.threads.add()
        th.tid, th.name = pid, comm
        th.tgid = int(vmm_pid) if vmm_pid and pid in vmm else pid
    if vmm_pid:
        proc = tree.process_tree.processes.add()
        proc.pid = int(vmm_pid)
        proc.cmdline.append(cmdlines.get(int(vmm_pid), "qemu"))
    yield tree, 0
    bundles: dict[int, Any] = {}
    events = 0
    for ev in iter_events(tables, ns, cmdlines):
        b = bundles.get(ev.cpu)
        if b is None:
            b = bundles[ev.cpu] = pb.TracePacket()
            b.ftrace_events.cpu = ev.cpu
        e = b.ftrace_events.event.add()
        e.timestamp = ev.ts_ns
        e.pid = ev.pid
        typed = pb.FtraceEvent.DESCRIPTOR.fields_by_name.get(ev.name)
        fits = typed is not None and typed.message_type is not None
        if fits:
            msg = getattr(e, ev.name)
            msg.SetInParent()           # present even when no field is set
            fits = _set_fields(msg, ev.fields)
            if not fits:
                e.ClearField(ev.name)
        if not fits:
            _generic(e, ev.name, ev.fields)
        events += 1
        if len(b.ftrace_events.event) >= EVENTS_PER_BUNDLE:
            bundle = bundles.pop(ev.cpu)
            yield bundle, len(bundle.ftrace_events.event)
        if progress is not None and events % 50_000 == 0:
            progress(events, total)
    for cpu in sorted(bundles):
        yield bundles[cpu], len(bundles[cpu].ftrace_events.event)
    if progress is not None:
        progress(events, total)


def write_perfetto(path: Path, run: PerfettoRun,
                   progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Write the trace; returns ``{file, events (the capture's, on its own tracks),
    samples (on the latency track: those inside the capture), spikes, packets, bytes}``."""
    pb = _pb()
    packets = events = on_track = 0
    with open(path, "wb") as f:
        def write(packet: Any) -> None:
            nonlocal packets
            # A Trace is `repeated TracePacket packet = 1`: packets appended one by one
            # form one valid Trace message, so the file is streamed.
            packet.trusted_packet_sequence_id = SEQUENCE_ID
            trace = pb.Trace()
            trace.packet.append(packet)
            f.write(trace.SerializeToString())
            packets += 1

        for p in spike_packets(pb, run):
            on_track += p.track_event.type == pb.TrackEvent.TYPE_COUNTER
            write(p)
        for p, n in run.tracks(pb, progress):
            events += n
            write(p)
    return {"file": str(path), "events": events, "samples": on_track,
            "spikes": len(run.spikes), "packets": packets, "bytes": path.stat().st_size}
