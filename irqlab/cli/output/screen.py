"""The screen: where the CLI writes what an exporter built (the output seam's one writer).

An exporter returns blocks; the screen writes them to stdout, each as the human renderer
always wrote it:
- ``str``: a line written as it is (JSON lines, markdown, csv, text already made
  printable);
- ``Line``: a line of text for people: rich's console prints it (control characters
  escaped, a style on a terminal), or the screen itself where rich would print the same
  characters (issue 28);
- ``PlainTable``: a table drawn as rich's ``Table()`` would draw it;
- ``Rich``: any other rich renderable (compare's fitted table), printed by rich at a
  width that keeps its numbers whole.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Iterable, Union

from irqlab.cli.safe_text import EscapeControls

if TYPE_CHECKING:
    from rich.console import Console

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


@dataclass(frozen=True)
class Line:
    """A line for people. ``style`` None: printed as ``console.print(text,
    markup=False)``; a style ("" for none): as ``Text(text, style=style)`` (data, never
    markup); with ``markup``, as the markup ``[style]text[/]``."""

    text: str
    style: str | None = None
    markup: bool = False


@dataclass(frozen=True)
class Rich:
    """A rich renderable printed at the console's width, widened to ``min_width`` (its
    numbers never wrap) and, with ``max_width``, narrowed to that first."""

    renderable: Any
    min_width: int = 0
    max_width: int | None = None


@dataclass(frozen=True)
class Fixed:
    """Renderables printed by a console of their own, ``width`` columns wide, long lines
    wrapped (not the screen's console: matrix's results keep their 120 columns on any
    terminal); a string is printed as ``console.print(text, markup=False)``, anything
    else as ``console.print(renderable)``."""

    renderables: tuple[Any, ...]
    width: int


Block = Union[str, Line, PlainTable, Rich, Fixed]


class Screen:
    """Writes blocks to stdout: the only place a command's output is written."""

    def __init__(self, console: Console | None = None) -> None:
        self._console = console
        # Not a terminal (a pipe, a file): what list/show print is written here, without
        # rich (~40 ms of their start, issue 28), wherever rich would print the same
        # characters (PlainTable); anything else goes to rich.
        self._plain = console is None and plain_output()

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

    def write(self, blocks: Iterable[Block]) -> None:
        """Each block, in order; verbatim lines in one write, flushed."""
        verbatim: list[str] = []
        for block in blocks:
            if isinstance(block, str):
                verbatim.append(block)
                continue
            if verbatim:
                _write_plain(verbatim)
                verbatim = []
            if isinstance(block, Line):
                self._print(block.text, block.style, block.markup)
            elif isinstance(block, PlainTable):
                self._print_table(block)
            elif isinstance(block, Fixed):
                _print_fixed(block)
            else:
                self._print_rich(block)
        if verbatim:
            _write_plain(verbatim)

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

    def _print_rich(self, block: Rich) -> None:
        c = self.console
        if not block.min_width and block.max_width is None:
            c.print(block.renderable)
            return
        width = c.width
        # A narrow terminal wraps the lines instead of squeezing numbers.
        c.width = max(min(width, block.max_width) if block.max_width else width,
                      block.min_width)
        try:
            c.print(block.renderable)
        finally:
            c.width = width


def _print_fixed(block: Fixed) -> None:
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=False, width=block.width)
    for renderable in block.renderables:
        if isinstance(renderable, str):
            console.print(renderable, markup=False)
        else:
            console.print(renderable)
