"""Start-up (issue 28, docs/design.md "Start-up"): a command imports only what it uses.

Behaviour, not timing: each command runs in a fresh interpreter the way the `irqlab`
console script runs it, and writes the names in sys.modules when it exits (an atexit
hook registered before irqlab is imported, so it runs last). A heavy library a command
does not need must be absent.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from irqlab.cli.main import COMMANDS, build_parser
from irqlab.store import Store
from irqlab.store.interface import NewRun

# What the console script runs (pyproject.toml [project.scripts]: irqlab.cli.main:main),
# after an exit hook that writes sys.modules to $MODULES_OUT.
ENTRY = ("import atexit, os, sys\n"
         "atexit.register(lambda: open(os.environ['MODULES_OUT'], 'w').write("
         "'\\n'.join(sorted(sys.modules))))\n"
         "from irqlab.cli.main import main\n"
         "sys.exit(main())")
HEAVY = {"numpy", "duckdb", "pyarrow", "pandas", "matplotlib"}


def _run(args: list[str], tmp_path: Path) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules loaded when a fresh `irqlab ARGS` exits, and the process (exit 0)."""
    out = tmp_path / "modules.txt"
    proc = subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "MODULES_OUT": str(out)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = set(out.read_text().split())
    assert "irqlab.cli.main" in modules          # the hook saw irqlab's process
    return modules, proc


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["-h"]])
def test_version_and_help_import_no_command_and_nothing_heavy(args, tmp_path):
    modules, proc = _run(args, tmp_path)
    assert ("irqlab 0." in proc.stdout) if args == ["--version"] else (
        "{run,list,show," in proc.stdout)
    assert not _tops(modules) & (HEAVY | {"rich"})
    assert not [m for m in modules if m.startswith(("irqlab.cli.cmd_", "irqlab.targets",
                                                    "irqlab.store.db"))]


def test_a_command_s_help_imports_that_command_only(tmp_path):
    modules, proc = _run(["list", "--help"], tmp_path)
    assert "--db" in proc.stdout
    assert "irqlab.cli.cmd_runs" in modules
    assert {m for m in modules if m.startswith("irqlab.cli.cmd_")} == {"irqlab.cli.cmd_runs"}
    assert not _tops(modules) & HEAVY


def test_the_completion_call_imports_no_store_arrow_or_pandas(tmp_path):
    """`irqlab completion bash` builds the whole parser: every command registers its
    options. numpy is still imported (the targets declare their sample readers, which
    use it; left for the targets' own change), nothing else heavy."""
    modules, proc = _run(["completion", "bash"], tmp_path)
    assert "_shtab_irqlab" in proc.stdout
    assert not _tops(modules) & (HEAVY - {"numpy"} | {"rich"})


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_script_never_runs_irqlab_on_tab(shell, tmp_path):
    """The script is static (shtab): a Tab press runs shell functions, never waits for
    irqlab, so the start-up time of `irqlab completion` is paid once, when the script is
    made. The one call left is run names' refresh, in the background when the store
    changed (cmd_completion.RUN_NAMES: the TAB reads the file beside the store)."""
    _modules, proc = _run(["completion", shell], tmp_path)
    invokes = re.compile(r"(^|[;&|`(]|\$\()\s*irqlab(\s|$)")
    # Help texts (zsh) are quoted strings, not commands: left out before looking.
    unquoted = re.sub(r"'[^']*'|\"(\\.|[^\"\\])*\"", "''", proc.stdout)
    background = "(irqlab completion --run-names >/dev/null 2>&1 &)"
    assert background in unquoted
    unquoted = unquoted.replace(background, "")
    code = [ln for ln in unquoted.splitlines() if not ln.lstrip().startswith("#")]
    assert len(code) > 50
    assert not [ln for ln in code if invokes.search(ln)]


def _small_store(db: Path) -> None:
    with Store(db) as st:
        rid = st.create_run(NewRun("startup", "guest", {"period_ns": 1_000_000},
                                   {"host": {"hostname": "h", "kernel": "6.1"}}))
        st.add_windows(rid, [{"index": 0, "start_s": 0.0, "samples": 3, "mean_ns": 1000,
                              "stddev_ns": 10, "min_ns": 900, "max_ns": 1100,
                              "above_threshold": 0, "global_min_ns": 900,
                              "global_max_ns": 1100}])
        st.finish_run(rid, "ok", None)


@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["show", "startup"],
                                  ["show", "startup", "--json"]])
def test_list_and_show_read_the_store_without_numpy_arrow_pandas(tmp_path, args):
    db = tmp_path / "s.duckdb"
    _small_store(db)
    modules, proc = _run([*args, "--db", str(db)], tmp_path)
    assert "startup" in proc.stdout
    assert "duckdb" in modules                  # the store was really read
    assert not _tops(modules) & (HEAVY - {"duckdb"})
    # Into a pipe, tables and lines of plain text are drawn without rich (render.py's
    # PlainTable); --json needs no tables at all.
    assert "rich" not in _tops(modules)


def test_list_with_forced_colour_still_goes_through_rich(tmp_path):
    """FORCE_COLOR makes rich treat a pipe as a terminal (bold headings): the plain
    drawing must leave such output to rich."""
    db = tmp_path / "s.duckdb"
    _small_store(db)
    out = tmp_path / "modules.txt"
    proc = subprocess.run([sys.executable, "-c", ENTRY, "list", "--db", str(db)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MODULES_OUT": str(out), "FORCE_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "\x1b[1m" in proc.stdout and "startup" in proc.stdout
    assert "rich" in _tops(set(out.read_text().split()))


def test_the_lazy_parser_lists_every_command_as_the_full_one():
    """main.COMMANDS repeats each command's one-line help (so `irqlab --help` needs no
    command module): it must say what the command's own add_parser(help=...) says."""
    assert build_parser(every=False).format_help() == build_parser().format_help()
    assert [c.name for c in COMMANDS] == list(_subparsers(build_parser()))


@pytest.mark.parametrize("others", [True, False])
def test_a_lazily_built_command_parses_as_the_full_parser_does(others):
    argv = ["check", "1", "--max", "30us", "--p99", "20us"]
    assert build_parser(only="check", every=False, others=others).parse_args(argv) == \
        build_parser().parse_args(argv)


def test_help_before_a_command_lists_every_command(tmp_path):
    """`irqlab list ...` builds list's parser alone; `irqlab --help list` still shows the
    top-level help with every command."""
    _modules, proc = _run(["--help", "list"], tmp_path)
    assert "{run,list,show," in proc.stdout


def _subparsers(parser) -> dict:
    import argparse

    return next(a.choices for a in parser._actions
                if isinstance(a, argparse._SubParsersAction))
