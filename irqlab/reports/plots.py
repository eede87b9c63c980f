"""Plots of runs with matplotlib (Agg, no display): figures are built on ``Figure``
objects, never pyplot, so nothing global is touched and figures are freed with them.

Every figure draws latencies on log scales (they span ns to ms), marks the threshold with
a red dashed line whose gid is ``threshold`` (tests and readers find it by that), and takes
all run-supplied text literally (``_lit`` escapes ``$``, so a run name never turns into
mathtext).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Iterator

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from irqlab.durations import format_ns
from irqlab.reports.data import RunData, figures
from irqlab.reports.scan import TAIL_POINTS, PlotData, scan_runs
from irqlab.stats.fields import PERCENTILE_FIELDS, TAIL_FIELDS

# Curves with more points than this are thinned (the tail is always kept whole).
MAX_CURVE_POINTS = 6000
HIST_BINS = 120
THRESHOLD_GID = "threshold"
_RC = {"svg.hashsalt": "irqlab", "font.size": 9,
       "axes.grid": True, "grid.alpha": 0.3, "figure.dpi": 100}


@dataclass
class Plot:
    """A finished figure with a file-friendly name and an alt text."""

    name: str
    title: str
    figure: Figure
    _png: bytes | None = field(default=None, repr=False)

    def png(self) -> bytes:
        """PNG bytes, rendered once (the report and --png share them)."""
        if self._png is None:
            buf = io.BytesIO()
            with matplotlib.rc_context(_RC):
                self.figure.savefig(buf, format="png")
            self._png = buf.getvalue()
        return self._png

    def svg(self) -> str:
        buf = io.StringIO()
        with matplotlib.rc_context(_RC):
            # metadata Date None: the same run gives the same file.
            self.figure.savefig(buf, format="svg", metadata={"Date": None})
        return buf.getvalue()


def _lit(text: str) -> str:
    """Run-supplied text shown literally by matplotlib (no mathtext from a ``$``)."""
    return text.replace("$", r"\$")


def _figure() -> tuple[Figure, Axes]:
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(8, 4.2))
        # Fixed margins: constrained layout measured every tick label and took 60 % of
        # the rendering time (0.3 s a plot); these fit the labels irqlab draws.
        fig.subplots_adjust(left=0.1, right=0.97, bottom=0.12, top=0.88)
        return fig, fig.add_subplot()


def _mark_threshold(ax: Axes, threshold_ns: int | None, vertical: bool = True) -> None:
    if threshold_ns is None or threshold_ns <= 0:
        return
    line = ax.axvline if vertical else ax.axhline
    line(threshold_ns, color="tab:red", linestyle="--", linewidth=1.2, gid=THRESHOLD_GID,
         label=f"threshold {format_ns(threshold_ns, 'sig3')}")


def _log(ax: Axes, axis: str) -> None:
    """Log scale with minor ticks at 2 and 5 only: matplotlib's default 8 per decade made
    tick creation the largest cost of drawing a figure."""
    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"{axis}axis").set_minor_locator(
        matplotlib.ticker.LogLocator(base=10, subs=(2.0, 5.0)))
    getattr(ax, f"{axis}axis").set_minor_formatter(matplotlib.ticker.NullFormatter())


def _ns_axis(ax: Axes, axis: str = "x") -> None:
    """Log scale with ns/us/ms tick labels."""
    _log(ax, axis)
    # Axis labels without trailing zeros: "1 us", "10 us" (tables keep "1.00 us").
    fmt = matplotlib.ticker.FuncFormatter(
        lambda v, _pos: format_ns(v, "sig3").replace(".00 ", " ").replace(".0 ", " "))
    getattr(ax, f"{axis}axis").set_major_formatter(fmt)


def _positive(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Values a log axis can show, and how many were dropped (latency <= 0)."""
    keep = values > 0
    return values[keep], int(values.size - keep.sum())


# ---- a big run's samples, read once from the store (reports/scan.py) ---------------

def _plot_data(run: RunData) -> PlotData:
    stored = run.stored
    assert stored is not None
    if stored.plot_data is None:
        scan_runs([run], {None}, plots=True)
    return stored.plot_data


def _stored_histogram(run: RunData) -> tuple[np.ndarray, np.ndarray, int, int] | None:
    """(edges, counts, positive samples, samples <= 0) of the histogram plot from the
    run's log histogram: each bucket counted at its lowest value (1/128 resolution)."""
    data = _plot_data(run)
    hist, scale = data.histogram, 1e9 / run.tick_hz
    idx = np.flatnonzero(hist.counts)
    lows = np.array([hist.bucket_bounds(int(i))[0] for i in idx], dtype=np.int64)
    counts = hist.counts[idx]
    keep = lows > 0
    lows, counts = lows[keep], counts[keep]
    if hist.overflow:
        lows, counts = np.append(lows, hist.max), np.append(counts, hist.overflow)
    if not lows.size:
        return None
    lo = max(int(lows[0]), hist.min if hist.min and hist.min > 0 else 1) * scale
    hi = hist.max * scale
    edges = np.geomspace(lo, hi * 1.0001 if hi > lo else lo * 1.01, HIST_BINS + 1)
    binned, _ = np.histogram(np.clip(lows * scale, lo, hi), bins=edges, weights=counts)
    return edges, binned, data.positive, hist.count - data.positive


def _stored_survival(run: RunData) -> tuple[np.ndarray, np.ndarray]:
    """Fraction >= each log-histogram bucket's low (exact), then the TAIL_POINTS largest
    samples themselves (exact)."""
    data = _plot_data(run)
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


# ---- one run ---------------------------------------------------------------------

def histogram_plot(run: RunData) -> Plot | None:
    """Latency histogram, log x and log y, threshold marked; None without data."""
    fig, ax = _figure()
    with matplotlib.rc_context(_RC):
        note = ""
        if run.stored is not None:
            got = _stored_histogram(run)
            if got is None:
                return None
            edges, counts, positive, dropped = got
            ax.stairs(counts, edges, fill=True, alpha=0.6, label="samples per bin")
            note = (f"{positive} samples, {HIST_BINS} log-spaced bins (from the log "
                    f"histogram)")
            if dropped:
                note += f", {dropped} at or below 0 ns not shown"
        elif run.has_raw:
            vals, dropped = _positive(run.latency_ns_float())
            if vals.size == 0:
                return None
            lo, hi = vals.min(), vals.max()
            edges = np.geomspace(lo, hi * 1.0001 if hi > lo else lo * 1.01, HIST_BINS + 1)
            counts, _ = np.histogram(vals, bins=edges)
            ax.stairs(counts, edges, fill=True, alpha=0.6, label="samples per bin")
            note = f"{vals.size} samples, {HIST_BINS} log-spaced bins"
            if dropped:
                note += f", {dropped} at or below 0 ns not shown"
        elif run.histogram:
            buckets = [(lo, hi, n) for lo, hi, n in run.histogram
                       if hi is not None and lo > 0]
            if not buckets:
                return None
            edges = np.array([b[0] for b in buckets] + [buckets[-1][1]], dtype=float)
            counts = np.array([b[2] for b in buckets], dtype=float)
            # Stored buckets may not be contiguous: draw each as its own bar.
            ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", alpha=0.6,
                   label="samples per stored bucket")
            note = "from the stored histogram (no raw samples)"
        else:
            return None
        _ns_axis(ax, "x")
        _log(ax, "y")
        ax.set_ylim(bottom=0.5)  # a bin of one sample stays visible
        _mark_threshold(ax, run.threshold_ns)
        ax.set_xlabel("latency")
        ax.set_ylabel("count (log)")
        ax.set_title(_lit(f"Latency histogram — {run.label}\n{note}"))
        ax.legend(loc="upper right")
    return Plot(f"run{run.run_id}-histogram", f"Latency histogram of {run.label}", fig)


def _survival(run: RunData) -> tuple[np.ndarray, np.ndarray] | None:
    """(latency ns, fraction of samples >= it), thinned; from raw or stored buckets."""
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


def _survival_from_summary(run: RunData) -> tuple[np.ndarray, np.ndarray] | None:
    """Last resort (imported summaries only): the summary's percentiles as points."""
    s = run.row.summary or {}
    pts = [(s.get(f.key), f.exceedance) for f in PERCENTILE_FIELDS]
    pts = [(x, y) for x, y in pts if x]
    if not pts:
        return None
    return np.array([p[0] for p in pts], float), np.array([p[1] for p in pts])


def exceedance_plot(run: RunData) -> Plot | None:
    """1 - CDF on log-log axes with p99.9 and p99.99 marked and labelled."""
    curve = _survival(run) or _survival_from_summary(run)
    if curve is None:
        return None
    fig, ax = _figure()
    figs = figures(run)
    with matplotlib.rc_context(_RC):
        x, y = curve
        keep = x > 0
        ax.step(x[keep], y[keep], where="post", label="fraction of samples ≥ latency")
        for f, color in zip(TAIL_FIELDS, ("tab:purple", "tab:green")):
            val, level, name = figs.get(f.key), f.exceedance, f.label
            ax.axhline(level, color=color, linestyle=":", linewidth=1)
            if val and val > 0:
                ax.plot([val], [level], "o", color=color, gid=f"marker-{name}")
                # Left of the marker: the tail's marker is often at the right edge.
                ax.annotate(f"{name} = {format_ns(val, 'sig3')}", (val, level),
                            xytext=(-6, 4), textcoords="offset points", color=color,
                            ha="right")
        _mark_threshold(ax, run.threshold_ns)
        _ns_axis(ax, "x")
        _log(ax, "y")
        n = figs.get("samples") or 0
        if n:
            ax.set_ylim(bottom=min(1e-4, 1 / n) / 2, top=1.5)
        ax.set_xlabel("latency")
        ax.set_ylabel("exceedance 1 − CDF (log)")
        src = "exact" if figs["percentiles_from"] == "raw" else "from the summary"
        ax.set_title(_lit(f"Exceedance — {run.label} (percentiles {src})"))
        ax.legend(loc="lower left")
    return Plot(f"run{run.run_id}-exceedance", f"Exceedance (1 − CDF) of {run.label}", fig)


def _window_s(run: RunData) -> float | None:
    if run.window_ns:
        return run.window_ns / 1e9
    starts = [w["start_s"] for w in run.windows]
    return float(np.median(np.diff(starts))) if len(starts) > 1 else None


def over_time_plot(run: RunData) -> Plot | None:
    """Per-window min/mean/max bands and every sample above the threshold."""
    wins = [w for w in run.windows if w.get("samples") and w.get("max_ns") is not None]
    if not wins and not run.has_raw:
        return None
    fig, ax = _figure()
    with matplotlib.rc_context(_RC):
        if wins:
            width = _window_s(run) or 1.0
            starts = np.array([w["start_s"] for w in wins], float)
            end = starts[-1] + width
            if run.stored is not None:
                end = min(end, _plot_data(run).last_s)
            elif run.has_raw:
                end = min(end, float(run.deadline_s[-1]))  # a last, partial window
            x = np.append(starts, max(end, starts[-1]))

            def col(key: str) -> np.ndarray:
                vals = np.array([w.get(key) or np.nan for w in wins], float)
                return np.append(vals, vals[-1])
            lo, mean, hi = col("min_ns"), col("mean_ns"), col("max_ns")
            ax.fill_between(x, np.where(lo > 0, lo, np.nan), hi, step="post", alpha=0.25,
                            label="window min–max", gid="band")
            # Above the points: with many slow samples they would hide the mean.
            ax.step(x, mean, where="post", label="window mean", color="navy", zorder=4)
        thr = run.threshold_ns
        if run.has_raw and thr is not None:
            if run.stored is not None:
                xs, ys = _plot_data(run).above_s, _plot_data(run).above_ns
            else:
                above = run.latency_tick > run.threshold_tick(thr)
                xs, ys = run.deadline_s[above], run.latency_ns_float()[above]
            count = int(xs.size)
            if count:
                # Pixel markers past 50k points: a dot each would take seconds to draw.
                style = dict(marker="." if count <= 50_000 else ",", markersize=3)
                ax.plot(xs, ys, linestyle="none", color="tab:red", rasterized=True,
                        gid="above-threshold", label=f"{count} samples above threshold",
                        **style)
        _mark_threshold(ax, thr, vertical=False)
        _ns_axis(ax, "y")
        ax.set_xlabel("time since the first deadline (s)")
        ax.set_ylabel("latency (log)")
        ax.set_title(_lit(f"Latency over time — {run.label}"))
        ax.legend(loc="upper right", fontsize=8)
    return Plot(f"run{run.run_id}-over-time", f"Latency over time of {run.label}", fig)


def run_plots(run: RunData) -> list[Plot]:
    """Every plot a single run has data for."""
    made = (histogram_plot(run), exceedance_plot(run), over_time_plot(run))
    return [p for p in made if p is not None]


# ---- several runs ----------------------------------------------------------------

def overlay_plot(runs: list[RunData]) -> Plot | None:
    """Overlaid CDFs (left, linear probability) and exceedance curves (right, log)."""
    curves = [(r, _survival(r) or _survival_from_summary(r)) for r in runs]
    curves = [(r, c) for r, c in curves if c is not None]
    if not curves:
        return None
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(10, 4.4))
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.12, top=0.86, wspace=0.25)
        cdf_ax, exc_ax = fig.subplots(1, 2)
        for run, (x, y) in curves:
            keep = x > 0
            label = _lit(run.label)
            line = exc_ax.step(x[keep], y[keep], where="post", label=label)[0]
            cdf_ax.step(x[keep], 1 - y[keep], where="post", color=line.get_color(),
                        label=label)
        thresholds = {r.threshold_ns for r, _ in curves if r.threshold_ns}
        for ax in (cdf_ax, exc_ax):
            for thr in sorted(thresholds):
                _mark_threshold(ax, thr)
            _ns_axis(ax, "x")
            ax.set_xlabel("latency")
        for level, name in ((f.exceedance, f.label) for f in TAIL_FIELDS):
            exc_ax.axhline(level, color="grey", linestyle=":", linewidth=1)
            exc_ax.annotate(name, (1, level), xycoords=("axes fraction", "data"),
                            xytext=(-3, 2), textcoords="offset points", color="grey",
                            ha="right")
        _log(exc_ax, "y")
        cdf_ax.set_ylabel("CDF (fraction of samples < latency)")
        exc_ax.set_ylabel("exceedance 1 − CDF (log)")
        cdf_ax.set_title("CDF")
        exc_ax.set_title("Exceedance")
        exc_ax.legend(loc="upper right", fontsize=8)
        fig.suptitle(f"{len(curves)} runs overlaid")
    return Plot("overlay-cdf", "Overlaid CDF and exceedance curves", fig)


def threshold_artists(fig: Figure) -> Iterator[Any]:
    """The threshold lines of a figure (used by tests and by nothing else)."""
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_gid() == THRESHOLD_GID:
                yield line
