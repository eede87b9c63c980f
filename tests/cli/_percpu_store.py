"""Stored runs with per-CPU samples, for compare/check/report --per-cpu and show --hist.

A 2-CPU run is written as `irqlab run --target native` stores one: samples carry their
CPU, the summary's ``per_cpu`` entries come from the real per-CPU statistics
(irqlab.stats.percpu) with exact percentiles from the stored samples
(irqlab.store.percentiles.per_cpu_exact), as measure/run.py makes them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from irqlab.measure.summary import histogram_rows
from irqlab.samples.record import RECORD_DTYPE
from irqlab.stats import LogHistogram
from irqlab.stats.percpu import PerCpuStats
from irqlab.store import Store
from irqlab.store.percentiles import per_cpu_exact
from tests.unit.reports._runs import PERIOD_NS, TICK_HZ, add_run

THRESHOLD_NS = 30_000


def cpu_latencies() -> dict[int, np.ndarray]:
    """CPU 0: 1..4000 ns; CPU 1: 3x that (max 12 us): known percentiles per CPU."""
    base = np.arange(1, 4001, dtype=np.int64)
    return {0: base, 1: base * 3}


def add_two_cpu_run(store: Store, name: str, scale: int = 1,
                    series: tuple[str, int, int] | None = None) -> int:
    """A finished 2-CPU run, samples alternating CPU 0 and 1 (CPU 1's scaled); with
    ``series`` (id, index, count) run ``index`` of that --repeat series."""
    lat = cpu_latencies()
    n = lat[0].size + lat[1].size
    cpu = np.tile(np.array([0, 1], np.uint32), n // 2)
    merged = np.empty(n, np.int64)
    merged[0::2], merged[1::2] = lat[0] * scale, lat[1] * scale
    tags, meta = None, None
    if series is not None:
        sid, index, count = series
        tags, meta = {"series": sid}, {"series": {"id": sid, "index": index, "count": count}}
    rid = add_run(store, name, merged, threshold_ns=THRESHOLD_NS, raw=False, tags=tags,
                  extra_meta=meta)
    rec = np.zeros(n, RECORD_DTYPE)
    rec["seq"] = np.arange(n)
    rec["deadline_tick"] = 10_000_000 + rec["seq"] * PERIOD_NS
    rec["entry_tick"] = rec["deadline_tick"] + merged.astype(np.uint64)
    rec["cpu"] = cpu
    store.add_samples(rid, rec)
    stats = PerCpuStats(TICK_HZ, THRESHOLD_NS, 1_000_000_000, 1, cpus=[0, 1])
    stats.add(cpu, rec["deadline_tick"].astype(np.int64), merged)
    entries = stats.summaries({c: {"lost": 0, "overruns": 0} for c in (0, 1)})
    per_cpu_exact(store, rid, entries, TICK_HZ)
    # The whole run's log histogram, stored as irqlab run stores it (show --hist).
    hist = LogHistogram()
    hist.add(merged)
    store.add_histogram(rid, "all", histogram_rows(hist, TICK_HZ))
    row = next(r for r in store.runs() if r.run_id == rid)
    store.finish_run(rid, "ok", {**row.summary, "per_cpu": entries})
    return rid


def make_percpu_store(path: Path) -> Path:
    """1 two-cpu (CPU 1 max 12 us), 2 two-cpu-x4 (CPU 1 max 48 us), 3 one-stream (no
    per-CPU samples)."""
    with Store(path) as st:
        add_two_cpu_run(st, "two-cpu")
        add_two_cpu_run(st, "two-cpu-x4", scale=4)
        add_run(st, "one-stream", np.arange(1, 2001, dtype=np.int64))
    return path
