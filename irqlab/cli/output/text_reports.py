"""Text formatters of the analyses: `explain` (the explain object and the files written),
`tail` (the extreme-value fit), `trend` (change points), `show --hist`. Each takes its
model and the View and returns lines already made printable (written as they are)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from irqlab.cli.safe_text import printable
from irqlab.durations import format_latency

if TYPE_CHECKING:
    from irqlab.cli.output.seam import View
    from irqlab.cli.output.screen import Block
    from irqlab.reports.trend import Trend



def explain_text(model: dict[str, Any], view: View) -> list[Block]:
    """The explain object for people (irqlab.explain.report.render_json), then one line
    per file written (model: the explain object with the files' keys)."""
    from irqlab.explain.report import render_json

    keys = [key for key, _what, _figures in _WRITTEN]
    js = {k: v for k, v in model.items() if k not in keys}
    files = {k: model[k] for k in keys if k in model}
    return [render_json(js, show_all=view.show_all, width=view.width),
            *written_lines(files)]


# Each file explain writes: (key, what it is, (figure key, its label) ...), in order.
_WRITTEN = (
    ("dat", "trace.dat v6", (("events", "events"), ("pages", "pages"), ("bytes", "bytes"))),
    ("text", "ftrace text", (("events", "events"), ("bytes", "bytes"))),
    ("perfetto", "Perfetto protobuf trace", (("events", "host events"), ("samples", "samples"),
                                             ("spikes", "spikes"), ("bytes", "bytes"))),
    ("chrome_json", "Chrome trace JSON", (("events", "events"),)),
)


def written_lines(files: dict[str, dict[str, Any]]) -> list[str]:
    """One line per file written (the human output's last lines): 'wrote FILE: what it
    is, N events, ...'."""
    return [f"wrote {files[key]['file']}: {what}, "
            + ", ".join(f"{files[key][fig]} {label}" for fig, label in figures)
            for key, what, figures in _WRITTEN if key in files]


def tail_text(model: dict[str, Any], view: View) -> list[Block]:
    """`irqlab tail`: the fit, its checks and figures (irqlab.reports.tail.tail_lines)."""
    from irqlab.reports.tail import tail_lines

    return [printable(text, False) for text in tail_lines(model)]


def run_histograms_text(model: dict[str, Any], view: View) -> list[Block]:
    """`irqlab show --hist`: each run's histogram, a blank line between runs (model:
    {"type": "run_histograms", "runs": [...]})."""
    from irqlab.reports.termhist import histogram_lines

    out: list[Block] = []
    for i, run in enumerate(model["runs"]):
        out += ([""] if i else []) + histogram_lines(run)
    return out


def trend_text(model: dict[str, Any], view: View) -> list[Block]:
    """`irqlab trend` (model: {"type": "trend_result", "trend": a reports.trend.Trend})."""
    return [printable(text, False) for text in trend_lines(model["trend"])]


def trend_lines(trend: Trend) -> list[str]:
    """One line per run (date, run, value; change points marked), then one per change."""
    label = trend.metric.label
    scale = "log scale" if trend.log_scale else "linear scale: a value is 0"
    order = f"tag {trend.by_tag}, then start time" if trend.by_tag else "start time"
    out = [f"{label} of {len(trend.points)} runs ({' '.join(trend.selectors)}) by {order}; "
           f"change points: E-divisive means, p <= {trend.p_max:g}, "
           f"{trend.permutations} permutations, >= {trend.min_size} runs a segment, {scale}"]
    width = max(len(str(p.run_id)) for p in trend.points)
    tag_width = max(len(p.tag_value or "") for p in trend.points)
    for i, p in enumerate(trend.points):
        mark = "*" if i in trend.starts else " "
        status = "" if p.status == "ok" else f" ({p.status})"
        tag = f"{trend.by_tag}={p.tag_value:<{tag_width}}  " if trend.by_tag else ""
        out.append(f"{mark} {p.started_at:%Y-%m-%d %H:%M:%S}  #{p.run_id:<{width}}  {tag}"
                   f"{format_latency(_ns(p.value_ns)):>10}  {p.name}{status}"
                   + ("   <- change point" if mark == "*" else ""))
    if trend.skipped:
        why = f"no {label} in the summary" + (f" or no tag {trend.by_tag}"
                                               if trend.by_tag else "")
        out.append(f"({why}: run(s) {', '.join(f'#{p.run_id}' for p in trend.skipped)} "
                   f"left out)")
    for c in trend.change_points:
        p = trend.points[c.index]
        ratio = "—" if math.isnan(c.ratio) else f"x{c.ratio:.3g}"
        out.append(f"change at run #{p.run_id} {p.name} ({p.started_at:%Y-%m-%d %H:%M:%S}): "
                   f"{label} {format_latency(_ns(c.mean_before))} -> "
                   f"{format_latency(_ns(c.mean_after))} "
                   f"({ratio}, segment means), p = {c.p_value:.3g}")
    ex = trend.exchangeability
    if ex is not None and ex.step_within_drift:
        out.append(f"drift: no verdict — the largest step is within what the runs' drift "
                   f"explains (lag-1 autocorrelation {ex.lag1:.2f}); measure more runs or "
                   f"steady the host")
    elif ex is not None and ex.drift:
        out.append(f"drift: no verdict — the runs drift (lag-1 autocorrelation "
                   f"{ex.lag1:.2f} > {ex.bound:.2f}): too few blocks of {ex.block_len} "
                   f"runs to test a change; measure more runs or steady the host")
    elif not trend.change_points:
        out.append(f"no change point with p <= {trend.p_max:g} in {len(trend.points)} runs")
    if ex is not None and ex.block_len > 1 and not ex.drift:
        out.append(f"runs autocorrelated (lag-1 {ex.lag1:.2f} > {ex.bound:.2f}): tested "
                   f"by permuting blocks of {ex.block_len} runs")
    return out


def _ns(value: float | None) -> int | None:
    """A figure to the ns, as the JSON has means (format_latency prints ns as given: a
    float, e.g. a segment mean, would show all its digits)."""
    return None if value is None else round(value)
