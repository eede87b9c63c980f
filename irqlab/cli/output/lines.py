"""Line formatters the text exporters share: summaries, per-CPU and split lines, window
cells, imports, wrapping within OUTPUT_WIDTH. Each builds lines and returns them."""

from __future__ import annotations

from typing import Any

from irqlab.cli.output.seam import OUTPUT_WIDTH
from irqlab.durations import format_latency, format_ns
from irqlab.stats.fields import (IMPORTED_ROWS, NOTE_FIELDS, PERCENTILES_EXACT,
                                 PERCENTILES_HISTOGRAM, PERCENTILES_SOURCE, SUITE_TABLE,
                                 SUMMARY_TABLE, field, percentiles_from)

# Within 120 columns (issue 46: it was 138).
EMULATED_BANNER = ("EMULATED ({accel}): these latencies show the pipeline works, not what "
                   "KVM, Xen or bare metal would give.")


def summary_lines(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) pairs of a summary for human display (rows: fields.SUMMARY_TABLE)."""
    out = []
    for c in SUMMARY_TABLE:
        key, val = c.key, summary.get(c.key)
        if c.field.unit == "ns":
            text = format_latency(val)
        elif key == "above_threshold" and val is None:
            text = above_bound_text(summary)
        elif key == "invalid" and val:
            # issue 27: an entry before its deadline is a broken timer, never a latency.
            text = (f"{val} (ISR entered before its deadline: not latencies, left out "
                    f"of every figure here)")
        elif key == "above_threshold" and summary.get("samples"):
            text = (f"{val} ({100.0 * val / summary['samples']:.4g}%) > "
                    f"{format_latency(summary['threshold_ns'])}")
        else:
            text = "—" if val is None else str(val)
        out.append((c.heading, text))
    if summary.get("source") in (None, "irqlab") and percentiles_from(summary):
        out.append(("percentiles", PERCENTILES_TEXT.get(percentiles_from(summary) or "",
                                                        str(percentiles_from(summary)))))
    return out


# How `irqlab run` / `show` name a summary's `percentiles_from`.
PERCENTILES_TEXT = {
    PERCENTILES_EXACT: "exact (nearest rank over the stored samples)",
    # A failed store write, or a run stored before 2026-11-26: compare/check/report
    # give the exact values of whatever samples are stored.
    PERCENTILES_HISTOGRAM: "histogram estimate (at most 1/128 above the exact value)",
    PERCENTILES_SOURCE: "as the source printed them"}



# --- side by side (irqlab.suite) and per-CPU lines (native, linux-guest) -----------------

SUITE_COLUMNS = [("target", "target"), ("accel", "accel"), ("status", "status")] + [
    (c.heading, c.key) for c in SUITE_TABLE]




def wrapped(line: str, width: int = OUTPUT_WIDTH) -> list[str]:
    """A prose line cut at spaces into lines of at most ``width``, the rest indented."""
    import textwrap
    return textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False) or [""]


def detail_wrapped(line: str, width: int = OUTPUT_WIDTH) -> list[str]:
    """A `show` line within ``width``: cut at spaces (a word longer than a line, e.g. a
    path, at ``width``), continuation lines indented 4 more than the line itself."""
    import textwrap
    if len(line) <= width:
        return [line]
    indent = line[:len(line) - len(line.lstrip(" "))]
    return textwrap.wrap(line, width, initial_indent="", subsequent_indent=indent + "    ",
                         break_long_words=True, break_on_hyphens=False,
                         drop_whitespace=True) or [line[:width]]


def brief_window_line(window: dict[str, Any]) -> str:
    """A window in one short line, '#3 mean 31.6 us max 76.5 us above 5' (the full line
    keeps the seed logs' shape and raw ticks: 157-169 characters)."""
    line = (f"#{window['index']} mean {format_latency(window.get('mean_ns'))} max "
            f"{format_latency(window.get('max_ns'))} above {window.get('above_threshold')}")
    return line + (f" invalid {window['invalid']}" if window.get("invalid") else "")


def warning_blocks(warnings: list[dict[str, Any]]) -> list[str]:
    """Compare's warnings, one line per kind (reports.tables.warning_lines: a kind several
    runs share names them and its advice once), each within OUTPUT_WIDTH."""
    from irqlab.reports.tables import warning_lines

    return [part for line in warning_lines(warnings) for part in wrapped("WARNING " + line)]


def _value_text(val: Any, key: str) -> str:
    """A value of a summary key in a human table: latencies formatted, None as a dash."""
    if field(key).unit == "ns":
        return format_latency(val)
    return "—" if val is None else str(val)


def suite_rows(suite: dict[str, Any]) -> list[list[str]]:
    """Cells of the comparison table, one list per target, as SUITE_COLUMNS."""
    return [[_value_text(row.get(key), key) for _head, key in SUITE_COLUMNS]
            for row in suite["rows"]]


def per_cpu_lines(summary: dict[str, Any]) -> list[str]:
    """cyclictest-like per-thread lines of a summary's ``per_cpu`` list (none if absent)."""
    lines = []
    for c in summary.get("per_cpu") or []:
        lines.append(f"T:{c['cpu']:>3} (cpu {c['cpu']}) C:{c['samples']:>9} "
                     f"Min:{format_latency(c['min_ns']):>9} P50:{format_latency(c['p50_ns']):>9} "
                     f"P99:{format_latency(c['p99_ns']):>9} Max:{format_latency(c['max_ns']):>9} "
                     f"above thr:{c['above_threshold']:>6} lost:{c.get('lost', 0)} "
                     f"overruns:{c.get('overruns', 0)}")
    return lines


def part_lines(summary: dict[str, Any]) -> list[str]:
    """rtla timerlat's two distributions of a split run: a line each for the summary's
    ``irq_latency`` and ``thread_latency`` (none if absent)."""
    lines = []
    for key, label in (("irq_latency", "IRQ"), ("thread_latency", "Thr")):
        p = summary.get(key)
        if not p:
            continue
        lines.append(f"{label}: C:{p['samples']:>9} P50:{format_latency(p['p50_ns']):>9} "
                     f"P99:{format_latency(p['p99_ns']):>9} "
                     f"P99.9:{format_latency(p['p999_ns']):>9} "
                     f"Max:{format_latency(p['max_ns']):>9} unsplit:{p['unsplit']}")
    return lines


# --- imported runs (irqlab.importers) -----------------------------------------------------

def import_lines(info: dict[str, Any]) -> list[str]:
    """What `irqlab import` says about one file: the format (and that it was sniffed),
    each run stored, and the lines --skip-bad left out."""
    how = "auto-detected as" if info.get("sniffed") else "read as"
    lines = [f"{info['file']}: {how} {info['format']}"]
    for r in info.get("runs", []):
        parts = [f"{r['windows']} windows" if r["windows"] else "",
                 f"{r['series']} histogram series" if r["series"] else "",
                 f"{r['samples_stored']} raw samples" if r["samples_stored"] else ""]
        what = ", ".join(p for p in parts if p) or "whole-run figures only"
        lines.append(f"  run {r['run_id']} {r['name']} ({r['kind']}): {what}")
    if info.get("xentrace"):
        t = info["xentrace"]
        lines.append(f"  xentrace: {t['records']} records kept with it (probe domain "
                     f"{t['domid']}): `irqlab explain {info['runs'][0]['run_id']}`")
    if info.get("skipped"):
        lines.append(f"  skipped {info['skipped']} bad line(s) (--skip-bad):")
        lines.extend(f"    {text}" for text in info.get("skipped_lines", [])[:20])
    return lines


def above_bound_text(summary: dict[str, Any]) -> str:
    """An above-threshold count the source did not give: its bound, or a dash."""
    bound = summary.get("above_threshold_bound")
    if bound:
        return f"{bound[0]}–{bound[1]} (bound: the source rounds a percentage)"
    return "—"


def above_cell(window: dict[str, Any]) -> str:
    """A window's above-threshold cell: the count, or the bound the source allows."""
    extra = window.get("extra") or {}
    if extra.get("above_threshold_exact", True):
        return str(window["above_threshold"])
    bound = extra.get("above_threshold_bound")
    if not bound:
        return "—"
    return f"≤{bound[1]}" if bound[0] == 0 else f"{bound[0]}–{bound[1]}"


def start_cell(window: dict[str, Any]) -> str:
    start = window.get("start_s")
    if start is None or start != start:   # NaN: the source gave no time
        return "—"
    return f"{start:g} s"




# rtla osnoise top's per-CPU columns (tools/tracing/rtla/src/osnoise_top.c): the noise
# object's keys beside their headings, then its classes' counts (HW NMI IRQ Softirq Thread).
_NOISE_COLUMNS = (("CPU", 4), ("Runtime", 10), ("Noise", 10), ("Noise/s", 10),
                  ("%CPU Aval", 10), ("Max Single", 11), ("Gaps", 8))
_NOISE_KIND_HEADINGS = {"outside": "HW", "nmi": "NMI", "irq": "IRQ", "softirq": "Softirq",
                        "thread": "Thread"}


def osnoise_lines(summary: dict[str, Any]) -> list[str]:
    """A noise run's figures as rtla osnoise top lays them out: one line for the run, a
    heading and a line per CPU, then the classes by time (none without ``noise``)."""
    n = summary.get("noise")
    if not n:
        return []
    cpus = "CPU" if n["cpus"] == 1 else "CPUs"
    lines = [f"noise: gaps >= {format_ns(n['threshold_ns'], 'exact')}, "
             f"{format_ns(n['runtime_ns'])} measured on {n['cpus']} {cpus}: "
             f"{format_latency(n['noise_per_s_ns'])} of noise per s, "
             f"{_pct(n['cpu_available_pct'])} CPU available, max single gap "
             f"{format_latency(n['max_gap_ns'])}, {n['gaps']:,} gaps"
             + (f" ({n['lost']:,} lost from the ring, counted in the noise)"
                if n["lost"] else "")]
    kinds = list(_NOISE_KIND_HEADINGS) if n["classified"] else []
    lines.append("".join(h.rjust(w) for h, w in _NOISE_COLUMNS)
                 + "".join(_NOISE_KIND_HEADINGS[k].rjust(8) for k in kinds))
    for c in n["per_cpu"]:
        cells = (str(c["cpu"]), format_ns(c["runtime_ns"]), format_ns(c["noise_ns"]),
                 format_latency(c["noise_per_s_ns"]), _pct(c["cpu_available_pct"]),
                 format_latency(c["max_gap_ns"]), f"{c['gaps']:,}")
        lines.append("".join(v.rjust(w) for v, (_h, w) in zip(cells, _NOISE_COLUMNS))
                     + "".join(f"{c['by_kind'][k]['count']:,}".rjust(8) for k in kinds))
    if not n["classified"]:
        lines.append("gaps not classified: run with --trace to name each gap's cause")
        return lines
    noise_ns = sum(k["time_ns"] for k in n["by_kind"].values()) or 1
    for i, c in enumerate(n["classes"]):
        what = c["name"] if c["kind"] == "outside" else f"{c['kind']} {c['name']}"
        lines.append(f"{'top class' if i == 0 else 'class':>9}: {what}: "
                     f"{c['count']:,} gaps, {format_latency(c['time_ns'])} "
                     f"({100 * c['time_ns'] / noise_ns:.1f}% of the gaps' time)")
    return lines


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}%"


def imported_summary_lines(summary: dict[str, Any]) -> list[str]:
    """Extra lines for a run imported from another tool: provenance, per-series figures
    and the notes that say what the source could not give."""
    if summary.get("source") in (None, "irqlab"):
        return []
    imp = summary.get("import") or {}
    lines = [f"imported from {summary['source']}: {imp.get('file')} (line {imp.get('line')})"]
    for c in IMPORTED_ROWS:
        val = summary.get(c.key)
        if val is not None:
            text = format_latency(val) if c.field.unit == "ns" else val
            lines.append(f"{c.heading}: {text}")
    for sname, fig in (summary.get("series") or {}).items():
        lines.append(f"  {sname}: n {fig.get('samples')} min {format_latency(fig.get('min_ns'))} "
                     f"mean {format_latency(fig.get('mean_ns'))} "
                     f"p50 {format_latency(fig.get('p50_ns'))} "
                     f"p99 {format_latency(fig.get('p99_ns'))} max {format_latency(fig.get('max_ns'))}"
                     + (f" overflow {fig['overflow']}" if fig.get("overflow") else ""))
    for f in NOTE_FIELDS:
        if summary.get(f.key):
            lines.append(f"note: {summary[f.key]}")
    if summary.get("samples_assumed"):
        lines.append("note: samples per window are the source app's fixed window size, "
                     "not stated in the log")
    lines.extend(f"note: {n}" for n in summary.get("notes") or [])
    return lines
