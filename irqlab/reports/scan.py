"""One pass over a big run's stored samples for everything a command will need.

A run kept in the store (RunData.stored) is read batch by batch, and each read of 10^8
samples costs seconds; so compare and report say up front what they need, and
`scan_runs` reads each such run once for all of it: the log histogram (which locates
every percentile), the count above each threshold, the noise test's subsample for each
seed, and the plots' data (survival tail, every sample above the run's threshold, the
last deadline) and the tail fit's top samples with their positions. Exact percentiles then take one more pass over the few histogram
buckets that hold them (irqlab.stats.select). Results land in the StoredSamples caches
that figures(), the noise test and the plots read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from irqlab.reports import noise
from irqlab.reports.data import NS_PER_S, PERCENTILES, RunData
from irqlab.stats import LogHistogram, Moments, evt
from irqlab.stats.histogram import hist_and_moments
from irqlab.stats.select import exact_figures
from irqlab.stats.topk import TopK
from irqlab.store.quantiles import StoredFigures

# The survival curve's tail: this many largest samples, exact (in memory and stored).
TAIL_POINTS = 3000


@dataclass
class TailScan:
    """What the tail fit needs of a stored run (reports/tail.py): its top
    evt.top_count(n) samples (ns, ascending) with their positions, and its last
    deadline (s since the first)."""

    top_ns: np.ndarray
    positions: np.ndarray
    span_s: float


@dataclass
class PlotData:
    """What the plots of a stored run need (reports/plots.py draws it)."""

    histogram: LogHistogram         # every sample (histogram plot, survival head)
    top_tick: np.ndarray            # the TAIL_POINTS largest samples, ascending
    positive: int                   # samples > 0
    above_s: np.ndarray             # every sample above the run's threshold: time,
    above_ns: np.ndarray            # and latency
    last_s: float                   # the last deadline, s since the first


def scan_runs(runs: list[RunData], thresholds_ns: set[int | None],
              noise_seeds: dict[int, int] | None = None, plots: bool = False,
              tail: bool = False) -> None:
    """Read each stored run once for figures at every threshold (None: the run's own),
    the noise subsample of its seed in `noise_seeds` (run_id -> seed), with `plots` its
    plot data and with `tail` what its tail fit reads (TailScan)."""
    for run in runs:
        if run.stored is None:
            continue
        ticks = {None if t is None and run.threshold_ns is None
                 else run.threshold_tick(run.threshold_ns if t is None else t)
                 for t in thresholds_ns}
        seed = (noise_seeds or {}).get(run.run_id)
        stored = run.stored
        # Only what is not known yet (build_report scans for more than build_compare).
        ticks = {t for t in ticks if not stored.has_figures(t)}
        seed = None if seed is None or seed in stored.noise else seed
        want_plots = plots and stored.plot_data is None
        want_tail = tail and stored.tail is None
        if ticks or seed is not None or want_plots or want_tail:
            _scan(run, ticks, seed, want_plots, want_tail)


def _scan(run: RunData, thresholds: set[int | None], seed: int | None, plots: bool,
          tail: bool) -> None:
    stored = run.stored
    assert stored is not None
    n, scale = stored.count, NS_PER_S / run.tick_hz
    picks = None if seed is None or seed in stored.noise else noise.positions(n)
    plot_thr = (None if run.threshold_ns is None
                else run.threshold_tick(run.threshold_ns))
    counted = [t for t in thresholds if t is not None]
    timed = plots or tail          # deadlines read too

    def work(batches: Iterator[Any]) -> dict[str, Any]:
        hist, moments = LogHistogram(), Moments()
        above = dict.fromkeys(counted, 0)
        picked: list[np.ndarray] = []
        # One TopK for both the plots' TAIL_POINTS largest and the tail fit's top.
        top_k = TopK(max(evt.top_count(n) if tail else 0, TAIL_POINTS if plots else 0))
        xs: list[np.ndarray] = []
        ys: list[np.ndarray] = []
        positive, last_s, offset = 0, 0.0, 0
        for item in batches:
            lat, sec = item if timed else (item, None)
            if not lat.size:
                continue
            hist_and_moments(lat, hist, moments)
            top_k.add(lat)
            if sec is not None:
                last_s = float(sec[-1])
            for t in counted:
                above[t] += int(np.count_nonzero(lat > t))
            if picks is not None:
                lo, hi = np.searchsorted(picks, [offset, offset + lat.size])
                picked.append(lat[picks[lo:hi] - offset] * scale)
            if plots:
                assert sec is not None
                positive += int(np.count_nonzero(lat > 0))
                if plot_thr is not None:
                    mask = lat > plot_thr
                    if mask.any():
                        xs.append(sec[mask])
                        ys.append(lat[mask] * scale)
            offset += lat.size
        if offset != n:
            raise RuntimeError(f"run {run.run_id}: expected {n} samples, read {offset}")
        return {"hist": hist, "above": above, "picked": picked, "top": top_k,
                "xs": xs, "ys": ys, "positive": positive, "last_s": last_s}

    got = stored.over_sequence(work, with_deadline=timed)
    hist = got["hist"]
    if thresholds:
        # The exact percentiles: one more pass over the buckets that hold them.
        exact = exact_figures(lambda: stored.store.iter_latency(stored.run_id),
                              [q for _, q, _ in PERCENTILES], histogram=hist)
    for t in thresholds:
        stored.cache_figures(t, StoredFigures(exact.count, exact.min_tick, exact.max_tick,
                                              None if t is None else got["above"][t],
                                              exact.quantile_tick))
    if picks is not None:
        assert seed is not None
        stored.noise[seed] = noise.joined(got["picked"])     # time order (blocks)
    top_tick, top_pos = got["top"].ascending()
    if tail:
        stored.tail = TailScan(top_tick * scale, top_pos, got["last_s"])
    if plots:
        stored.plot_data = PlotData(
            hist, top_tick[-TAIL_POINTS:], got["positive"],
            np.concatenate(got["xs"]) if got["xs"] else np.empty(0),
            np.concatenate(got["ys"]) if got["ys"] else np.empty(0), got["last_s"])
