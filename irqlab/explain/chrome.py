"""Chrome trace JSON (the legacy "Trace Event Format": ph X slices, ts/dur in µs),
`irqlab explain --chrome-json`; Perfetto reads it best-effort (irqlab.explain.perfetto
writes Perfetto's own protobuf format).

Track 1 "samples": one slice per explained sample window, its KVM stages nested inside.
Track 2 "vCPU thread": the vCPU thread's states during those windows, in time.
Track 3 "causes": each sample's causes laid end to end from its deadline, largest first
(their lengths are the attributed times; their positions are not when they happened).
"""

from __future__ import annotations

import json
from pathlib import Path

from irqlab.explain.run import Explained


def write_chrome_json(res: Explained, path: Path) -> int:
    t0 = res.explainer.span[0]
    us = lambda tick: (tick - t0) * 1e6 / res.tick_hz          # noqa: E731
    dur = lambda tick: tick * 1e6 / res.tick_hz                # noqa: E731
    ev: list[dict] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": f"irqlab run {res.run.run_id}"}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "samples"}},
        {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "vCPU thread"}},
        {"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "causes"}},
    ]
    tid = res.explainer.vcpus[0] if res.explainer.vcpus else -1
    tl = res.explainer.threads.get(tid)
    for a in res.samples:
        ev.append({"ph": "X", "pid": 1, "tid": 1, "name": f"sample {a.seq}", "ts": us(a.start),
                   "dur": dur(a.end - a.start),
                   "args": {"latency_ns": res.ns(a.latency_tick), "status": a.status}})
        for (name, t), (_, t2) in zip(a.stages, a.stages[1:]):
            ev.append({"ph": "X", "pid": 1, "tid": 1, "name": name, "ts": us(t),
                       "dur": dur(max(0, t2 - t))})
        for seg, lo, hi in (tl.between(a.start, a.end) if tl else []):
            ev.append({"ph": "X", "pid": 1, "tid": 2, "name": seg.state, "ts": us(lo),
                       "dur": dur(hi - lo), "args": {"cpu": seg.cpu}})
        at = a.start
        for cause, tick in a.ranked():
            if tick:
                ev.append({"ph": "X", "pid": 1, "tid": 3, "name": cause, "ts": us(at),
                           "dur": dur(tick), "args": {"sample": a.seq}})
                at += tick
    path.write_text(json.dumps({"traceEvents": ev, "displayTimeUnit": "ns"}))
    return len(ev)
