"""The dashboard's charts: irqlab.reports.plotdata's numbers (the HTML report draws the
same) as the JSON that static/irqlab.js hands to uPlot, with latencies in one unit per
chart (named in the axis label: the browser prints no unit of its own). The heat map is
the report's own figure (reports/plots.heat_map_plot), as a PNG."""

from __future__ import annotations

import base64
import math
from typing import Any

from irqlab.durations import format_ns
from irqlab.reports.data import RunData
from irqlab.reports.plotdata import (curve_json, fine_histogram, per_cpu_histograms,
                                     tail_curve, window_steps)

# (unit, ns per unit), coarsest first: a chart's latencies in the largest unit its
# biggest value reaches.
_UNITS = (("ms", 1e6), ("µs", 1e3), ("ns", 1.0))


def latency_unit(max_ns: float) -> tuple[str, float]:
    """The unit of a chart whose largest latency is ``max_ns``: 'µs' for 5 000 ns."""
    for unit, scale in _UNITS:
        if max_ns >= scale:
            return unit, scale
    return "ns", 1.0


def _scaled(values: Any, scale: float) -> list[float | None]:
    """Latencies in the chart's unit; NaN (no figure) as null."""
    return [None if v is None or (isinstance(v, float) and math.isnan(v))
            else float(v) / scale for v in values]


def windows_chart(run: RunData) -> dict[str, Any] | None:
    """Window min/mean/max as steps over the run's real span (plotdata.window_steps)."""
    steps = window_steps(run)
    if steps is None:
        return None
    top = max((v for v in steps.series["max_ns"] if not math.isnan(v)), default=1.0)
    unit, scale = latency_unit(top)
    return {"kind": "windows", "unit": unit, "x": [float(x) for x in steps.x_s],
            "x_max": float(steps.x_s[-1]),
            "series": {k: _scaled(v, scale) for k, v in steps.series.items()}}


def distribution_chart(run: RunData) -> dict[str, Any] | None:
    """The fine histogram (plotdata.fine_histogram), and each CPU's when the run has
    several and its samples are in memory; log y."""
    whole = fine_histogram(run)
    if whole is None:
        return None
    per_cpu = per_cpu_histograms(run)
    unit, scale = latency_unit(float(whole.edges_ns[-1]))
    series = {"all CPUs": whole} | {f"CPU {cpu}": h for cpu, h in per_cpu.items()}
    # The bin as a setting is written ('1 us', '20 us'), the form durations take.
    return {"kind": "distribution", "unit": unit, "bin_ns": whole.bin_ns,
            "bin_text": format_ns(whole.bin_ns, "exact"), "source": whole.source,
            "series": {label: {"x": _scaled(h.to_json()["low_ns"], scale),
                               "count": h.to_json()["count"]}
                       for label, h in series.items()}}


def tail_chart(runs: list[RunData]) -> dict[str, Any] | None:
    """Each run's fraction of samples at or above each latency (plotdata.tail_curve:
    exact from raw samples, else from the stored histogram), log-log."""
    curves = {r.label: curve_json(tail_curve(r)) for r in runs}
    curves = {k: c for k, c in curves.items() if c and c["x_ns"]}
    if not curves:
        return None
    unit, scale = latency_unit(max(max(c["x_ns"]) for c in curves.values()))
    return {"kind": "tail", "unit": unit,
            "series": {k: {"x": _scaled(c["x_ns"], scale), "y": c["y"]}
                       for k, c in curves.items()}}


def heat_map_image(run: RunData) -> str | None:
    """The report's heat map figure as a data: URL (None when the run has none)."""
    from irqlab.reports.plots import heat_map_plot

    plot = heat_map_plot(run)
    if plot is None:
        return None
    return "data:image/png;base64," + base64.b64encode(plot.png()).decode("ascii")


def run_charts(run: RunData) -> dict[str, Any]:
    """Every chart of the run page that the run has data for."""
    charts = {"windows": windows_chart(run), "distribution": distribution_chart(run),
              "tail": tail_chart([run]), "heat_map": heat_map_image(run)}
    return {k: v for k, v in charts.items() if v is not None}
