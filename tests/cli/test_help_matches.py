"""Help that matches behaviour (issue 32): the man page names every IRQLAB_* variable
irqlab reads and every command's positional arguments; completion offers --target
values, --load kinds, --knob keys and the store's run names; xentrace's synopsis says
when --tsc-hz is required."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from irqlab.cli.cmd_completion import ENVIRONMENT, _parser, completion_script, man_lines
from irqlab.store import Store
from tests.cli.test_completion_manpage import _bash_complete
from tests.unit.reports._runs import add_run, latencies

ROOT = Path(__file__).parents[2]


def _env_vars_in_code() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "irqlab").rglob("*.py"):
        found |= set(re.findall(r"\bIRQLAB_[A-Z0-9_]+\b", path.read_text()))
    return found


def test_man_page_lists_every_environment_variable_the_code_reads():
    page = "\n".join(man_lines(_parser()))
    env = page[page.index(".SH ENVIRONMENT"):page.index(".SH EXIT STATUS")]
    listed = set(re.findall(r"\\fB(IRQLAB_[A-Z0-9_]+)\\fR", env.replace("\\-", "-")))
    in_code = _env_vars_in_code()
    assert len(in_code) >= 11
    assert in_code - listed == set(), "add them to cmd_completion.ENVIRONMENT"
    assert listed == {var for var, _ in ENVIRONMENT}


def test_man_page_synopsis_shows_positional_arguments():
    page = man_lines(_parser())
    synopsis = page[page.index(".SH SYNOPSIS"):page.index(".SH DESCRIPTION")]
    text = " ".join(synopsis).replace("\\-", "-")
    for command, positional in (("show", "RUN"), ("compare", "RUN [RUN ...]"),
                                ("tag", "KEY=VALUE [KEY=VALUE ...]"), ("xentrace", "FILE")):
        assert re.search(rf"\.B irqlab {command} \.RI \[ options \] (\.I \S.*? )?"
                         rf"\.I {re.escape(positional)} ", text), command


def test_completion_offers_targets_loads_knobs():
    script = completion_script("bash")
    assert set(_bash_complete(script, ["run", "--target", ""])) >= {
        "native", "guest", "linux-guest", "xen", "all"}
    assert "hackbench:" in _bash_complete(script, ["run", "--load", "hack"])
    assert _bash_complete(script, ["run", "--knob", "halt_poll_g"]) == ["halt_poll_global="]
    zsh = completion_script("zsh")
    assert "native" in zsh and "(irqlab completion --run-names >/dev/null 2>&1 &)" in zsh


def _tab(script: str, words: list[str], env: dict[str, str]) -> list[str]:
    """What bash offers for the last of ``irqlab WORDS`` (as _bash_complete), in ``env``."""
    line = " ".join(["irqlab", *words])
    probe = (f"{script}\nCOMP_WORDS=(irqlab {' '.join(words)})\nCOMP_CWORD={len(words)}\n"
             f"COMP_LINE='{line}'\nCOMP_POINT={len(line)}\n"
             f"_shtab_irqlab irqlab {words[-1]} {(['irqlab', *words])[-2]}\n"
             "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    got = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60,
                         env=env)
    assert got.returncode == 0, got.stderr
    return got.stdout.split()


def _wait_for(path: Path, newer_than: int = -1) -> None:
    """Until the background refresh has (re)written ``path`` (at most 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_mtime_ns > newer_than:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} not written")


@pytest.mark.slow
def test_completion_offers_run_names_from_the_store(tmp_path):
    db = tmp_path / "irqlab.duckdb"
    names_file = tmp_path / "irqlab.duckdb.run-names"
    with Store(db) as st:
        add_run(st, "baseline-rt", latencies("ramp", 10))
        add_run(st, "loaded-rt", latencies("ramp", 10))
    # `irqlab` on PATH is this checkout's (the script calls it to refresh the names).
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "irqlab").write_text(f"#!/bin/sh\nexec {sys.executable} -m irqlab.cli.main "
                                   f"\"$@\"\n")
    (bindir / "irqlab").chmod(0o755)
    env = {**os.environ, "IRQLAB_DB": str(db), "PATH": f"{bindir}:{os.environ['PATH']}"}
    script = completion_script("bash")
    # The first TAB finds no names file: it offers nothing and has it written in the
    # background, without waiting for irqlab; the next TAB offers the names.
    assert _tab(script, ["show", "base"], env) == []
    _wait_for(names_file)
    assert names_file.read_text().split() == ["loaded-rt", "baseline-rt"]
    assert _tab(script, ["show", "base"], env) == ["baseline-rt"]
    assert set(_tab(script, ["compare", "baseline-rt", ""], env)) == {"baseline-rt",
                                                                       "loaded-rt"}
    # A new run makes the store newer than the file: a TAB has it rewritten.
    written = names_file.stat().st_mtime_ns
    time.sleep(0.01)
    with Store(db) as st:
        add_run(st, "after", latencies("ramp", 10))
    _tab(script, ["show", "a"], env)
    _wait_for(names_file, written)
    assert _tab(script, ["show", "a"], env) == ["after"]
    # `irqlab completion --run-names` prints them (and writes the file when stale).
    names = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "completion",
                            "--run-names"], capture_output=True, text=True, env=env,
                           timeout=60)
    assert names.stdout.split() == ["after", "loaded-rt", "baseline-rt"]
    # No store: nothing offered, nothing said, no file.
    none_env = {**env, "IRQLAB_DB": str(tmp_path / "absent.duckdb")}
    assert _tab(script, ["show", ""], none_env) == []
    none = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "completion",
                           "--run-names"], capture_output=True, text=True, timeout=60,
                          env=none_env)
    assert (none.returncode, none.stdout, none.stderr) == (0, "", "")
    assert not (tmp_path / "absent.duckdb.run-names").exists()


def test_xentrace_synopsis_marks_tsc_hz_required_for_plain_files():
    sub = _parser()._subparsers._group_actions[0].choices["xentrace"]
    usage = sub.format_usage()
    assert "--tsc-hz HZ FILE" in usage and "--tsc-hz required" in usage
    assert "[--tsc-hz HZ] CAPTURE" in usage
    # ... as the command behaves on a plain file (recorded by xentrace under TCG).
    plain = ROOT / "tests" / "fixtures" / "xen" / "dom0-cpu.xentrace.xz"
    proc = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "xentrace", str(plain)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "a plain xentrace file): give --tsc-hz HZ" in proc.stderr
