"""Text formatters of runs: a run's summary, the run list, a run's detail, a suite's
table, benchmark figures, an import, a check, a report. Each takes its model and the
View and returns blocks (irqlab.cli.output.screen); the screen writes them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from irqlab.cli.output.lines import (EMULATED_BANNER, SUITE_COLUMNS, _value_text, above_cell,
                                     detail_wrapped, import_lines, imported_summary_lines,
                                     osnoise_lines, part_lines, per_cpu_lines,
                                     start_cell, suite_rows, summary_lines)
from irqlab.cli.output.screen import Block, Data, Line, PlainTable, Rich
from irqlab.cli.safe_text import printable
from irqlab.durations import format_latency, format_ns
from irqlab.humanize import format_when
from irqlab.stats.fields import LIST_TABLE, WINDOW_TABLE

if TYPE_CHECKING:
    from irqlab.cli.output.seam import View


def summary_text(summary: dict[str, Any], view: View) -> list[Block]:
    """A run's summary: its table, per-CPU and split lines, self-check, message."""
    # A noise run has no period: its samples are the gaps at or above the threshold.
    timing = (f"gaps >= {format_ns(summary['noise']['threshold_ns'], 'exact')}"
              if summary.get("noise") else f"period {format_ns(summary.get('period_ns'))}")
    title = (f"run {summary['run_id']} {summary['name']} — {summary['status']} "
             f"({summary.get('accel')}, {timing})")
    if summary.get("source") not in (None, "irqlab"):
        title = (f"run {summary['run_id']} {summary['name']} — imported "
                 f"({summary['source']}, {summary.get('kind', 'latency')})")
    table = PlainTable(title=Data(title), show_header=False)  # names: data, not markup
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for label, text in summary_lines(summary):
        table.add_row(label, text)
    out: list[Block] = [table]
    for line in per_cpu_lines(summary) + part_lines(summary) + osnoise_lines(summary) \
            + imported_summary_lines(summary):
        out += [Line(part) for part in detail_wrapped(line)]
    check = summary.get("self_check")
    if check:
        out.append(Line(check["text"], "green" if check["passed"] else "bold red"))
    if summary.get("message"):
        out.append(Line(str(summary["message"]),
                        "red" if summary["status"] == "failed" else "yellow"))
    if summary.get("emulated"):
        out.append(Line(EMULATED_BANNER.format(accel=summary["accel"]), "yellow",
                        markup=True))
    return out


def run_list_text(model: dict[str, Any], view: View) -> list[Block]:
    """`irqlab list`: a row per run (model: {"type": "run_list", "rows": [...]})."""
    table = PlainTable()
    for col in ("id", "name", "started", "target", "accel", "status"):
        table.add_column(col)
    for c in LIST_TABLE:
        table.add_column(c.heading)
    for r in model["rows"]:
        # A run of a series (irqlab run --repeat): its series id after its name.
        name = r["name"] + (f" [series {r['series']}]" if r.get("series") else "")
        table.add_row(str(r["run_id"]), Data(name), format_when(r["started_at"]),
                      Data(r["target"]), Data(r["accel"] or "—"), Data(r["status"]),
                      *(_value_text(r[c.key], c.key) for c in LIST_TABLE))
    return [table]


def run_detail_text(model: dict[str, Any], view: View) -> list[Block]:
    """`irqlab show`: the detail lines, the windows' table, the summary (model:
    {"type": "run_detail", "summary", "detail", "windows"})."""
    out: list[Block] = []
    for key, val in model["detail"].items():
        # A block's lines (configuration, host facts) wrap within OUTPUT_WIDTH: a
        # kernel command line or a QEMU command is hundreds of characters (issue
        # 32); --json keeps each value whole.
        for line in f"{key}: {val}".split("\n"):
            out += [Line(part) for part in detail_wrapped(line)]
    windows = model["windows"]
    if windows:
        table = PlainTable(title="windows")
        for col in ["#", "start"] + [c.heading for c in WINDOW_TABLE]:
            table.add_column(col, justify="right")
        for w in windows:
            table.add_row(str(w["index"]), start_cell(w),
                          *(above_cell(w) if c.key == "above_threshold"
                            else _value_text(w[c.key], c.key) for c in WINDOW_TABLE))
        out.append(table)
    return out + summary_text(model["summary"], view)


def suite_text(suite: dict[str, Any], view: View) -> list[Block]:
    """The side-by-side comparison: one row per target (irqlab.suite)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"suite {suite['suite']} — {suite['status']}"))
    for head in SUITE_COLUMNS:
        table.add_column(head[0], justify="left" if head[1] in ("target", "accel",
                                                                 "status") else "right")
    for row in suite_rows(suite):
        table.add_row(*(Text(cell) for cell in row))
    out: list[Block] = [Rich(table)]
    # Once per target and accel: a repeated suite (--repeat) has a row per run.
    for target, accel in dict.fromkeys((r["target"], r["accel"]) for r in suite["rows"]
                                       if r.get("emulated")):
        out.append(Line(f"{target}: " + EMULATED_BANNER.format(accel=accel), "yellow"))
    return out


def bench_text(model: dict[str, Any], view: View) -> list[Block]:
    """`irqlab bench`: a line per figure (model: {"type": "bench_figures", "figures"})."""
    out: list[Block] = []
    for f in model["figures"]:
        if "text" in f:                 # a figure that says itself (bench noise)
            out.append(Line(f["text"]))
            continue
        extra = ""
        if "baseline" in f:
            extra = f" (baseline {f['baseline']:.4g} {f['unit']}, ratio {f['ratio']:.2f})"
        if "ours" in f and "cyclictest" in f:   # irqlab bench cyclictest, one round
            o, c = f["ours"], f["cyclictest"]
            extra = (f" — ours p50 {format_latency(o['p50_ns'])} "
                     f"p99 {format_latency(o['p99_ns'])} "
                     f"max {format_latency(o['max_ns'])} (lost {o['lost']}); cyclictest "
                     f"p50 {format_latency(c['p50_ns'])} p99 {format_latency(c['p99_ns'])} "
                     f"max {format_latency(c['max_ns'])}")
        elif "goal" in f and "met" in f:
            extra = f" (goal <= {f['goal']}: {'met' if f['met'] else 'NOT met'})"
        out.append(Line(f"{f['name']}: {f['value']:.4g} {f['unit']}{extra}"))
    return out


def import_text(info: dict[str, Any], view: View) -> list[Block]:
    """What `irqlab import` says about one file."""
    return [Line(line) for line in import_lines(info)]


def check_text(model: dict[str, Any], view: View) -> list[Block]:
    """A run's check: its lines, PASS green and FAIL/ERROR red (model: {"type":
    "check_result", "result": its JSON line, "lines"})."""
    out: list[Block] = []
    for line in model["lines"]:
        style = ("green" if line.lstrip().startswith("PASS") else
                 "red" if line.lstrip().startswith(("FAIL", "ERROR")) else "")
        out.append(Line(line, style))
    return out


def report_text(info: dict[str, Any], view: View) -> list[Block]:
    """What `irqlab report` wrote."""
    out: list[Block] = []
    if info.get("path"):
        out.append(Line(f"wrote {info['path']} ({info['bytes'] / 1e6:.2f} MB, "
                        f"{info['plots']} plots, {len(info['runs'])} runs) in "
                        f"{info['seconds']:.2f} s", ""))
    out += [Line(f"wrote {path}", "") for path in info.get("plot_files", [])]
    return out


def series_text(model: dict[str, Any], view: View) -> list[Block]:
    """A --repeat series' line, against the suite's other series (model: {"type":
    "series_result", "series": an irqlab.suite series, "others": the others})."""
    return [printable(model["series"].line(model["others"]), False)]


def auto_text(model: dict[str, Any], view: View) -> list[Block]:
    """--repeat auto's verdict (model: {"type": "auto_result", "auto": suite.auto});
    JSON lines have it in the suite line."""
    from irqlab.reports.noise import auto_text as verdict_text

    return [printable(verdict_text(model["auto"]), False)]
