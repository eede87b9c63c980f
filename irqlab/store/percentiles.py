"""A finished run's percentiles, exact from its stored samples, into its summary.

While a run measures, its percentiles can only be estimated (the live log histogram,
<= 1/128 relative error, never under-reported). Once it has ended its samples are in
the store, so its summary gets the exact nearest-rank values (Hyndman & Fan 1996
definition 1, irqlab.stats.quantile_rank) through ``sample_figures`` — the very
computation `compare`, `report` and `check` use for stored runs (irqlab.stats.select in
bounded memory on DuckDB, proved ``percentile_disc`` on PostgreSQL) — so every reader
shows one value per percentile. ``percentiles_from`` says which the summary holds
(docs/formats.md section 4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

import numpy as np

from irqlab.stats import LogHistogram, ticks_to_ns
from irqlab.stats.fields import PERCENTILE_FIELDS, PERCENTILES_EXACT, PERCENTILES_HISTOGRAM
from irqlab.stats.select import exact_figures
from irqlab.store.arrow import numeric_view

if TYPE_CHECKING:
    import pyarrow as pa

    from irqlab.store.quantiles import StoredFigures


class SampleStore(Protocol):
    """What these functions read of a store: both stores (irqlab.store.db.Store, the lab's
    irqlab.store.pg.PgStore) have it. A protocol, not the classes: the stores reach this
    module when they close dead runs (irqlab.store.recover), so naming them here would
    close an import circle."""

    def sample_count(self, run_id: int) -> int: ...

    def sample_figures(self, run_id: int, quantiles: list[float],
                       threshold_tick: int | None = None,
                       histogram: LogHistogram | None = None) -> "StoredFigures": ...

    def iter_samples(self, run_id: int, batch: int = 1_000_000
                     ) -> Iterator["pa.RecordBatch"]: ...

QUANTILES: list[float] = [f.quantile for f in PERCENTILE_FIELDS if f.quantile is not None]


def exact_percentiles_ns(store: SampleStore, run_id: int, tick_hz: int,
                         histogram: LogHistogram | None = None
                         ) -> tuple[int, dict[str, int]]:
    """(count, {percentile key: exact ns}) of a run's stored samples; ({} when none).

    `histogram`: the samples' log histogram when the caller built it as they were
    stored (saves the first of the passes)."""
    got = store.sample_figures(run_id, QUANTILES, None, histogram)
    return got.count, {f.key: ticks_to_ns(v, tick_hz)
                       for f, v in zip(PERCENTILE_FIELDS, got.quantile_tick)}


def with_exact_percentiles(store: SampleStore, run_id: int, summary: dict[str, Any],
                           histogram: LogHistogram | None = None) -> dict[str, Any]:
    """`summary` (updated in place, and returned) with exact percentiles when the store
    holds exactly the samples it summarises; otherwise (samples not stored, or not all:
    a failed write) it keeps the histogram's and says so."""
    n, tick_hz = int(summary.get("samples") or 0), summary.get("tick_hz")
    if not n or not tick_hz:
        return summary
    stored = store.sample_count(run_id)
    if stored != n:
        summary["percentiles_from"] = PERCENTILES_HISTOGRAM
        return summary
    # A histogram counting other samples than the store's would make the passes fail.
    use = histogram if histogram is not None and histogram.count == stored else None
    count, exact = exact_percentiles_ns(store, run_id, int(tick_hz), use)
    if count != n:            # changed under us (cannot happen for a finished run)
        summary["percentiles_from"] = PERCENTILES_HISTOGRAM
        return summary
    summary.update(exact)
    summary["percentiles_from"] = PERCENTILES_EXACT
    return summary


def per_cpu_exact(store: SampleStore, run_id: int, entries: list[dict[str, Any]],
                  tick_hz: int, histograms: dict[int, LogHistogram] | None = None
                  ) -> list[dict[str, Any]]:
    """Per-CPU summaries (key ``per_cpu``) with exact percentiles of each CPU's stored
    samples, by the same selection (irqlab.stats.select) over that CPU's samples."""
    histograms = histograms or {}
    for entry in entries:
        cpu, n = int(entry["cpu"]), int(entry.get("samples") or 0)
        if not n:
            continue
        read = _cpu_reader(store, run_id, cpu)
        hist = histograms.get(cpu)
        got = exact_figures(read, QUANTILES, None,
                            hist if hist is not None and hist.count == n else None)
        if got.count != n:
            entry["percentiles_from"] = PERCENTILES_HISTOGRAM
            continue
        entry.update({f.key: ticks_to_ns(v, tick_hz)
                      for f, v in zip(PERCENTILE_FIELDS, got.quantile_tick)})
        entry["percentiles_from"] = PERCENTILES_EXACT
    return entries


def _cpu_reader(store: SampleStore, run_id: int, cpu: int
                ) -> Callable[[], Iterator[np.ndarray]]:
    """Batches of one CPU's latencies in ticks (each call reads the run again)."""
    def read() -> Iterator[np.ndarray]:
        for rb in store.iter_samples(run_id):
            sel = numeric_view(rb.column("cpu")) == cpu
            entry = numeric_view(rb.column("entry_tick")).view(np.int64)
            deadline = numeric_view(rb.column("deadline_tick")).view(np.int64)
            # Two's complement difference of the u64 counters (docs/formats.md section 2).
            yield (entry - deadline)[sel]
    return read
