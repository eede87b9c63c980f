"""Renderers: one interface, one class per output format (human terminal, JSON lines).

Every command talks to a Renderer; formatters build lines and return them, the renderer
decides where they go. Machine output is versioned JSON lines (docs/formats.md section 4).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from irqlab.cli.durations import format_ns

EMULATED_BANNER = ("EMULATED: these latencies come from {accel}; they show the pipeline "
                   "works, not what hardware-assisted virtualisation or bare metal would give.")

SUMMARY_ROWS = [("samples", "samples"), ("lost", "lost"), ("overruns", "overruns"),
                ("injected", "injected"), ("above threshold", "above_threshold"),
                ("min", "min_ns"), ("mean", "mean_ns"), ("stddev", "stddev_ns"),
                ("p50", "p50_ns"), ("p90", "p90_ns"), ("p99", "p99_ns"),
                ("p99.9", "p999_ns"), ("p99.99", "p9999_ns"), ("max", "max_ns"),
                ("warm max", "warm_max_ns")]


def json_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=False, default=str)


def summary_lines(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) pairs of a summary for human display."""
    out = []
    for label, key in SUMMARY_ROWS:
        val = summary.get(key)
        if key.endswith("_ns"):
            text = format_ns(val)
        elif key == "above_threshold" and summary.get("samples"):
            text = f"{val} ({100.0 * val / summary['samples']:.4g}%) > {format_ns(summary['threshold_ns'])}"
        else:
            text = "—" if val is None else str(val)
        out.append((label, text))
    return out


class Renderer:
    """Interface every output format implements."""

    def on_started(self, info: dict[str, Any]) -> None: ...
    def on_window(self, window: dict[str, Any], line: str) -> None: ...
    def on_progress(self, fraction: float, detail: str) -> None: ...
    def on_notice(self, text: str) -> None: ...
    def summary(self, summary: dict[str, Any]) -> None: ...
    def run_list(self, rows: list[dict[str, Any]]) -> None: ...
    def run_detail(self, summary: dict[str, Any], detail: dict[str, Any],
                   windows: list[dict[str, Any]]) -> None: ...
    def bench(self, figures: list[dict[str, Any]]) -> None: ...
    def close(self) -> None: ...


class JsonRenderer(Renderer):
    """JSON lines on stdout; notices go to stderr so stdout stays parseable."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out

    def _emit(self, obj: dict[str, Any]) -> None:
        self.out.write(json_line(obj) + "\n")
        self.out.flush()

    def on_window(self, window: dict[str, Any], line: str) -> None:
        self._emit({"type": "window", **window})

    def on_notice(self, text: str) -> None:
        print(text, file=sys.stderr)

    def summary(self, summary: dict[str, Any]) -> None:
        self._emit(summary)

    def run_list(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            self._emit({"type": "run", **r})

    def run_detail(self, summary: dict[str, Any], detail: dict[str, Any],
                   windows: list[dict[str, Any]]) -> None:
        self._emit(summary)

    def bench(self, figures: list[dict[str, Any]]) -> None:
        for f in figures:
            self._emit({"type": "bench", **f})


class HumanRenderer(Renderer):
    """Rich terminal output: progress bar, seed-style window lines, summary table."""

    def __init__(self, console: Console | None = None) -> None:
        # soft_wrap: a window line is data (seed-log shape); never break it.
        self.console = console or Console(highlight=False, soft_wrap=True)
        self._progress: Progress | None = None
        self._task = None

    def on_started(self, info: dict[str, Any]) -> None:
        c = self.console
        c.print(f"run {info['run_id']} [bold]{info['name']}[/]: accel {info['accel']}, "
                f"timer {info['timer_mode']}, idle {info['idle']}, "
                f"{info['tick_hz']} Hz ticks ({info['tick_method']})", markup=True)
        if info.get("emulated"):
            c.print("[yellow]" + EMULATED_BANNER.format(accel=info["accel"]) + "[/]")
        elif info.get("host_is_virtual"):
            c.print("[yellow]NOTE: this host is itself a virtual machine: its own "
                    "hypervisor adds latency you would not see on bare metal.[/]")
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                  TextColumn("{task.percentage:>3.0f}%"),
                                  TimeRemainingColumn(), console=c, transient=True)
        self._task = self._progress.add_task("measuring", total=1.0)
        self._progress.start()

    def on_window(self, window: dict[str, Any], line: str) -> None:
        self.console.print(line, markup=False)

    def on_progress(self, fraction: float, detail: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=fraction, description=detail)

    def on_notice(self, text: str) -> None:
        self.console.print(f"[yellow]{text}[/]")

    def _stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def summary(self, summary: dict[str, Any]) -> None:
        self._stop_progress()
        title = (f"run {summary['run_id']} {summary['name']} — {summary['status']} "
                 f"({summary['accel']}, period {format_ns(summary['period_ns'])})")
        table = Table(title=title, show_header=False)
        table.add_column("statistic")
        table.add_column("value", justify="right")
        for label, text in summary_lines(summary):
            table.add_row(label, text)
        self.console.print(table)
        if summary.get("message"):
            style = "red" if summary["status"] == "failed" else "yellow"
            self.console.print(f"[{style}]{summary['message']}[/]", markup=True)
        if summary.get("emulated"):
            self.console.print("[yellow]" + EMULATED_BANNER.format(accel=summary["accel"])
                               + "[/]")

    def run_list(self, rows: list[dict[str, Any]]) -> None:
        table = Table()
        for col in ("id", "name", "started", "target", "accel", "status", "samples",
                    "p99", "max"):
            table.add_column(col)
        for r in rows:
            table.add_row(str(r["run_id"]), r["name"], r["started_at"][:19], r["target"],
                          r["accel"] or "—", r["status"], str(r["samples"]),
                          format_ns(r["p99_ns"]), format_ns(r["max_ns"]))
        self.console.print(table)

    def run_detail(self, summary: dict[str, Any], detail: dict[str, Any],
                   windows: list[dict[str, Any]]) -> None:
        c = self.console
        for key, val in detail.items():
            c.print(f"{key}: {val}", markup=False)
        if windows:
            table = Table(title="windows")
            for col in ("#", "start", "samples", "mean", "stddev", "min", "max", "above thr"):
                table.add_column(col, justify="right")
            for w in windows:
                table.add_row(str(w["index"]), f"{w['start_s']:g} s", str(w["samples"]),
                              format_ns(w["mean_ns"]), format_ns(w["stddev_ns"]),
                              format_ns(w["min_ns"]), format_ns(w["max_ns"]),
                              str(w["above_threshold"]))
            c.print(table)
        self.summary(summary)

    def bench(self, figures: list[dict[str, Any]]) -> None:
        for f in figures:
            extra = ""
            if "baseline" in f:
                extra = f" (baseline {f['baseline']:.4g} {f['unit']}, ratio {f['ratio']:.2f})"
            self.console.print(f"{f['name']}: {f['value']:.4g} {f['unit']}{extra}",
                               markup=False)

    def close(self) -> None:
        self._stop_progress()
