"""Renderers: one interface, one class per output format (human terminal, JSON lines).

Every command talks to a Renderer; formatters build lines and return them, the renderer
decides where they go. Machine output is versioned JSON lines (docs/formats.md section 4).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
from functools import cache
from typing import TYPE_CHECKING, Any, TextIO

from irqlab.cli.safe_text import EscapeControls
from irqlab.durations import format_latency, format_ns
from irqlab.humanize import format_when
from irqlab.stats.fields import (IMPORTED_ROWS, LIST_TABLE, NOTE_FIELDS,
                                 PERCENTILES_EXACT, PERCENTILES_HISTOGRAM,
                                 PERCENTILES_SOURCE, SUITE_TABLE, SUMMARY_TABLE,
                                 WINDOW_TABLE, field, percentiles_from)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

# rich is imported inside the human renderer's methods, not here: commands import this
# module for json_line and --json output, which need no rich (docs/design.md, "Start-up").

# Within 120 columns (issue 46: it was 138).
EMULATED_BANNER = ("EMULATED ({accel}): these latencies show the pipeline works, not what "
                   "KVM, Xen or bare metal would give.")


# Version of each JSON line type (docs/formats.md section 4; schemas in docs/schema/).
# A type's version goes up when one of its keys changes meaning or goes away; added keys
# keep it. Types whose builder lives elsewhere carry their own constant (summary: fields.py,
# compare: reports/compare.py, check, report, explain, model, push); the renderer stamps the
# others here, so no line leaves without one.
LINE_VERSIONS: dict[str, int] = {"window": 1, "run": 1, "bench": 1, "suite": 1,
                                 "import": 1, "cell": 1}


def versioned(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with ``type`` and ``version`` as its first two keys (a version it already
    has is kept: its builder owns it)."""
    kind = obj["type"]
    version = obj.get("version", LINE_VERSIONS.get(kind))
    if version is None:
        raise KeyError(f"JSON line type {kind!r} has no version (add it to LINE_VERSIONS)")
    rest = {k: v for k, v in obj.items() if k not in ("type", "version")}
    return {"type": kind, "version": version, **rest}


def json_line(obj: dict[str, Any]) -> str:
    """One JSON line: every machine-readable line of every command goes through here."""
    return json.dumps(versioned(obj), sort_keys=False, default=str)


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


class Renderer:
    """Interface every output format implements."""

    # `irqlab run -q`: no window lines and no progress, the summary only.
    quiet: bool = False
    # `irqlab run --brief`: window lines as brief_window_line (human output only).
    brief: bool = False
    # `irqlab compare --verbose`: the noise test's whole method (human output only).
    verbose: bool = False

    def on_started(self, info: dict[str, Any]) -> None: ...
    def on_window(self, window: dict[str, Any], line: str) -> None: ...
    def on_progress(self, fraction: float, detail: str) -> None: ...
    def on_notice(self, text: str) -> None: ...
    def summary(self, summary: dict[str, Any]) -> None: ...
    def run_list(self, rows: list[dict[str, Any]]) -> None: ...
    def run_detail(self, summary: dict[str, Any], detail: dict[str, Any],
                   windows: list[dict[str, Any]]) -> None: ...
    def bench(self, figures: list[dict[str, Any]]) -> None: ...
    def suite(self, suite: dict[str, Any]) -> None: ...
    def compare(self, model: dict[str, Any]) -> None: ...
    def check(self, result: dict[str, Any], lines: list[str]) -> None: ...
    def report(self, info: dict[str, Any]) -> None: ...
    def imported(self, info: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


class JsonRenderer(Renderer):
    """JSON lines on stdout; notices go to stderr so stdout stays parseable."""

    def __init__(self, out: TextIO | None = None) -> None:
        # sys.stdout when used, not when this module was imported (a caller may have
        # replaced it since: pytest's capture, a redirect).
        self.out = out or sys.stdout

    def _emit(self, obj: dict[str, Any]) -> None:
        self.out.write(json_line(obj) + "\n")
        self.out.flush()

    def on_window(self, window: dict[str, Any], line: str) -> None:
        if not self.quiet:
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

    def suite(self, suite: dict[str, Any]) -> None:
        self._emit(suite)

    def compare(self, model: dict[str, Any]) -> None:
        from irqlab.reports import tables as compare_tables
        for obj in compare_tables.json_objects(model):
            self._emit(obj)

    def check(self, result: dict[str, Any], lines: list[str]) -> None:
        self._emit(result)

    def report(self, info: dict[str, Any]) -> None:
        self._emit(info)

    def imported(self, info: dict[str, Any]) -> None:
        self._emit({"type": "import", **info})


# rich's own emoji code pattern (rich/_emoji_replace.py), the same matches in the same
# order as its replacement makes them. Patterns, not compiled here: re compiles them at
# the first human output (its cache), not at every import of this module.
_EMOJI_CODE = r"(:(\S*?)(?:(?:\-)(emoji|text))?:)"
# Names no emoji has (tests/cli/test_render_emoji.py checks rich's table): none, or one
# or two digits, as in a timestamp's ":03:" or an IPv6 "::".
_NOT_AN_EMOJI = r"[0-9]{0,2}"


def may_name_an_emoji(text: str) -> bool:
    """Whether rich's emoji replacement could change ``text`` (a ``:name:`` that may
    be an emoji's). When it cannot, the replacement is skipped: it imports rich's table
    of 3,600 emoji, ~10-30 ms of every `irqlab list`/`show` (issue 28)."""
    return any(not re.fullmatch(_NOT_AN_EMOJI, m.group(2))
               for m in re.finditer(_EMOJI_CODE, text))


@cache
def _console_class() -> type[Console]:
    """rich's Console, but a string that holds no emoji code is rendered with emoji
    replacement off: the same text, without importing the emoji table."""
    from rich.console import Console

    class _Console(Console):
        def render_str(self, text: str, *, emoji: bool | None = None,  # type: ignore[override]
                       **kwargs: Any) -> Any:
            if emoji is not False and not may_name_an_emoji(text):
                emoji = False
            return super().render_str(text, emoji=emoji, **kwargs)

    return _Console


# --- plain text where rich would print the same characters (issue 28) ------------------
#
# `irqlab list`/`show` into a pipe or a file printed through rich: importing it and
# laying out a small table was ~40 ms of a ~300 ms command (CPU). Off a terminal rich
# prints no colour, so a table of short one-line cells is its box characters and the
# cells' text padded to the widest of each column: drawn here, the same characters
# (tests/cli/test_render_plain.py holds both equal on random tables and lines). Anything
# rich might print otherwise (markup, an emoji code, a control character, a wide or
# combining character, a table wider than PLAIN_WIDTH) still goes to rich.

# The width of rich's console when stdout is not a terminal: tables as wide as they need.
PLAIN_WIDTH = 200
# Text rich prints unchanged, each character one cell wide: printable ASCII, the Latin-1
# letters and signs (not the soft hyphen, U+00AD) and the few marks irqlab's own figures
# use.
_PLAIN_MARKS = frozenset("—–≤≥…×±µ")


def _plain_chars(text: str) -> bool:
    if text.isascii():
        return text.isprintable()           # no control character
    return all(" " <= ch <= "~" or ("\u00a1" <= ch <= "\u00ff" and ch != "\u00ad")
               or ch in _PLAIN_MARKS for ch in text)


class Data(str):
    """A table cell or title that is data (a run name, a status), never rich markup: rich
    renders it as ``Text``; a plain ``str`` cell is rendered as markup, as rich's
    ``Table.add_row`` does."""


def plain_output() -> bool:
    """Whether rich would see stdout as no terminal, writing UTF-8 (else it would add
    colour or swap the boxes for ASCII): its own test, rich/console.py is_terminal."""
    out = sys.stdout
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):        # no file, or a closed one
        return False
    env = os.environ
    forced = env.get("TTY_COMPATIBLE", "")
    rich_terminal = forced == "1" or (forced != "0" and bool(env.get("FORCE_COLOR")))
    encoding = (getattr(out, "encoding", None) or "utf-8").lower()
    return (not tty and not rich_terminal and encoding.startswith("utf")
            and "IPython" not in sys.modules)        # rich draws HTML in a notebook


def plain_text(text: str, markup: bool = False, emoji: bool = True) -> bool:
    """Whether rich prints ``text`` (on a line of its own, or as one cell) unchanged: one
    cell per character, no markup (``markup``: it is read as markup), no emoji code
    (``emoji``: codes are replaced). A line of its own may be of any length: the soft
    wrap of the renderer's console never breaks one. In markup a backslash escapes the
    next tag (a text ending in one would escape the closing ``[/]`` of its style)."""
    return (_plain_chars(text)
            and not (markup and ("[" in text or "\\" in text))
            and not (emoji and may_name_an_emoji(text)))


def _plain_cell(cell: str) -> bool:
    """A cell (or title) rich prints as it is: no leading or trailing space (rich strips
    a right-justified or centred one's)."""
    return cell == cell.strip(" ") and plain_text(cell, markup=not isinstance(cell, Data),
                                                  emoji=not isinstance(cell, Data))


def _write_plain(lines: list[str]) -> None:
    # Flushed as rich flushes each print: a notice on stderr stays in its place.
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()


class PlainTable:
    """A table of the human renderer, as rich's ``Table()`` with these columns (heading,
    justify) and rows (cells: str as markup, Data as text), its default box (heavy head;
    without a header, square) and a title centred above: drawn as plain lines when rich
    would draw the same characters (``plain_lines``), else by rich (``to_rich``)."""

    def __init__(self, title: str | None = None, show_header: bool = True) -> None:
        self.title = title
        self.show_header = show_header
        self.columns: list[tuple[str, str]] = []
        self.rows: list[tuple[str, ...]] = []

    def add_column(self, heading: str, justify: str = "left") -> None:
        self.columns.append((heading, justify))

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def to_rich(self) -> Any:
        """The same table as a rich ``Table``."""
        from rich.table import Table
        from rich.text import Text

        def cell(value: str | None) -> Any:
            return Text(value) if isinstance(value, Data) else value

        table = Table(title=cell(self.title), show_header=self.show_header)
        for heading, justify in self.columns:
            table.add_column(heading, justify=justify)  # type: ignore[arg-type]
        for row in self.rows:
            table.add_row(*(cell(value) for value in row))
        return table

    def plain_lines(self, width: int) -> list[str] | None:
        """The lines rich prints for this table at ``width``, or None when rich might
        print others (it would wrap or squeeze a wider table, or render some cell)."""
        cells = ([tuple(h for h, _j in self.columns)] if self.show_header else []) + self.rows
        if not cells or not self.columns or not all(
                _plain_cell(c) for row in cells for c in row) or (
                self.title is not None and not _plain_cell(self.title)) or any(
                j not in ("left", "right") for _h, j in self.columns):
            return None
        # Each column as wide as its widest cell, a space of padding either side.
        widths = [max(len(row[i]) for row in cells) + 2 for i in range(len(self.columns))]
        table_width = sum(widths) + len(widths) + 1
        if table_width > width:
            return None
        lines = []
        if self.title:
            # As it is: the console's soft wrap ("ignore" overflow) leaves it uncentred.
            lines.append(self.title)
        heavy = self.show_header
        lines.append(("┏" + "┳".join("━" * w for w in widths) + "┓") if heavy
                     else ("┌" + "┬".join("─" * w for w in widths) + "┐"))
        for i, row in enumerate(cells):
            bar = "┃" if heavy and i == 0 else "│"
            lines.append(bar + bar.join(
                f" {c.ljust(w - 2) if j == 'left' else c.rjust(w - 2)} "
                for c, w, (_h, j) in zip(row, widths, self.columns)) + bar)
            if heavy and i == 0:
                lines.append("┡" + "╇".join("━" * w for w in widths) + "┩")
        lines.append("└" + "┴".join("─" * w for w in widths) + "┘")
        return lines


class HumanRenderer(Renderer):
    """Rich terminal output: progress bar, seed-style window lines, summary table."""

    def __init__(self, console: Console | None = None) -> None:
        self._console = console
        # Not a terminal (a pipe, a file): what list/show print is written here, without
        # rich (~40 ms of their start, issue 28), wherever rich would print the same
        # characters (PlainTable); anything else goes to rich.
        self._plain = console is None and plain_output()
        self._progress: Progress | None = None
        self._task = None

    @property
    def console(self) -> Console:
        """rich's console, made at its first use."""
        if self._console is None:
            # soft_wrap: a window line is data (seed-log shape); never break it.
            # Not a terminal (a log file, a pipe): tables as wide as they need, not 80
            # columns (PLAIN_WIDTH).
            self._console = _console_class()(
                highlight=False, soft_wrap=True,
                width=None if sys.stdout.isatty() else PLAIN_WIDTH)
            # Names and foreign text are data: control characters shown escaped.
            self._console.push_render_hook(EscapeControls())
        return self._console

    def _print(self, text: str, style: str | None = None, markup: bool = False) -> None:
        """One line: ``console.print(text, markup=False)``; with ``style``, as
        ``Text(text, style=style)`` (data, never markup), or with ``markup`` as the
        markup ``[style]text[/]``."""
        if self._plain and plain_text(text, markup=markup or style is None,
                                      emoji=style is None or markup):
            _write_plain([text])
        elif style is None:
            self.console.print(text, markup=False)
        elif markup:
            self.console.print(f"[{style}]{text}[/]")
        else:
            from rich.text import Text

            self.console.print(Text(text, style=style))

    def _print_table(self, table: PlainTable) -> None:
        lines = table.plain_lines(PLAIN_WIDTH) if self._plain else None
        if lines is None:
            self.console.print(table.to_rich())
        else:
            _write_plain(lines)

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

    def _stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def summary(self, summary: dict[str, Any]) -> None:
        self._stop_progress()
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
        self._print_table(table)
        for line in per_cpu_lines(summary) + part_lines(summary) + noise_lines(summary) \
                + imported_summary_lines(summary):
            for part in detail_wrapped(line):
                self._print(part)
        check = summary.get("self_check")
        if check:
            self._print(check["text"], style="green" if check["passed"] else "bold red")
        if summary.get("message"):
            style = "red" if summary["status"] == "failed" else "yellow"
            self._print(str(summary["message"]), style=style)
        if summary.get("emulated"):
            self._print(EMULATED_BANNER.format(accel=summary["accel"]), style="yellow",
                        markup=True)

    def run_list(self, rows: list[dict[str, Any]]) -> None:
        table = PlainTable()
        for col in ("id", "name", "started", "target", "accel", "status"):
            table.add_column(col)
        for c in LIST_TABLE:
            table.add_column(c.heading)
        for r in rows:
            # A run of a series (irqlab run --repeat): its series id after its name.
            name = r["name"] + (f" [series {r['series']}]" if r.get("series") else "")
            table.add_row(str(r["run_id"]), Data(name), format_when(r["started_at"]),
                          Data(r["target"]), Data(r["accel"] or "—"), Data(r["status"]),
                          *(_value_text(r[c.key], c.key) for c in LIST_TABLE))
        self._print_table(table)

    def run_detail(self, summary: dict[str, Any], detail: dict[str, Any],
                   windows: list[dict[str, Any]]) -> None:
        for key, val in detail.items():
            # A block's lines (configuration, host facts) wrap within OUTPUT_WIDTH: a
            # kernel command line or a QEMU command is hundreds of characters (issue
            # 32); --json keeps each value whole.
            for line in f"{key}: {val}".split("\n"):
                for part in detail_wrapped(line):
                    self._print(part)
        if windows:
            table = PlainTable(title="windows")
            for col in ["#", "start"] + [c.heading for c in WINDOW_TABLE]:
                table.add_column(col, justify="right")
            for w in windows:
                table.add_row(str(w["index"]), start_cell(w),
                              *(above_cell(w) if c.key == "above_threshold"
                                else _value_text(w[c.key], c.key) for c in WINDOW_TABLE))
            self._print_table(table)
        self.summary(summary)

    def bench(self, figures: list[dict[str, Any]]) -> None:
        for f in figures:
            if "text" in f:                 # a figure that says itself (bench noise)
                self.console.print(f["text"], markup=False)
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
            self.console.print(f"{f['name']}: {f['value']:.4g} {f['unit']}{extra}",
                               markup=False)

    def compare(self, model: dict[str, Any]) -> None:
        # Imported here: the compare tables pull in the store (DuckDB, Arrow: ~0.2 s),
        # which commands that never compare need not pay.
        from rich.table import Table
        from rich.text import Text

        from rich import box

        from irqlab.reports import tables as compare_tables

        def build(compact: bool) -> Table:
            """Compact (issue 32): runs as #ID (named below the table), the verdict
            wrapped at its spaces, no vertical rules: 161 -> 120 columns for 3 runs of
            default names. Numbers never wrap nor become ellipses."""
            # Cells are Text objects: run names and tags are data, never rich markup.
            table = Table(title=Text(f"compare against run {model['baseline_run_id']} "
                                     f"(baseline)"),
                          box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
                          show_edge=not compact, pad_edge=not compact,
                          padding=(0, 1) if not compact else (0, 0, 0, 1),
                          collapse_padding=compact)
            for head, _key, kind in cols:
                table.add_column(head, no_wrap=not (compact and kind == "verdict"),
                                 justify="left" if kind in ("run", "verdict") else "right")
            for row in model["rows"]:
                table.add_row(*(Text(f"#{row['run_id']}" if compact and kind == "run"
                                     else compare_tables.cell(row, key, kind))
                                for _h, key, kind in cols))
            return table

        cols = compare_tables.HUMAN_COLUMNS
        c = self.console
        table = build(False)
        natural = c.measure(table, options=c.options.update(max_width=1000)).maximum
        compact = natural > OUTPUT_WIDTH
        if compact:
            table = build(True)
            natural = c.measure(table, options=c.options.update(max_width=1000)).minimum
        width = c.width
        # A narrow terminal wraps the lines instead of squeezing numbers.
        c.width = max(min(width, OUTPUT_WIDTH) if compact else width, natural)
        try:
            c.print(table)
        finally:
            c.width = width
        if compact:
            for part in wrapped("runs: " + ", ".join(f"#{r['run_id']} {r['name']}"
                                                     for r in model["rows"])):
                c.print(Text(part))
        self._per_cpu_table(model)
        for line in compare_tables.notes_lines(model, self.verbose):
            for part in wrapped(line):
                c.print(Text(part, style="dim"))
        for line in compare_tables.noise_lines(model):
            for part in wrapped(line):
                c.print(Text(part))
        for line in compare_tables.differs_lines(model):
            for part in wrapped(line):
                c.print(Text(part, style="yellow"))
        for line in warning_blocks(model["warnings"]):
            c.print(Text(line, style="yellow"))

    def _per_cpu_table(self, model: dict[str, Any]) -> None:
        """compare --per-cpu: a row per CPU of each run ('#4 T:1'), within OUTPUT_WIDTH."""
        if not model.get("per_cpu"):
            return
        from rich import box
        from rich.table import Table
        from rich.text import Text

        from irqlab.reports import tables as compare_tables

        rows = compare_tables.per_cpu_rows(model)
        if rows:
            table = Table(title=Text("per CPU"), box=box.SIMPLE_HEAD, show_edge=False,
                          pad_edge=False)
            for head, _key, kind in compare_tables.PER_CPU_COLUMNS:
                table.add_column(head, no_wrap=True,
                                 justify="left" if kind == "cpu_run" else "right")
            for row in rows:
                table.add_row(*(Text(compare_tables.per_cpu_cell(row, key, kind))
                                for _h, key, kind in compare_tables.PER_CPU_COLUMNS))
            self.console.print(table)
        for line in compare_tables.per_cpu_notes(model):
            for part in wrapped(line):
                self.console.print(Text(part, style="dim"))

    def check(self, result: dict[str, Any], lines: list[str]) -> None:
        from rich.text import Text

        for line in lines:
            style = ("green" if line.lstrip().startswith("PASS") else
                     "red" if line.lstrip().startswith(("FAIL", "ERROR")) else "")
            self.console.print(Text(line, style=style))

    def imported(self, info: dict[str, Any]) -> None:
        for line in import_lines(info):
            self.console.print(line, markup=False)

    def report(self, info: dict[str, Any]) -> None:
        from rich.text import Text

        if info.get("path"):
            self.console.print(Text(f"wrote {info['path']} ({info['bytes'] / 1e6:.2f} MB, "
                                    f"{info['plots']} plots, {len(info['runs'])} runs) in "
                                    f"{info['seconds']:.2f} s"))
        for path in info.get("plot_files", []):
            self.console.print(Text(f"wrote {path}"))

    def suite(self, suite: dict[str, Any]) -> None:
        """The side-by-side comparison: one row per target (irqlab.suite)."""
        from rich.table import Table
        from rich.text import Text

        self._stop_progress()
        table = Table(title=Text(f"suite {suite['suite']} — {suite['status']}"))
        for head in SUITE_COLUMNS:
            table.add_column(head[0], justify="left" if head[1] in ("target", "accel",
                                                                     "status") else "right")
        for row in suite_rows(suite):
            table.add_row(*(Text(cell) for cell in row))
        self.console.print(table)
        # Once per target and accel: a repeated suite (--repeat) has a row per run.
        for target, accel in dict.fromkeys((r["target"], r["accel"]) for r in suite["rows"]
                                           if r.get("emulated")):
            self.console.print(Text(f"{target}: " + EMULATED_BANNER.format(accel=accel),
                                    style="yellow"))

    def close(self) -> None:
        self._stop_progress()


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


class LinesRenderer(Renderer):
    """Plain text lines from a formatter (markdown, csv) on stdout; notices on stderr."""

    def __init__(self, compare_lines: Any, out: TextIO | None = None) -> None:
        self.compare_lines = compare_lines
        # sys.stdout when used, not when this module was imported (as JsonRenderer).
        self.out = out or sys.stdout

    def on_notice(self, text: str) -> None:
        print(text, file=sys.stderr)

    def compare(self, model: dict[str, Any]) -> None:
        for line in self.compare_lines(model):
            self.out.write(line + "\n")
        self.out.flush()


# --- side by side (irqlab.suite) and per-CPU lines (native, linux-guest) -----------------

SUITE_COLUMNS = [("target", "target"), ("accel", "accel"), ("status", "status")] + [
    (c.heading, c.key) for c in SUITE_TABLE]


# The widest line compare prints (issue 32: a 3-run compare had a 161-column table and
# prose lines up to 378 characters).
OUTPUT_WIDTH = 120


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


# rtla osnoise top's per-CPU columns (tools/tracing/rtla/src/osnoise_top.c): the noise
# object's keys beside their headings, then its classes' counts (HW NMI IRQ Softirq Thread).
_NOISE_COLUMNS = (("CPU", 4), ("Runtime", 10), ("Noise", 10), ("Noise/s", 10),
                  ("%CPU Aval", 10), ("Max Single", 11), ("Gaps", 8))
_NOISE_KIND_HEADINGS = {"outside": "HW", "nmi": "NMI", "irq": "IRQ", "softirq": "Softirq",
                        "thread": "Thread"}


def noise_lines(summary: dict[str, Any]) -> list[str]:
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
