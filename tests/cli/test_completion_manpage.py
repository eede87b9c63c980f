"""`irqlab completion bash|zsh` and `irqlab manpage`, generated from the parser; and
`matrix --format markdown` escaping its cells."""

from __future__ import annotations

import argparse
import shutil
import subprocess

import pytest

from irqlab.cli.cmd_completion import completion_script, man_lines, _parser
from irqlab.cli.output.text_matrix import matrix_markdown
from irqlab.cli.matrix import CellResult
from tests.conftest import call_argv


def _bash_complete(script: str, words: list[str]) -> list[str]:
    """What bash offers for the last word of ``irqlab WORDS``, through the script."""
    line = " ".join(["irqlab", *words])
    probe = f"""
{script}
COMP_WORDS=(irqlab {' '.join(repr(w) for w in words)})
COMP_CWORD={len(words)}
COMP_LINE={line!r}
COMP_POINT={len(line)}
_shtab_irqlab irqlab {words[-1]!r} {(['irqlab', *words])[-2]!r}
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    proc = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_bash_completion_offers_commands_and_options():
    script = completion_script("bash")
    assert "run" in _bash_complete(script, ["ru"])
    assert {"completion", "compare"} <= set(_bash_complete(script, ["comp"]))
    assert "--target" in _bash_complete(script, ["run", "--tar"])
    assert "--perfetto" in _bash_complete(script, ["explain", "--perf"])


def test_zsh_completion_names_every_command():
    script = completion_script("zsh")
    assert script.startswith("#compdef irqlab")
    for cmd in ("run", "explain", "import", "completion", "manpage"):
        assert f"{cmd}:" in script or f"'{cmd}'" in script or f"\"{cmd}\"" in script
    if shutil.which("zsh"):
        proc = subprocess.run(["zsh", "-n", "-c", script], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_cli_prints_them(tmp_path):
    # In this interpreter (call_argv): what is printed is the point, not the process
    # (4 children cost ~8 s of the quick set; start-up has tests/cli/test_startup.py).
    for args in (["completion", "bash"], ["completion", "zsh"], ["manpage"]):
        proc = call_argv(args)
        assert proc.returncode == 0 and len(proc.stdout) > 1000, proc.stderr
    assert call_argv(["completion", "bash"]).stdout == completion_script("bash")
    bad = call_argv(["completion", "fish"])
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_man_page_renders_and_documents_every_option(tmp_path):
    page = "\n".join(man_lines(_parser())) + "\n"
    assert page.startswith(".TH IRQLAB 1 ")
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed")
    path = tmp_path / "irqlab.1"
    path.write_text(page)
    proc = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    text = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", str(path)],
                          capture_output=True, text=True, timeout=60).stdout
    flat = " ".join(text.split())
    for name in ("run", "explain", "import", "report", "completion"):
        assert f"irqlab {name}" in flat
    run = _parser()._subparsers._group_actions[0].choices["run"]
    for action in run._actions:
        for flag in action.option_strings if not isinstance(
                action, argparse._HelpAction) else ():
            assert flag in flat, flag
    assert "examples:" in flat and "run: timing" in flat


def test_matrix_markdown_escapes_pipes_in_cells():
    res = CellResult({"load": "cpu:cpus=1|2", "knob": "a<b>"}, 7, "ok",
                     {"mean_ns": 10, "max_ns": 20}, ["pin=1: not applicable | here"])
    lines = matrix_markdown({"type": "matrix_results", "results": [res],
                             "keys": ["load", "knob"], "title": "t|x", "raw": False})
    rows = [x for x in lines if x.startswith("| ")]
    header, row = rows[0], rows[1]
    assert row.startswith("| cpu:cpus=1\\|2 | a&lt;b&gt; | 7 | ok |")
    # Unescaped pipes split the row into as many cells as the header has, no more.
    assert row.replace("\\|", "").count("|") == header.count("|")
    assert "not applicable \\| here" in "\n".join(lines)
