"""Targets as plug-ins, seen from the CLI: each target validates its own options, suites
and matrices build runs and hooks exactly as `irqlab run` does (issue 13's bugs)."""

from __future__ import annotations

import platform
import re
import subprocess
from pathlib import Path

import pytest

from irqlab.cli import cmd_run
from irqlab.cli.common import UsageError
from irqlab.cli.main import build_parser
from irqlab.cli.scenario import load_scenario, parse_cell_args
from irqlab.runner.xen import find_xen
from irqlab.targets import TARGETS, all_options
from irqlab.trace.capture import TraceHook
from tests.conftest import call_argv

REPO = Path(__file__).resolve().parents[2]


def _args(*argv: str):
    return build_parser().parse_args(["run", *argv])


def _cli(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """``irqlab run ARGV`` in this interpreter (refused before anything starts)."""
    return call_argv(["run", *argv, "--db", str(tmp_path / "t.duckdb")])


@pytest.mark.parametrize("argv,needle", [
    (["--target", "native", "--idle", "poll"], "--idle does not apply to --target native"),
    (["--target", "native", "--inject-irqoff", "2ms", "--inject-every", "10"],
     "--inject-irqoff does not apply to --target native"),
    (["--target", "linux-guest", "--idle", "poll"], "--idle does not apply"),
    (["--target", "guest", "--cpus", "0"], "--cpus does not apply to --target guest"),
    (["--target", "guest", "--xen-sched", "credit"], "it applies to xen"),
    (["--target", "xen", "--sink", "ring"], "always report through the console"),
    (["--target", "native,guest", "--xen-opt", "vwfi=native"],
     "--xen-opt does not apply to --target native, guest"),
    (["--period", "500ns"], "below 1us"),
    *[pytest.param(["--target", t, "--arch", "arm64", "--accel", "kvm"],
                   "--accel kvm cannot run an arm64 guest on this",
                   marks=pytest.mark.skipif(platform.machine() == "aarch64",
                                            reason="an arm64 host runs arm64 guests"))
      for t in ("linux-guest", "net")],
    (["--target", "native", "--load", "dom0-cpu"],
     "load:dom0-cpu needs --target xen --xen-dom0 linux; this --target native run"),
    (["--target", "xen", "--load", "dom0-cpu"], "this --target xen run has no such thing"),
])
def test_an_option_the_target_does_not_take_exits_2_naming_it(argv, needle, tmp_path):
    res = _cli(*argv, tmp_path=tmp_path)
    assert res.returncode == 2, res
    assert needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stdout == ""
    assert not (tmp_path / "t.duckdb").exists()     # refused before anything started


def test_the_minimum_period_is_the_probes():
    # probes/guest/lib/probe.c and probes/native/native.c refuse below this; so does the CLI.
    probe_c = (REPO / "probes/guest/lib/probe.c").read_text()
    assert re.search(r"#define PERIOD_NS_MIN\s+1000UL", probe_c)
    assert "opt.period_ns < 1000 ||" in (REPO / "probes/native/native.c").read_text()
    # The net target's sender sends a packet per period: its own floor is 10 us.
    assert "opt.period_ns < 10000 ||" in (REPO / "probes/native/netsend.c").read_text()
    assert {n: t.min_period_ns for n, t in TARGETS.items()} == \
        {n: 10_000 if n == "net" else 1000 for n in TARGETS}
    cfg = cmd_run.run_config(_args("--period", "2us", "--samples", "5"))
    assert cfg.period_ns == 2000


def test_each_target_of_a_suite_gets_its_own_defaults():
    if find_xen("credit2", "arm64") is None:
        pytest.skip("no cached arm64 Xen (./setup.sh fetches it)")
    native, xen = cmd_run.run_configs(_args("--target", "native,xen", "--duration", "1s"))
    assert xen.options.arch == "arm64" and xen.options.sink == "console"
    assert xen.options.xen_domain == "domU"
    assert native.target == "native" and native.options.cpus is None
    # One suite, a run per target, each with hooks of its own.
    assert native.suite == xen.suite and native.name == f"{native.suite}-native"
    assert xen.cell == {"target": "xen"}


def test_suite_options_reach_only_the_targets_that_take_them():
    native, guest = cmd_run.run_configs(_args("--target", "native,guest", "--idle", "poll",
                                              "--cpus", "0", "--load", "cpu:cpus=0"))
    assert guest.options.idle == "poll" and native.options.cpus == [0]
    assert native.hooks and guest.hooks and native.hooks[0] is not guest.hooks[0]


def test_a_suite_names_the_target_whose_rule_failed():
    with pytest.raises(UsageError, match=r"^--target guest: --inject-irqoff and"):
        cmd_run.run_configs(_args("--target", "native,guest", "--inject-every", "5"))


def test_trace_in_a_scenario_builds_the_trace_hook(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('name = "t"\n[run]\ntarget = "guest"\ntrace = true\nsamples = 10\n'
                    '[matrix]\nidle = ["hlt", "poll"]\n')
    scn = load_scenario(path)
    for cell in scn.cells():
        cfg = cmd_run.run_config(parse_cell_args(scn, cell), tmp_path / "m.duckdb")
        traces = [h for h in cfg.hooks if isinstance(h, TraceHook)]
        assert len(traces) == 1 and traces[0].db_path == tmp_path / "m.duckdb"
        assert cfg.options.idle == cell["idle"]


def test_help_lists_every_target_and_who_takes_each_option(tmp_path):
    res = _cli("--help", tmp_path=tmp_path)
    assert res.returncode == 0
    flat = " ".join(res.stdout.split())
    for name in TARGETS:
        assert f"{name} (" in flat
    for opt, names in all_options().values():
        assert f"[{', '.join(names)}]" in flat, opt.flag
