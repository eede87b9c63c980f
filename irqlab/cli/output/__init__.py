"""The output seam: every command's output goes model -> exporter -> screen.

A command builds a *model* (a dict whose ``type`` names it: the JSON line it is, or a
wrapper such as ``run_list``) and hands it to ``show`` with the exporter of the format
asked for. An *exporter* is one format with one method, ``lines(model) -> blocks``, as
hyperfine's exporters are one trait with one method; it builds and returns, never
writes. The *screen* (screen.py) is the one writer: it writes the blocks to stdout.

Formats (FORMATS): ``text`` (people: text.py, a formatter per model type, TEXT),
``json`` (versioned JSON lines: json_lines.py, every model), ``markdown`` and ``csv``
(documents.py: the models that have them). JUnit and HTML are files, not stdout: their
builders are irqlab.reports.check.junit_xml and irqlab.reports.html.

Plugging in: a new command builds its model with a ``type`` (and a ``version``, or a
line in json_lines.LINE_VERSIONS) and calls ``show(model, exporter_for(fmt, view))``;
its JSON is then free, and its text is one formatter ``(model, View) -> blocks`` and one
line in text.TEXT. A new format is one class with ``lines`` and one line in FORMATS.
A run's live events (its start, windows, progress) are not a model: they go to the
run's Renderer (cli/render.py), and its summary then comes here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from irqlab.cli.output.seam import OUTPUT_WIDTH, Exporter, UnknownFormat, View

if TYPE_CHECKING:
    from irqlab.cli.output.screen import Screen

__all__ = ["FORMATS", "OUTPUT_WIDTH", "Exporter", "UnknownFormat", "View", "exporter_for",
           "json_or_text", "show"]


def _text(view: View) -> Exporter:
    # Each format's module imported when asked for (a --json command loads no rich).
    from irqlab.cli.output.text import Text
    return Text(view)


def _json(view: View) -> Exporter:
    from irqlab.cli.output.json_lines import JsonLines
    return JsonLines()


def _document(fmt: str) -> Callable[[View], Exporter]:
    def make(view: View) -> Exporter:
        from irqlab.cli.output.documents import Document
        return Document(fmt)
    return make


# Format name -> its exporter, made for a View: a new format is one line here.
FORMATS: dict[str, Callable[[View], Exporter]] = {
    "text": _text, "json": _json, "markdown": _document("markdown"), "csv": _document("csv"),
}


def exporter_for(fmt: str, view: View | None = None) -> Exporter:
    """The exporter of format ``fmt`` (one of FORMATS)."""
    try:
        make = FORMATS[fmt]
    except KeyError:
        raise UnknownFormat(f"no output format {fmt!r}: choose from "
                            f"{', '.join(FORMATS)}") from None
    return make(view or View())


def json_or_text(args: Any, view: View | None = None) -> Exporter:
    """The exporter of a command with ``--json``: JSON lines with it, text without."""
    return exporter_for("json" if getattr(args, "json", False) else "text", view)


def show(model: dict[str, Any], exporter: Exporter, screen: Screen | None = None) -> None:
    """The one way a command writes its output: the exporter builds, the screen writes."""
    from irqlab.cli.output.screen import Screen
    (screen or Screen()).write(exporter.lines(model))
