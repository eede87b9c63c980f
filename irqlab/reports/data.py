"""A run's data as reports need it, and its headline figures.

Latencies stay in raw ticks (exact integers) like everywhere in irqlab; nanoseconds are
derived with ``ticks_to_ns`` (round half away from zero). Percentiles are recomputed
exactly from the raw samples when the run has them (nearest rank, Hyndman & Fan 1996
definition 1, the rule the live summary uses), otherwise taken from the stored summary
(log histogram, relative error <= 1/128, or whatever the import format gave).

Memory stays bounded whatever the run's length: a run above IN_MEMORY_SAMPLES samples
keeps them in the store, which computes its exact figures in batches
(Store.sample_figures); the noise test and plots read it batch by batch too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, TypeVar

import numpy as np

from irqlab.stats import quantile_rank, ticks_to_ns
from irqlab.stats.fields import COMPARE_TABLE
from irqlab.stats.parts import part_ticks
from irqlab.store import StoreError
from irqlab.store.arrow import numeric_view
from irqlab.store.db import RunRow, SamplesUnordered
from irqlab.store.interface import RunReader
from irqlab.store.quantiles import StoredFigures

T = TypeVar("T")

NS_PER_S = 1_000_000_000

# (figure key, quantile, label) of the percentiles every report shows: the compare
# table's (irqlab.stats.fields).
PERCENTILES: tuple[tuple[str, float, str], ...] = tuple(
    (c.key, c.field.quantile, c.field.label) for c in COMPARE_TABLE
    if c.field.quantile is not None)
FROM_RAW = "raw"          # exact, from every stored sample
FROM_SUMMARY = "summary"  # the stored summary's (histogram or imported) values

FROM_TEXT = {FROM_RAW: "exact, from the raw samples (nearest rank)",
             FROM_SUMMARY: "from the stored summary (log histogram, <= 1/128 relative error, "
                           "or as imported)"}


# Runs with more samples than this keep them in the store: figures, the noise test and
# plots read them batch by batch (bounded memory); smaller runs are read whole.
IN_MEMORY_SAMPLES = 2_000_000


class StoredSamples:
    """A big run's samples, left in the store and read in batches when needed."""

    def __init__(self, store: RunReader, run_id: int, count: int) -> None:
        self.store = store
        self.run_id = run_id
        self.count = count
        self._figures: dict[int | None, StoredFigures] = {}
        self.noise: dict[int, np.ndarray] = {}    # seed -> the noise test's sample
        self.plot_data: Any = None                # reports/scan.py's PlotData
        self.tail: Any = None                     # reports/scan.py's TailScan

    def cache_figures(self, threshold_tick: int | None, figures: StoredFigures) -> None:
        """Figures computed elsewhere (reports/scan.py reads the run once for many)."""
        self._figures[threshold_tick] = figures

    def has_figures(self, threshold_tick: int | None) -> bool:
        return threshold_tick in self._figures

    def figures(self, threshold_tick: int | None) -> StoredFigures:
        """Exact count, min, max, count above the threshold and PERCENTILES (cached)."""
        if threshold_tick not in self._figures:
            self._figures[threshold_tick] = self.store.sample_figures(
                self.run_id, [q for _, q, _ in PERCENTILES], threshold_tick)
        return self._figures[threshold_tick]

    def over_sequence(self, fn: Callable[[Iterator[Any]], T],
                      with_deadline: bool = False) -> T:
        """fn(batches of latencies, or (latency, deadline tick) pairs, in sequence
        order): the storage order when it is that (checked as read), else sorted."""
        try:
            return fn(self.store.iter_latency(self.run_id, with_deadline=with_deadline,
                                              in_sequence=True))
        except SamplesUnordered:
            return fn(self.store.iter_latency_sorted(self.run_id,
                                                     with_deadline=with_deadline))


@dataclass
class RunData:
    """One run: its row, windows, raw latencies (when stored) and stored histogram.

    A run of at most IN_MEMORY_SAMPLES samples has them in `latency_tick`; a bigger one
    in `stored` (read from the store as needed, never all at once)."""

    row: RunRow
    windows: list[dict[str, Any]]
    latency_tick: np.ndarray | None = None   # int64, in sequence order
    deadline_s: np.ndarray | None = None     # float64, seconds since the first deadline
    flags: np.ndarray | None = None          # uint32
    cpu: np.ndarray | None = None            # uint32, the CPU of each sample (per-CPU
    #                                          figures: irqlab.reports.percpu)
    histogram: list[tuple[int, int | None, int]] | None = None
    stored: StoredSamples | None = None
    _sorted: np.ndarray | None = field(default=None, repr=False)

    @property
    def run_id(self) -> int:
        return self.row.run_id

    @property
    def label(self) -> str:
        """Short human label: ``#id name``."""
        return f"#{self.row.run_id} {self.row.name}"

    @property
    def tick_hz(self) -> int:
        """Counter rate; runs without one (imported in ns) count in ns."""
        return int(self.row.tick_hz or (self.row.summary or {}).get("tick_hz") or NS_PER_S)

    @property
    def threshold_ns(self) -> int | None:
        s = self.row.summary or {}
        val = self.row.threshold_ns if self.row.threshold_ns is not None \
            else s.get("threshold_ns")
        return None if val is None else int(val)

    @property
    def window_ns(self) -> int | None:
        val = self.row.params.get("window_ns")
        return int(val) if val else None

    @property
    def has_raw(self) -> bool:
        return self.stored is not None or (self.latency_tick is not None
                                           and self.latency_tick.size > 0)

    def over_sequence(self, fn: Callable[[Iterator[Any]], T],
                      with_deadline: bool = False) -> T:
        """fn(batches of raw latencies in sequence order; with `with_deadline`, pairs
        (latency, deadline_s)), wherever the samples are."""
        if self.stored is None:
            assert self.latency_tick is not None and self.deadline_s is not None
            one = (self.latency_tick, self.deadline_s) if with_deadline else self.latency_tick
            return fn(iter([one]))
        if not with_deadline:
            return self.stored.over_sequence(fn)
        hz = self.tick_hz

        def seconds(batches: Iterator[Any]) -> T:
            def pairs() -> Iterator[tuple[np.ndarray, np.ndarray]]:
                first = None
                for lat, deadline in batches:
                    if first is None and deadline.size:
                        first = int(deadline[0])
                    yield lat, (deadline - first) / hz
            return fn(pairs())
        return self.stored.over_sequence(seconds, with_deadline=True)

    def sorted_tick(self) -> np.ndarray:
        """Raw latencies sorted ascending (computed once)."""
        if self._sorted is None:
            assert self.latency_tick is not None
            self._sorted = np.sort(self.latency_tick)
        return self._sorted

    def latency_ns_float(self) -> np.ndarray:
        """Raw latencies in ns as floats (for plots; figures use exact integers)."""
        assert self.latency_tick is not None
        return self.latency_tick * (NS_PER_S / self.tick_hz)

    def ns(self, tick: int) -> int:
        return ticks_to_ns(int(tick), self.tick_hz)

    def threshold_tick(self, threshold_ns: int) -> int:
        """The live run's rule: above means latency_tick > threshold_ns * hz // 1e9."""
        return threshold_ns * self.tick_hz // NS_PER_S


def samples_pruned(row: RunRow) -> bool:
    """Whether retention (`irqlab monitor --keep-raw`, store/retention.py) dropped some of
    the run's raw samples: what is left (the recent ones and the spikes) is no sample of
    the run, so its figures come from the stored summary and histogram, which cover every
    sample, as for an import without raw samples."""
    pruned = (row.metadata or {}).get("retention") or {}
    return bool(pruned.get("dropped_samples") or pruned.get("dropped_files"))


def load_run(store: RunReader, row: RunRow, raw: bool = True,
             in_memory_samples: int | None = None, metric: str = "total") -> RunData:
    """Read a run's windows, stored histogram and (with ``raw``) its raw samples: those
    of a run with more than `in_memory_samples` stay in the store (RunData.stored),
    which must then stay open while the run is used (default: IN_MEMORY_SAMPLES).
    ``metric`` "irq" or "thread": the run's IRQ or thread part instead (load_part)."""
    if metric != "total":
        return load_part(store, row, metric)
    data = RunData(row=row, windows=store.windows(row.run_id),
                   histogram=store.histogram(row.run_id).get("all"))
    if raw and not samples_pruned(row):
        count = store.sample_count(row.run_id)
        if count > (IN_MEMORY_SAMPLES if in_memory_samples is None else in_memory_samples):
            data.stored = StoredSamples(store, row.run_id, count)
            return data
        read_samples(data, store)
    return data


def load_runs(store: RunReader, rows: list[RunRow], raw: bool = True,
              in_memory_samples: int | None = None, metric: str = "total"
              ) -> list[RunData]:
    return [load_run(store, r, raw, in_memory_samples, metric) for r in rows]


def read_samples(data: RunData, store: RunReader,
                 parts: dict[tuple[int, int], int] | None = None, metric: str = "total"
                 ) -> None:
    """Fill ``data``'s sample columns from the store; with ``parts`` (a split run's
    {(seq, cpu): irq_tick}) only the split samples, their latency ``metric``'s part."""
    lat, dl, fl, cpu = [], [], [], []
    for batch in store.iter_samples(data.run_id):
        deadline = numeric_view(batch.column("deadline_tick")).astype(np.int64)
        entry = numeric_view(batch.column("entry_tick")).astype(np.int64)
        flags, c = numeric_view(batch.column("flags")), numeric_view(batch.column("cpu"))
        if parts is None:
            # Two's complement subtraction of the u64 counters gives the signed latency
            # even across the top bit (docs/formats.md section 2).
            lat.append(entry - deadline)
        else:
            seq = numeric_view(batch.column("seq"))
            irq = np.array([parts.get((int(q), int(k)), -1) for q, k in zip(seq, c)],
                           np.int64)
            keep = irq >= 0
            deadline, entry, flags, c = deadline[keep], entry[keep], flags[keep], c[keep]
            lat.append(part_ticks(deadline, entry, irq[keep], metric))
        dl.append(deadline)
        fl.append(flags)
        cpu.append(c)
    if lat:
        data.latency_tick = np.concatenate(lat)
        deadlines = np.concatenate(dl)
        data.deadline_s = (deadlines - deadlines[0]) / data.tick_hz
        data.flags = np.concatenate(fl)
        data.cpu = np.concatenate(cpu)


def load_part(store: RunReader, row: RunRow, metric: str) -> RunData:
    """A split run (irqlab.explain.parts) as a run of one part's latencies: its split
    samples with the IRQ part (deadline -> timer hard IRQ) or the thread part (-> probe
    thread running) as their latency, so every report computes its figures over that
    column as it would over the total. The stored windows, histogram and summary figures
    describe the total: they are left out (the run's own row keeps its lost count and
    threshold). A split run is a traced native or Linux-guest one, seconds to minutes:
    read whole."""
    parts = store.sample_parts(row.run_id)
    if not parts:
        raise StoreError(f"run {row.run_id} has no IRQ/thread split for --metric "
                         f"{metric}: record it with `irqlab run --target native --trace` "
                         f"(or --target linux-guest --trace), or compare it with "
                         f"--metric total")
    s = row.summary or {}
    kept = {k: s[k] for k in ("lost", "threshold_ns", "tick_hz") if k in s}
    data = RunData(row=replace(row, summary={**kept, "metric": metric}), windows=[])
    read_samples(data, store, parts, metric)
    return data


def exact_quantiles_tick(sorted_tick: np.ndarray, qs: list[float]) -> list[int]:
    """Nearest-rank quantiles of sorted samples (``irqlab.stats.quantile_rank``)."""
    n = sorted_tick.size
    return [int(sorted_tick[quantile_rank(q, n) - 1]) for q in qs]


def warm_max_ns(run: RunData) -> int | None:
    """The summary's warm max, else the max of windows after the warm-up ones; the
    warm-up never takes the last window (irqlab.stats.run.RunSummary, issue 32)."""
    s = run.row.summary or {}
    if s.get("warm_max_ns") is not None:
        return int(s["warm_max_ns"])
    warmup = int(run.row.params.get("warmup", 1) or 0)
    filled = [w for w in run.windows if w.get("max_ns") is not None]
    maxima = [w["max_ns"] for w in filled if w["index"] >= warmup]
    if not maxima and filled:
        maxima = [max(filled, key=lambda w: w["index"])["max_ns"]]
    return max(maxima) if maxima else None


def figures(run: RunData, threshold_ns: int | None = None) -> dict[str, Any]:
    """Headline figures of a run in integer ns, and where its percentiles came from.

    ``threshold_ns`` overrides the run's own threshold for the above-threshold count
    (possible only with raw samples; otherwise the stored count is kept and says so).
    """
    s = run.row.summary or {}
    thr = run.threshold_ns if threshold_ns is None else threshold_ns
    out: dict[str, Any] = {"samples": int(s.get("samples") or 0), "threshold_ns": thr,
                           "warm_max_ns": warm_max_ns(run), "lost": s.get("lost")}
    if run.stored is not None:
        got = run.stored.figures(None if thr is None else run.threshold_tick(thr))
        out.update({key: run.ns(v) for (key, _, _), v in zip(PERCENTILES,
                                                              got.quantile_tick)})
        out.update({"samples": got.count, "min_ns": run.ns(got.min_tick),
                    "max_ns": run.ns(got.max_tick), "percentiles_from": FROM_RAW,
                    "above_threshold": got.above})
    elif run.has_raw:
        srt = run.sorted_tick()
        qs = exact_quantiles_tick(srt, [q for _, q, _ in PERCENTILES])
        out.update({key: run.ns(v) for (key, _, _), v in zip(PERCENTILES, qs)})
        out.update({"samples": int(srt.size), "min_ns": run.ns(srt[0]),
                    "max_ns": run.ns(srt[-1]), "percentiles_from": FROM_RAW})
        if thr is not None:
            # searchsorted on the sorted ticks: count of values > threshold_tick.
            idx = np.searchsorted(srt, run.threshold_tick(thr), side="right")
            out["above_threshold"] = int(srt.size - idx)
        else:
            out["above_threshold"] = None
    else:
        out.update({key: s.get(key) for key, _, _ in PERCENTILES})
        out.update({"min_ns": s.get("min_ns"), "max_ns": s.get("max_ns"),
                    "percentiles_from": FROM_SUMMARY})
        same_thr = threshold_ns is None or threshold_ns == run.threshold_ns
        out["above_threshold"] = s.get("above_threshold") if same_thr else None
        if not same_thr:
            out["threshold_ns"] = run.threshold_ns
    n, above = out["samples"], out["above_threshold"]
    out["above_threshold_pct"] = (100.0 * above / n) if n and above is not None else None
    return out
