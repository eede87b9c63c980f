"""The output seam (irqlab/cli/output, issue 43): every command's stdout is a model an
exporter builds lines of and the screen writes. Checked here: the plug-in contract (a
new model type is one text formatter and one registry line; its JSON comes free), the
refusal of a format a model has no form of, that every model type with a text form has
its JSON form, and that no command writes stdout around the seam."""

from __future__ import annotations

import ast
import contextlib
import io
import json
from pathlib import Path

import pytest

from irqlab.cli.output import FORMATS, UnknownFormat, View, exporter_for, show
from irqlab.cli.output.json_lines import LINE_VERSIONS, OBJECTS, JsonLines
from irqlab.cli.output.screen import Line
from irqlab.cli.output.text import TEXT

CLI = Path(__file__).parents[2] / "irqlab" / "cli"

# Commands that write stdout themselves, and why: not models of a run or a result.
WRITES_ITS_OWN = {
    "cmd_completion.py": "shell completion scripts and the man page (roff): files",
    "cmd_serve.py": "the server's address and token as it starts, before serving",
    "cmd_matrix.py": "--dry-run streams its plan (matrix_plan.py) to stdout, up to "
                     "10^12 cells, row by row",
    "render.py": "a run's live window lines, as each window ends (not a model)",
    "main.py": "flushes stdout, and points it at /dev/null once broken (full, closed)",
    "matrix_pool.py": "a pool worker's results to its parent over a pipe: a protocol",
}


def _printed(model: dict, fmt: str, view: View | None = None) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        show(model, exporter_for(fmt, view))
    return out.getvalue()


def test_a_new_model_type_is_one_formatter_and_one_line(monkeypatch):
    def hello_text(model, view):
        return [Line(f"hello {model['who']}" + ("!" if view.verbose else ""), "green")]

    monkeypatch.setitem(TEXT, "hello", hello_text)          # the one registry line
    model = {"type": "hello", "version": 3, "who": "[bold]world[/]"}
    assert _printed(model, "text") == "hello [bold]world[/]\n"   # data, never markup
    assert _printed(model, "text", View(verbose=True)) == "hello [bold]world[/]!\n"
    # JSON lines need nothing: the model is its line, type and version first.
    (line,) = _printed(model, "json").splitlines()
    assert json.loads(line) == model and line.startswith('{"type": "hello", "version": 3')


def test_a_format_a_model_has_no_form_of_is_refused():
    with pytest.raises(UnknownFormat, match="no csv form"):
        exporter_for("csv").lines({"type": "tail"})
    with pytest.raises(UnknownFormat, match="no text form"):
        exporter_for("text").lines({"type": "no-such-model"})
    with pytest.raises(UnknownFormat, match="choose from"):
        exporter_for("yaml")
    assert set(FORMATS) == {"text", "json", "markdown", "csv"}


def test_every_model_with_json_lines_of_its_own_has_a_text_form():
    """A wrapper model (OBJECTS: its JSON lines are not the model itself) is shown to
    people too; and a model without a version is refused, not written unversioned."""
    assert set(OBJECTS) <= set(TEXT)
    with pytest.raises(KeyError, match="no version"):
        JsonLines().lines({"type": "hello"})
    assert "run" in LINE_VERSIONS       # the lines a wrapper's rows become (run_list)


def _stdout_writes(path: Path) -> list[int]:
    """Lines of ``path`` that print to stdout or use sys.stdout (a write, or handing it
    to a writer)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "print"
                and not any(k.arg == "file" for k in node.keywords)):
            found.append(node.lineno)
        elif (isinstance(node, ast.Attribute) and node.attr == "stdout"
              and isinstance(node.value, ast.Name) and node.value.id == "sys"):
            found.append(node.lineno)
    return found


def test_no_command_writes_stdout_around_the_seam():
    files = sorted(set(CLI.glob("*.py")) - {CLI / "fuzz_args.py"})
    around = {p.name: lines for p in files if (lines := _stdout_writes(p))
              and p.name not in WRITES_ITS_OWN}
    assert around == {}, "print to stdout through irqlab.cli.output.show instead"
    # The allowed ones still do (else the list above would hold stale names).
    assert all(_stdout_writes(CLI / name) for name in WRITES_ITS_OWN)
