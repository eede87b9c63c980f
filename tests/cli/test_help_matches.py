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
    assert "native" in zsh and "irqlab completion --run-names" in zsh


def test_completion_offers_run_names_from_the_store(tmp_path):
    db = tmp_path / "irqlab.duckdb"
    with Store(db) as st:
        add_run(st, "baseline-rt", latencies("ramp", 10))
        add_run(st, "loaded-rt", latencies("ramp", 10))
    env = {**os.environ, "IRQLAB_DB": str(db), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    names = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "completion",
                            "--run-names"], capture_output=True, text=True, env=env,
                           timeout=60)
    assert names.returncode == 0 and names.stdout.split() == ["loaded-rt", "baseline-rt"]
    # The script asks irqlab when TAB is pressed: `irqlab` on PATH is this checkout's.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "irqlab").write_text(f"#!/bin/sh\nexec {sys.executable} -m irqlab.cli.main "
                                   f"\"$@\"\n")
    (bindir / "irqlab").chmod(0o755)
    script = completion_script("bash")
    line = "irqlab show base"
    probe = (f"{script}\nCOMP_WORDS=(irqlab show base)\nCOMP_CWORD=2\nCOMP_LINE='{line}'\n"
             f"COMP_POINT={len(line)}\n_shtab_irqlab irqlab base show\n"
             "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    got = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60,
                         env={**env, "PATH": f"{bindir}:{os.environ['PATH']}"})
    assert got.stdout.split() == ["baseline-rt"], got.stderr
    # A new run is offered at the next TAB (the cache is older than the store).
    time.sleep(0.01)
    with Store(db) as st:
        add_run(st, "after", latencies("ramp", 10))
    again = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "completion",
                            "--run-names"], capture_output=True, text=True, env=env,
                           timeout=60)
    assert again.stdout.split()[0] == "after"
    # No store: nothing offered, nothing said.
    none = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "completion",
                           "--run-names"], capture_output=True, text=True, timeout=60,
                          env={**env, "IRQLAB_DB": str(tmp_path / "absent.duckdb")})
    assert (none.returncode, none.stdout, none.stderr) == (0, "", "")


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
