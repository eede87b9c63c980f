"""The JSON objects of a run: windows, the summary, the stored histogram rows."""

from __future__ import annotations

from typing import Any

import numpy as np

from irqlab.measure.config import RunConfig
from irqlab.runner.accel import AccelPlan
from irqlab.samples.layout import RingHeader
from irqlab.stats import LogHistogram, RunSummary, WindowStats, ticks_to_ns
# SUMMARY_VERSION is re-exported: irqlab.measure has always offered it.
from irqlab.stats.fields import SUMMARY_VERSION, make_summary, stats_figures
from irqlab.stats.parts import WindowParts


def window_dict(w: WindowStats, tick_hz: int, parts: WindowParts | None = None
                ) -> dict[str, Any]:
    """A window as its JSON keys, latencies in integer ns; with ``parts`` (a traced run
    split live, irqlab.explain.live), its IRQ and thread keys too, kept in the stored
    window's ``extra``."""
    def ns(v: float | int | None) -> int | None:
        return None if v is None else ticks_to_ns(v, tick_hz)
    out = {"index": w.index, "start_s": w.start_s, "samples": w.samples,
           "mean_ns": ns(w.mean_tick), "stddev_ns": ns(w.stddev_tick),
           "min_ns": ns(w.min_tick), "max_ns": ns(w.max_tick),
           "above_threshold": w.above_threshold,
           "global_min_ns": ns(w.global_min_tick), "global_max_ns": ns(w.global_max_tick),
           "invalid": w.invalid}
    extra: dict[str, Any] = {}
    if w.invalid:
        extra["invalid"] = w.invalid              # the store keeps it in windows.extra
    if parts is not None:
        out.update(parts.as_dict(tick_hz))
        extra["parts"] = parts.as_dict(tick_hz)
    if extra:
        out["extra"] = extra
    return out


def build_summary(cfg: RunConfig, run_id: int, name: str, plan: AccelPlan | None,
             hdr: RingHeader | None, status: str, s: RunSummary | None,
             lost: int, overruns: int, injected: int, message: str | None) -> dict[str, Any]:
    """The summary object of a run (keys: irqlab.stats.fields, docs/formats.md section 4)."""
    tick_hz = hdr.tick_hz if hdr else None
    return make_summary(run_id, name, {
        "target": cfg.target, "arch": hdr.arch if hdr else cfg.options.arch,
        "accel": plan.label if plan else None, "emulated": plan.emulated if plan else None,
        "status": status, "lost": lost, "overruns": overruns, "tick_hz": tick_hz,
        "period_ns": cfg.period_ns, "threshold_ns": cfg.threshold_ns,
        "injected": injected, "message": message, **stats_figures(s, tick_hz)})


def histogram_rows(hist: LogHistogram, tick_hz: int) -> list[tuple[int, int | None, int]]:
    """The run's histogram as stored buckets ``(lower_ns, upper_ns, count)``.

    Bucket [low, high] ticks becomes [ns(low), ns(high + 1)); negative latencies (the
    underflow bucket) become [min_ns, 0); the overflow bucket has upper_ns None.
    """
    rows: list[tuple[int, int | None, int]] = []
    if hist.underflow:
        rows.append((ticks_to_ns(hist.min, tick_hz), 0, hist.underflow))
    for index in np.flatnonzero(hist.counts):
        low, high = hist.bucket_bounds(int(index))
        rows.append((ticks_to_ns(low, tick_hz), ticks_to_ns(high + 1, tick_hz),
                     int(hist.counts[index])))
    if hist.overflow:
        rows.append((ticks_to_ns(hist.max_trackable + 1, tick_hz), None, hist.overflow))
    return rows


def probe_meta(hdr: RingHeader) -> dict[str, Any]:
    return {"build_id": hdr.build_id, "tick_hz": hdr.tick_hz, "tick_method": hdr.tick_method,
            "timer_mode": hdr.timer_mode, "apic_hz": hdr.apic_hz, "idle": hdr.idle,
            "period_tick": hdr.period_tick, "ring_capacity": hdr.capacity,
            "inject_every": hdr.inject_every, "inject_irqoff_tick": hdr.inject_irqoff_tick,
            **({"ref_counter": ref} if (ref := hdr.ref_meta()) else {})}
