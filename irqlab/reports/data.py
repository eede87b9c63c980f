"""A run's data as reports need it, and its headline figures.

Latencies stay in raw ticks (exact integers) like everywhere in irqlab; nanoseconds are
derived with ``ticks_to_ns`` (round half away from zero). Percentiles are recomputed
exactly from the raw samples when the run has them (nearest rank, Hyndman & Fan 1996
definition 1, the rule the live summary uses), otherwise taken from the stored summary
(log histogram, relative error <= 1/128, or whatever the import format gave).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irqlab.stats import quantile_rank, ticks_to_ns
from irqlab.stats.fields import COMPARE_TABLE
from irqlab.store import Store
from irqlab.store.db import RunRow

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


@dataclass
class RunData:
    """One run: its row, windows, raw latencies (when stored) and stored histogram."""

    row: RunRow
    windows: list[dict[str, Any]]
    latency_tick: np.ndarray | None = None   # int64, in sequence order
    deadline_s: np.ndarray | None = None     # float64, seconds since the first deadline
    flags: np.ndarray | None = None          # uint32
    histogram: list[tuple[int, int | None, int]] | None = None
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
        return self.latency_tick is not None and self.latency_tick.size > 0

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


def load_run(store: Store, row: RunRow, raw: bool = True) -> RunData:
    """Read a run's windows, stored histogram and (with ``raw``) its raw samples."""
    data = RunData(row=row, windows=store.windows(row.run_id),
                   histogram=store.histogram(row.run_id).get("all"))
    if raw:
        lat, dl, fl = [], [], []
        for batch in store.iter_samples(row.run_id):
            deadline = batch.column("deadline_tick").to_numpy().astype(np.int64)
            entry = batch.column("entry_tick").to_numpy().astype(np.int64)
            # Two's complement subtraction of the u64 counters gives the signed latency
            # even across the top bit (docs/formats.md section 2).
            lat.append(entry - deadline)
            dl.append(deadline)
            fl.append(batch.column("flags").to_numpy())
        if lat:
            data.latency_tick = np.concatenate(lat)
            deadlines = np.concatenate(dl)
            data.deadline_s = (deadlines - deadlines[0]) / data.tick_hz
            data.flags = np.concatenate(fl)
    return data


def load_runs(store: Store, rows: list[RunRow], raw: bool = True) -> list[RunData]:
    return [load_run(store, r, raw) for r in rows]


def exact_quantiles_tick(sorted_tick: np.ndarray, qs: list[float]) -> list[int]:
    """Nearest-rank quantiles of sorted samples (``irqlab.stats.quantile_rank``)."""
    n = sorted_tick.size
    return [int(sorted_tick[quantile_rank(q, n) - 1]) for q in qs]


def warm_max_ns(run: RunData) -> int | None:
    """The summary's warm max, else the max of windows after the warm-up ones."""
    s = run.row.summary or {}
    if s.get("warm_max_ns") is not None:
        return int(s["warm_max_ns"])
    warmup = int(run.row.params.get("warmup", 1) or 0)
    maxima = [w["max_ns"] for w in run.windows
              if w["index"] >= warmup and w.get("max_ns") is not None]
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
    if run.has_raw:
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
