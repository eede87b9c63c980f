"""The data behind every plot: the static report (reports/plots.py draws it with
matplotlib) and the dashboard (irqlab/serve pages hand it to the browser as JSON) read
the same functions, so a run's histogram, tail and windows cannot disagree between them.

Numbers only: no figure, no HTML, no unit text. Latencies in ns, times in s since the
run's first deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from irqlab.reports.data import RunData, figures
from irqlab.reports.scan import TAIL_POINTS, PlotData, scan_runs
from irqlab.stats.fields import PERCENTILE_FIELDS

# Curves with more points than this are thinned (the tail is always kept whole).
MAX_CURVE_POINTS = 6000
# Fine histogram bins: 1 us as OSADL's latency plots and cyclictest -h draw them (up to
# 100 ms of span: a tail's empty bins cost nothing, only non-empty ones are kept), wider
# (the next of 1-2-5) past MAX_BINS of them, finer (down to 1 ns) under MIN_BINS.
FINE_BIN_NS = 1_000
MAX_BINS = 100_000
MIN_BINS = 40
# Heat map: latency rows, log-spaced between the run's min and max.
HEAT_LATENCY_BINS = 48


def plot_data(run: RunData) -> PlotData:
    """A stored (big) run's plot data, read from the store once (reports/scan.py)."""
    stored = run.stored
    assert stored is not None
    if stored.plot_data is None:
        scan_runs([run], {None}, plots=True)
    return stored.plot_data


# ---- the distribution: fine bins ----------------------------------------------------

@dataclass
class Histogram:
    """Counts in uniform bins [edges_ns[i], edges_ns[i + 1]) of ``bin_ns`` each."""

    edges_ns: np.ndarray            # float64, len(counts) + 1
    counts: np.ndarray              # int64
    bin_ns: int
    dropped: int                    # samples at or below 0 ns (no bin on a log axis)
    source: str                     # "raw samples", "log histogram", "stored buckets"

    def to_json(self) -> dict[str, Any]:
        """Non-empty bins only (a run's tail is mostly empty bins)."""
        keep = np.flatnonzero(self.counts)
        return {"bin_ns": self.bin_ns, "source": self.source, "dropped": self.dropped,
                "low_ns": [int(self.edges_ns[i]) for i in keep],
                "count": [int(self.counts[i]) for i in keep]}


def bin_width_ns(min_ns: float, max_ns: float) -> int:
    """The 1-2-5 bin width (ns) for a run spanning [min_ns, max_ns]: 1 us unless the span
    needs more than MAX_BINS of them (then wider) or fewer than MIN_BINS (then finer)."""
    span = max(float(max_ns) - max(float(min_ns), 0.0), 1.0)
    want_min = span / MAX_BINS
    want = max(want_min, min(float(FINE_BIN_NS), span / MIN_BINS))
    decade = 1
    while True:
        for step in (1, 2, 5):
            if step * decade >= want:
                return step * decade
        decade *= 10


def _weighted_values(run: RunData) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(values ns, counts, source) of every sample: each raw sample, or each stored
    bucket at its lowest value (irqlab's log histogram: 1/128 resolution)."""
    if run.stored is not None:
        data = plot_data(run)
        hist, scale = data.histogram, 1e9 / run.tick_hz
        idx = np.flatnonzero(hist.counts)
        lows = np.array([hist.bucket_bounds(int(i))[0] for i in idx], dtype=np.float64)
        counts = hist.counts[idx].astype(np.int64)
        if hist.overflow:
            lows, counts = np.append(lows, hist.max), np.append(counts, hist.overflow)
        if hist.underflow:
            lows, counts = np.append(lows, 0.0), np.append(counts, hist.underflow)
        return lows * scale, counts, "log histogram"
    if run.has_raw:
        vals = run.latency_ns_float()
        return vals, np.ones(vals.size, np.int64), "raw samples"
    if run.histogram:
        buckets = [(lo, n) for lo, hi, n in run.histogram if hi is not None]
        if not buckets:
            return None
        return (np.array([b[0] for b in buckets], np.float64),
                np.array([b[1] for b in buckets], np.int64), "stored buckets")
    return None


def fine_histogram(run: RunData) -> Histogram | None:
    """The run's distribution in fine uniform bins (bin_width_ns), from its raw samples,
    or its stored log histogram, or an import's buckets; None without any. The bins
    start at the run's minimum as figures() gives it (the same for a run in memory and
    in the store)."""
    got = _weighted_values(run)
    if got is None:
        return None
    values, counts, source = got
    keep = values > 0
    dropped = int(counts[~keep].sum())
    values, counts = values[keep], counts[keep]
    if not values.size:
        return None
    figs = figures(run)
    lo = float(figs.get("min_ns") or values.min())
    hi = float(figs.get("max_ns") or values.max())
    lo, hi = min(lo, float(values.min())), max(hi, float(values.max()))
    width = bin_width_ns(lo, hi)
    start = np.floor(max(lo, 1.0) / width) * width
    n_bins = int(np.floor((hi - start) / width)) + 1
    edges = start + width * np.arange(n_bins + 1, dtype=np.float64)
    binned, _ = np.histogram(np.clip(values, start, edges[-1] - 1e-6), bins=edges,
                             weights=counts)
    return Histogram(edges, binned.astype(np.int64), width, dropped, source)


def per_cpu_histograms(run: RunData) -> dict[int, Histogram]:
    """Each CPU's fine histogram, for runs whose samples are in memory (a stored run's
    per-CPU samples would be a second pass over the store per CPU)."""
    from irqlab.reports.percpu import cpu_runs

    out = {}
    for cpu, sub in cpu_runs(run):
        if sub.stored is None and sub.has_raw:
            hist = fine_histogram(sub)
            if hist is not None:
                out[cpu] = hist
    return out if len(out) > 1 else {}


# ---- the tail: fraction of samples at or above each latency --------------------------

def _stored_survival(run: RunData) -> tuple[np.ndarray, np.ndarray]:
    """Fraction >= each log-histogram bucket's low (exact), then the TAIL_POINTS largest
    samples themselves (exact)."""
    data = plot_data(run)
    hist, top, scale = data.histogram, data.top_tick, 1e9 / run.tick_hz
    n = hist.count
    below = hist.underflow + np.concatenate([[0], np.cumsum(hist.counts)[:-1]])
    nonzero = np.flatnonzero(hist.counts)
    lows = np.array([hist.bucket_bounds(int(b))[0] for b in nonzero], dtype=np.int64)
    head = lows < (top[0] if top.size else np.iinfo(np.int64).max)
    xs = np.concatenate([lows[head], top]) * scale
    ys = np.concatenate([(n - below[nonzero][head]) / n,
                         (top.size - np.arange(top.size)) / n])
    return xs, ys


def survival(run: RunData) -> tuple[np.ndarray, np.ndarray] | None:
    """(latency ns, fraction of samples >= it), thinned; exact from the raw samples, or
    from the stored log histogram with its largest samples exact, or from an import's
    buckets."""
    if run.stored is not None:
        return _stored_survival(run)
    if run.has_raw:
        srt = run.sorted_tick() * (1e9 / run.tick_hz)
        n = srt.size
        # Fraction >= x_(i) is (n - i) / n for 0-based i: the max stays visible at 1/n.
        if n <= MAX_CURVE_POINTS:
            idx = np.arange(n)
        else:
            head = n - np.geomspace(TAIL_POINTS, n, MAX_CURVE_POINTS - TAIL_POINTS)
            idx = np.unique(np.concatenate([np.arange(n - TAIL_POINTS, n),
                                            np.clip(head.astype(np.int64), 0, n - 1)]))
        return srt[idx], (n - idx) / n
    if run.histogram:
        total = sum(b[2] for b in run.histogram)
        if not total:
            return None
        lows = np.array([b[0] for b in run.histogram], dtype=float)
        above = total - np.cumsum([0] + [b[2] for b in run.histogram[:-1]])
        return lows, above / total
    return None


def survival_from_summary(run: RunData) -> tuple[np.ndarray, np.ndarray] | None:
    """Last resort (imported summaries only): the summary's percentiles as points."""
    s = run.row.summary or {}
    pts = [(s.get(f.key), f.exceedance) for f in PERCENTILE_FIELDS]
    pts = [(x, y) for x, y in pts if x]
    if not pts:
        return None
    return np.array([p[0] for p in pts], float), np.array([p[1] for p in pts])


def tail_curve(run: RunData) -> tuple[np.ndarray, np.ndarray] | None:
    """The best tail curve the run has: survival(), else its summary's percentiles."""
    return survival(run) or survival_from_summary(run)


def curve_json(curve: tuple[np.ndarray, np.ndarray] | None) -> dict[str, list] | None:
    """A curve as JSON lists (latencies rounded to whole ns), positive latencies only."""
    if curve is None:
        return None
    x, y = curve
    keep = x > 0
    return {"x_ns": [round(float(v)) for v in x[keep]], "y": [float(v) for v in y[keep]]}


# ---- windows over time -------------------------------------------------------------

def window_seconds(run: RunData) -> float | None:
    """A window's length in s: the run's setting, else the median step between starts."""
    if run.window_ns:
        return run.window_ns / 1e9
    starts = [w["start_s"] for w in run.windows]
    return float(np.median(np.diff(starts))) if len(starts) > 1 else None


@dataclass
class WindowSteps:
    """Per-window figures as steps over the run's real span: ``x_s`` holds each window's
    start and then the last window's end; each series repeats its last value there."""

    x_s: np.ndarray
    series: dict[str, np.ndarray]       # min_ns, mean_ns, max_ns (NaN: no figure)


def window_steps(run: RunData, windows: list[dict[str, Any]] | None = None
                 ) -> WindowSteps | None:
    """The run's windows (or ``windows``) as steps from the first start to the end of
    the last window (cut at the last deadline when it is known: a last, partial
    window)."""
    wins = [w for w in (run.windows if windows is None else windows)
            if w.get("samples") and w.get("max_ns") is not None]
    if not wins:
        return None
    width = window_seconds(run) or 1.0
    starts = np.array([w["start_s"] for w in wins], float)
    end = starts[-1] + width
    if run.stored is not None:
        end = min(end, plot_data(run).last_s)
    elif run.has_raw and run.deadline_s is not None and run.deadline_s.size:
        end = min(end, float(run.deadline_s[-1]))
    x = np.append(starts, max(end, starts[-1]))

    def col(key: str) -> np.ndarray:
        vals = np.array([np.nan if w.get(key) is None else w[key] for w in wins], float)
        return np.append(vals, vals[-1])
    return WindowSteps(x, {k: col(k) for k in ("min_ns", "mean_ns", "max_ns")})


@dataclass
class HeatMap:
    """Sample counts per (time bin, latency bin): the windows as columns, log-spaced
    latency rows (as OSADL's long-term plots and Grafana's heat maps draw them)."""

    time_edges_s: np.ndarray
    latency_edges_ns: np.ndarray
    counts: np.ndarray              # shape (time bins, latency bins)

    def to_json(self) -> dict[str, Any]:
        return {"time_edges_s": [round(float(t), 6) for t in self.time_edges_s],
                "latency_edges_ns": [round(float(v)) for v in self.latency_edges_ns],
                "counts": self.counts.astype(int).tolist()}


def heat_map(run: RunData) -> HeatMap | None:
    """The heat map of a run whose samples and deadlines are in memory, one column per
    window (None otherwise: a stored run's samples would be read once more)."""
    if run.stored is not None or not run.has_raw or run.deadline_s is None:
        return None
    vals, times = run.latency_ns_float(), run.deadline_s
    keep = vals > 0
    vals, times = vals[keep], times[keep]
    if not vals.size:
        return None
    width = window_seconds(run) or max(float(times[-1]) / 20, 1e-3)
    n_time = max(1, int(np.ceil(float(times.max()) / width + 1e-9)))
    time_edges = width * np.arange(n_time + 1, dtype=np.float64)
    if time_edges[-1] <= times.max():
        time_edges = np.append(time_edges, time_edges[-1] + width)
    lo, hi = float(vals.min()), float(vals.max())
    lat_edges = np.geomspace(lo, hi * 1.0001 if hi > lo else lo * 1.01,
                             HEAT_LATENCY_BINS + 1)
    counts, _, _ = np.histogram2d(times, vals, bins=[time_edges, lat_edges])
    return HeatMap(time_edges, lat_edges, counts.astype(np.int64))
