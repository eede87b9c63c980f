"""Explain a stored run: load its samples and capture, map clocks, attribute, aggregate."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.explain.attribute import STAGE_ORDER, Attribution, Explainer, aggregate
from irqlab.explain.clock import ClockMap, check_causality, fit_clock, refine_with_causality
from irqlab.explain.load import Trace, load_capture
from irqlab.explain.seam import Progress
from irqlab.explain.seam import Silent as _Silent
from irqlab.explain.seam import stored_samples as _samples
from irqlab.explain.shape import attributed_json, select_samples
from irqlab.store import Store, StoreError
from irqlab.store.db import RunRow
from irqlab.trace.archive import trace_file_for
from irqlab.trace.ringbuf import heap_reuse


@dataclass
class Explained:
    run: RunRow
    trace: Trace
    clock: ClockMap
    samples: list[Attribution]
    culprits: list[dict[str, Any]]
    selected_by: str
    tick_hz: int
    explainer: Explainer
    # Every stored sample (not only the explained ones), for the exports' sample track:
    # seq, latency_tick, and deadline/entry in host trace ticks.
    all_samples: dict[str, np.ndarray] = field(default_factory=dict)

    def ns(self, tick: int) -> int:
        return round(tick * 1e9 / self.tick_hz)


def capture_path(store: Store, run: RunRow) -> Path:
    meta = (run.metadata.get("hooks") or {}).get("trace") or {}
    path = Path(meta["file"]) if meta.get("file") else trace_file_for(store.path, run.run_id)
    if not path.exists():
        raise StoreError(f"run {run.run_id} has no trace capture ({path} missing): "
                         f"record one with `irqlab run --trace`")
    return path


def explain_run(store: Store, ref: str, threshold_ns: int | None = None,
                top: int | None = None, sample: int | None = None,
                progress: Progress | None = None) -> Explained:
    progress = progress or _Silent()
    run = store.resolve(ref)
    if not run.tick_hz:
        raise StoreError(f"run {run.run_id} has no tick rate (it never ran)")
    with heap_reuse():
        path = capture_path(store, run)
        # One C call decodes the pages: a spinner (its size says how long to expect).
        progress.stage(f"decoding capture ({path.stat().st_size / 1e6:.1f} MB gzip)")
        trace = load_capture(path)
        progress.stage(f"building timelines ({trace.events:,} events)")
        ex = Explainer(trace)
    s = _samples(store, run.run_id)
    seq = s["seq"].astype(np.int64)
    dl = s["deadline_tick"].astype(np.int64)
    en = s["entry_tick"].astype(np.int64)
    lat = en - dl
    vcpu_tid = ex.vcpus[0] if ex.vcpus else None
    vcpu_tl = ex.threads.get(vcpu_tid) if vcpu_tid is not None else None
    progress.stage(f"mapping clocks ({len(seq):,} samples)")
    clock = fit_clock(trace, seq, en, run.accel or "", vcpu_tl, deadline=dl,
                      vcpu_tid=vcpu_tid)
    tick_hz = int(run.tick_hz)
    chosen = select_samples(seq, lat, tick_hz, run.threshold_ns, threshold_ns, top, sample)
    if chosen is None:
        raise StoreError(f"run {run.run_id} has no sample {sample}")
    idx, how = chosen
    if vcpu_tl is not None:
        clock = refine_with_causality(clock, vcpu_tl, en)
    clock = check_causality(clock, seq, en)
    host_dl, host_en = clock.to_host(dl[idx]), clock.to_host(en[idx])
    progress.stage("attributing samples", total=len(idx))
    atts = []
    for k, (i, a, b) in enumerate(zip(idx.tolist(), host_dl.tolist(), host_en.tolist())):
        atts.append(ex.explain(int(seq[i]), int(a), int(b), int(lat[i]),
                               deadline_tick=int(dl[i])))
        if k % 64 == 0:
            progress.update(k + 1)
    progress.update(len(atts))
    for att in atts:
        att.notes.extend(clock.violations.get(att.seq, []))
    every = {"seq": seq, "latency_tick": lat, "host_deadline": clock.to_host(dl),
             "host_entry": clock.to_host(en)}
    return Explained(run, trace, clock, atts, aggregate(atts), how, tick_hz, ex, every)


def as_json(res: Explained) -> dict[str, Any]:
    """The ``{"type": "explain", ...}`` object (docs/formats.md §9)."""
    ns = res.ns
    hdr = res.trace.header
    enabled = hdr.get("enabled", [])
    fired = res.trace.fired()
    return {
        "type": "explain", "version": 1, "run_id": res.run.run_id,
        "selected_by": res.selected_by, "clock": res.clock.as_dict(res.tick_hz),
        "events": res.trace.events, "events_missing": hdr.get("missing", []),
        "events_never_fired": [e for e in enabled if e.split(":", 1)[1] not in fired],
        "lost_regions": [{"cpu": c, "from_ns": ns(lo - res.explainer.span[0]),
                          "to_ns": ns(hi - res.explainer.span[0]), "why": why}
                         for c, lo, hi, why in res.explainer.lost],
        **attributed_json(res.samples, res.culprits, ns, STAGE_ORDER),
    }
