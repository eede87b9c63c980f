"""What every explain shares, whatever the capture (host tracefs or xentrace): which
samples are asked about, and the attributed part of the ``{"type": "explain"}`` object
(docs/formats.md §9): samples, culprits, counts and where the time goes."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from irqlab.explain.attribute import UNEXPLAINED, Attribution, stage_summary

DEFAULT_THRESHOLD_NS = 30_000          # when neither --threshold nor the run gives one


def select_samples(seq: np.ndarray, latency_tick: np.ndarray, tick_hz: int,
                   run_threshold_ns: int | None, threshold_ns: int | None,
                   top: int | None, sample: int | None) -> tuple[np.ndarray, str] | None:
    """(indices, how they were chosen) of the samples to explain: one by sequence number,
    the ``top`` largest, or those above the threshold (given, the run's, or 30 us); None
    when ``sample`` is not in the run."""
    if sample is not None:
        idx = np.flatnonzero(seq == sample)
        return (idx, f"sample {sample}") if len(idx) else None
    if top is not None:
        return np.argsort(-latency_tick, kind="stable")[:top], f"top {top}"
    thr = threshold_ns if threshold_ns is not None else (run_threshold_ns
                                                         or DEFAULT_THRESHOLD_NS)
    return np.flatnonzero(latency_tick * 1e9 / tick_hz > thr), f"latency above {thr} ns"


def attributed_json(samples: list[Attribution], culprits: list[dict[str, Any]],
                    ns: Callable[[int], int], stage_order: Sequence[str]) -> dict[str, Any]:
    """The keys of the explain object that come from the attribution."""
    return {
        "samples": [{
            "seq": a.seq, "latency_ns": ns(a.latency_tick), "status": a.status,
            "reason": a.reason,
            "causes": [{"cause": k, "ns": ns(v),
                        "pct": round(100 * v / a.latency_tick, 1) if a.latency_tick else None}
                       for k, v in a.ranked()],
            "irq_during_ns": {k: ns(v) for k, v in a.irq_during.items() if v},
            "stages": [{"stage": s, "at_ns": ns(t - a.start)} for s, t in a.stages],
            "stages_missing": a.stages_missing, "notes": sorted(set(a.notes)),
        } for a in samples],
        "culprits": [{"cause": c["cause"], "total_ns": ns(c["total_tick"]),
                      "worst_ns": ns(c["worst_tick"]), "samples": c["samples"]}
                     for c in culprits],
        "incomplete": sum(a.status == "incomplete" for a in samples),
        "not_traced": sum(a.status == "not traced" for a in samples),
        "unexplained_ns": sum(ns(a.causes.get(UNEXPLAINED, 0)) for a in samples),
        "stage_summary": stage_summary(samples, ns, stage_order),
    }
