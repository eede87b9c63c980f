"""A run's live output (Renderer: its start, window lines, progress, notices) and the
stage progress of long commands. Everything else a command prints, a run's summary
included, goes through the output seam (irqlab.cli.output: model -> exporter -> screen).
Machine output is versioned JSON lines (docs/formats.md section 4).
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from irqlab.cli.output.json_lines import json_line
from irqlab.cli.output.lines import EMULATED_BANNER, brief_window_line
from irqlab.cli.output.screen import Screen

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

# rich is imported inside the human renderer's methods, not here: commands import this
# module for --json output, which needs no rich (docs/design.md, "Start-up").


class Renderer:
    """What a run shows while it goes on (irqlab.measure.config's front end); its
    summary afterwards is a model for the output seam."""

    # `irqlab run -q`: no window lines and no progress, the summary only.
    quiet: bool = False
    # `irqlab run --brief`: window lines as brief_window_line (human output only).
    brief: bool = False
    # Where the run's summary is written afterwards (the same console as its bar).
    screen: Screen

    def on_started(self, info: dict[str, Any]) -> None: ...
    def on_window(self, window: dict[str, Any], line: str) -> None: ...
    def on_progress(self, fraction: float, detail: str) -> None: ...
    def on_notice(self, text: str) -> None: ...
    def close(self) -> None: ...


class JsonRenderer(Renderer):
    """Window lines as JSON lines on stdout; notices go to stderr so stdout stays
    parseable."""

    def __init__(self, out: TextIO | None = None) -> None:
        # sys.stdout when used, not when this module was imported (a caller may have
        # replaced it since: pytest's capture, a redirect).
        self.out = out or sys.stdout
        self.screen = Screen()

    def on_window(self, window: dict[str, Any], line: str) -> None:
        if not self.quiet:
            self.out.write(json_line({"type": "window", **window}) + "\n")
            self.out.flush()

    def on_notice(self, text: str) -> None:
        print(text, file=sys.stderr)


class HumanRenderer(Renderer):
    """Rich terminal output: progress bar, seed-style window lines, notices."""

    def __init__(self, console: Console | None = None) -> None:
        self.screen = Screen(console)
        self._progress: Progress | None = None
        self._task = None

    @property
    def console(self) -> Console:
        """rich's console (the screen's), made at its first use."""
        return self.screen.console

    def on_started(self, info: dict[str, Any]) -> None:
        from rich.markup import escape
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        c = self.console
        c.print(f"run {info['run_id']} [bold]{escape(info['name'])}[/]: accel {info['accel']}, "
                f"timer {info['timer_mode']}, idle {info['idle']}, "
                f"{info['tick_hz']} Hz ticks ({info['tick_method']})", markup=True)
        if info.get("emulated"):
            c.print("[yellow]" + EMULATED_BANNER.format(accel=info["accel"]) + "[/]")
        elif info.get("host_is_virtual"):
            c.print("[yellow]NOTE: this host is itself a virtual machine: its own "
                    "hypervisor adds latency you would not see on bare metal.[/]")
        if self.quiet:
            return
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                  TextColumn("{task.percentage:>3.0f}%"),
                                  TimeRemainingColumn(), console=c, transient=True)
        self._task = self._progress.add_task("measuring", total=1.0)
        self._progress.start()

    def on_window(self, window: dict[str, Any], line: str) -> None:
        if not self.quiet:
            self.console.print(brief_window_line(window) if self.brief else line,
                               markup=False)

    def on_progress(self, fraction: float, detail: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=fraction, description=detail)

    def on_notice(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(text, style="yellow"))   # foreign text: never markup

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class StageProgress:
    """Progress of a long command (explain, import, report) in stages, on stderr: the
    interface every command reports through; this base class shows nothing (--json, a
    pipe, a log file: stdout and stderr stay free of bars and escape sequences)."""

    def stage(self, name: str, total: float | None = None, unit: str = "") -> None:
        """A new stage (the previous one ends): a bar when ``total`` is known, else a
        spinner; ``unit`` names what is counted (bytes are shown as MB)."""

    def update(self, done: float, detail: str = "") -> None:
        """How far the current stage is (absolute, in its unit)."""

    def close(self) -> None:
        """Remove the bars (they are transient: the command's output stays clean)."""

    def __enter__(self) -> "StageProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TerminalProgress(StageProgress):
    """rich bars and spinners on stderr (a terminal)."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn,
                                   SpinnerColumn, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.console = console or Console(stderr=True, highlight=False)
        self._columns = {
            "bar": (TextColumn("{task.description}"), BarColumn(),
                    TextColumn("{task.percentage:>3.0f}%"), MofNCompleteColumn(),
                    TimeRemainingColumn()),
            "bytes": (TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                      TimeRemainingColumn()),
            "spin": (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()),
        }
        self._bar: Progress | None = None
        self._task: Any = None
        # An exception the command does not catch (Ctrl-C) must not leave a bar behind.
        atexit.register(self.close)

    def stage(self, name: str, total: float | None = None, unit: str = "") -> None:
        from rich.progress import Progress

        self.close()
        kind = "spin" if total is None else "bytes" if unit == "bytes" else "bar"
        self._bar = Progress(*self._columns[kind], console=self.console, transient=True)
        self._task = self._bar.add_task(name, total=total)
        self._bar.start()

    def update(self, done: float, detail: str = "") -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done,
                             **({"description": detail} if detail else {}))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def file_size(path: Any) -> int:
    """Bytes of a file for a progress total (0 when it cannot be read: the command says
    why itself)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def stage_progress(args: Any) -> StageProgress:
    """Bars only for a person watching: not with --json, not when stderr is not a
    terminal (``IRQLAB_PROGRESS=0`` turns them off too)."""
    if getattr(args, "json", False) or not sys.stderr.isatty() \
            or os.environ.get("IRQLAB_PROGRESS") == "0":
        return StageProgress()
    return TerminalProgress()
