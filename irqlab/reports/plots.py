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
from irqlab.reports.plotdata import (fine_histogram, heat_map, plot_data, tail_curve,
                                     window_steps)
from irqlab.stats.fields import TAIL_FIELDS
from irqlab.humanize import format_count

THRESHOLD_GID = "threshold"
_RC = {"svg.hashsalt": "irqlab", "font.size": 9, "axes.titley": 1.0,
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


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_of_ten(value: float, _pos: Any = None) -> str:
    """A log axis's label as plain text, 10⁻⁴: matplotlib's default wrote $10^{-4}$
    and parsed it as mathtext, a third of drawing an exceedance plot."""
    if value <= 0:
        return ""
    exp = round(float(np.log10(value)))
    return f"10{str(exp).translate(_SUPERSCRIPT)}" if exp not in (0, 1) else f"{10 ** exp}"


def _log(ax: Axes, axis: str, minor: bool = False) -> None:
    """Log scale; with ``minor`` (latency axes, read against values) minor ticks at 2
    and 5 only, else none (counts and probabilities spanning 5-10 decades): matplotlib's
    default 8 per decade made tick creation the largest cost of drawing a figure, and
    the minor ticks of the probability axes still took a quarter of it."""
    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"{axis}axis").set_major_formatter(
        matplotlib.ticker.FuncFormatter(_power_of_ten))
    getattr(ax, f"{axis}axis").set_minor_locator(
        matplotlib.ticker.LogLocator(base=10, subs=(2.0, 5.0)) if minor
        else matplotlib.ticker.NullLocator())
    getattr(ax, f"{axis}axis").set_minor_formatter(matplotlib.ticker.NullFormatter())


def _merged_bins(counts: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs of equal neighbouring counts as one bin each: the same stairs with far fewer
    vertices (a run's tail is thousands of empty 1 us bins; matplotlib walked every
    vertex of the patch to find the axes' limits)."""
    starts = np.concatenate([[0], np.flatnonzero(np.diff(counts)) + 1])
    return counts[starts], np.append(edges[starts], edges[-1])


def _ns_axis(ax: Axes, axis: str = "x") -> None:
    """Log scale with ns/us/ms tick labels."""
    _log(ax, axis, minor=True)
    # Axis labels without trailing zeros: "1 us", "10 us" (tables keep "1.00 us").
    fmt = matplotlib.ticker.FuncFormatter(
        lambda v, _pos: format_ns(v, "sig3").replace(".00 ", " ").replace(".0 ", " "))
    getattr(ax, f"{axis}axis").set_major_formatter(fmt)


def _positive(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Values a log axis can show, and how many were dropped (latency <= 0)."""
    keep = values > 0
    return values[keep], int(values.size - keep.sum())


# ---- one run ---------------------------------------------------------------------

def histogram_plot(run: RunData) -> Plot | None:
    """Latency histogram in fine uniform bins (plotdata.fine_histogram: 1 us where the
    run's span allows), log y so one sample in the tail stays visible, threshold
    marked; None without data."""
    hist = fine_histogram(run)
    if hist is None:
        return None
    fig, ax = _figure()
    with matplotlib.rc_context(_RC):
        ax.stairs(*_merged_bins(hist.counts, hist.edges_ns), fill=True, alpha=0.6,
                  label="samples per bin")
        note = (f"{format_count(int(hist.counts.sum()))} samples in "
                f"{format_ns(hist.bin_ns, 'exact')} bins (from the {hist.source})")
        if hist.dropped:
            note += f", {format_count(hist.dropped)} at or below 0 ns not shown"
        _ns_axis(ax, "x")
        _log(ax, "y")
        ax.set_ylim(bottom=0.5)  # a bin of one sample stays visible
        _mark_threshold(ax, run.threshold_ns)
        ax.set_xlabel("latency")
        ax.set_ylabel("count (log)")
        ax.set_title(_lit(f"Latency histogram — {run.label}\n{note}"))
        ax.legend(loc="upper right")
    return Plot(f"run{run.run_id}-histogram", f"Latency histogram of {run.label}", fig)


def exceedance_plot(run: RunData) -> Plot | None:
    """1 - CDF on log-log axes with p99.9 and p99.99 marked and labelled."""
    curve = tail_curve(run)
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


def over_time_plot(run: RunData) -> Plot | None:
    """Per-window min/mean/max bands and every sample above the threshold."""
    wins = [w for w in run.windows if w.get("samples") and w.get("max_ns") is not None]
    if not wins and not run.has_raw:
        return None
    fig, ax = _figure()
    with matplotlib.rc_context(_RC):
        steps = window_steps(run)
        if steps is not None:
            x, lo, mean, hi = (steps.x_s, steps.series["min_ns"], steps.series["mean_ns"],
                               steps.series["max_ns"])
            ax.fill_between(x, np.where(lo > 0, lo, np.nan), hi, step="post", alpha=0.25,
                            label="window min–max", gid="band")
            # Above the points: with many slow samples they would hide the mean.
            ax.step(x, mean, where="post", label="window mean", color="navy", zorder=4)
        thr = run.threshold_ns
        if run.has_raw and thr is not None:
            if run.stored is not None:
                xs, ys = plot_data(run).above_s, plot_data(run).above_ns
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
        if ax.get_legend_handles_labels()[0]:      # no threshold and nothing above it
            ax.legend(loc="upper right", fontsize=8)
    return Plot(f"run{run.run_id}-over-time", f"Latency over time of {run.label}", fig)


def heat_map_plot(run: RunData) -> Plot | None:
    """Samples per window and latency band (plotdata.heat_map): time across, log latency
    up, colour by log count, as OSADL's long-term plots and Grafana heat maps show a
    run; None when the run's samples are not in memory."""
    heat = heat_map(run)
    if heat is None:
        return None
    fig, ax = _figure()
    with matplotlib.rc_context(_RC):
        counts = np.where(heat.counts > 0, heat.counts, np.nan).T
        mesh = ax.pcolormesh(heat.time_edges_s, heat.latency_edges_ns, counts,
                             norm=matplotlib.colors.LogNorm(), cmap="viridis",
                             gid="heat-map")
        fig.colorbar(mesh, ax=ax, label="samples", pad=0.01)
        _mark_threshold(ax, run.threshold_ns, vertical=False)
        _ns_axis(ax, "y")
        ax.set_xlim(heat.time_edges_s[0], heat.time_edges_s[-1])
        ax.set_xlabel("time since the first deadline (s)")
        ax.set_ylabel("latency (log)")
        ax.set_title(_lit(f"Latency heat map — {run.label}"))
    return Plot(f"run{run.run_id}-heat-map", f"Latency heat map of {run.label}", fig)


def run_plots(run: RunData) -> list[Plot]:
    """Every plot a single run has data for."""
    made = (histogram_plot(run), exceedance_plot(run), over_time_plot(run),
            heat_map_plot(run))
    return [p for p in made if p is not None]


# ---- several runs ----------------------------------------------------------------

def overlay_plot(runs: list[RunData]) -> Plot | None:
    """Overlaid CDFs (left, linear probability) and exceedance curves (right, log)."""
    curves = [(r, tail_curve(r)) for r in runs]
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
