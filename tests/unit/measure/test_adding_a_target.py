"""Adding a target is one module in irqlab/targets/ plus one registry line
(docs/design.md, "Adding a target"): the fake target (fake_target.py, not in the
package) is registered through that same registry, TARGETS, and nothing else, and the
CLI then takes its options, runs it and reports its doctor checks."""

from __future__ import annotations

import argparse
import json

import pytest

from irqlab.cli import cmd_doctor
from irqlab.cli.main import main
from irqlab.cli.scenario import _run_parser
from irqlab.store import Store
from irqlab.targets import TARGETS, all_options

from .fake_target import FakeTarget


@pytest.fixture
def registered(monkeypatch):
    target = FakeTarget()
    monkeypatch.setitem(TARGETS, "fake", target)     # the one registry line
    yield target
    target.close()


def test_its_options_join_the_cli(registered):
    opt, owners = all_options()["fake_behaviour"]
    assert opt.flag == "--fake-behaviour" and owners == ["fake"]


def test_irqlab_run_measures_it(registered, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path / "state"))
    db = tmp_path / "runs.duckdb"
    code = main(["run", "--target", "fake", "--fake-behaviour", "ok", "--samples", "30",
                 "--period", "1ms", "--db", str(db), "--json"])
    assert code == 0, capsys.readouterr().err
    with Store(db, read_only=True) as store:
        (row,) = store.runs()
        assert row.status == "ok" and store.sample_count(row.run_id) == 30


def test_irqlab_doctor_says_its_checks(registered, capsys):
    cmd_doctor.run(argparse.Namespace(db=None, json=True))
    checks = [json.loads(line)["check"] for line in capsys.readouterr().out.splitlines()]
    assert "fake" in checks
    # Target checks come after the host-wide ones and before the store's.
    assert checks.index("fast_path") < checks.index("fake") < len(checks) - 1


def test_a_matrix_plans_it_with_its_own_boot_estimate(registered, tmp_path, monkeypatch,
                                                      capsys):
    """The boot estimate is the target's (Target.boot_estimate_s): cli/ names none."""
    monkeypatch.setattr(type(registered), "boot_estimate_s", 7.0)
    toml = tmp_path / "fake.toml"
    toml.write_text('name = "fake"\n[run]\ntarget = "fake"\nperiod = "1ms"\n'
                    'duration = "3s"\n[matrix]\nwarmup = [0]\n')
    # The matrix's `irqlab run` parser is built once a process: built before the fake
    # was registered (another test on this worker), it would lack the fake's options.
    _run_parser.cache_clear()
    try:
        code = main(["matrix", str(toml), "--dry-run", "--format", "json"])
    finally:
        _run_parser.cache_clear()
    assert code == 0, capsys.readouterr().err
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["target"], row["boot_estimate_s"], row["estimated_s"]) == ("fake", 7.0, 10.0)


def test_bench_noise_offers_it_when_it_says_it_suits(registered, monkeypatch):
    from irqlab.cli.main import build_parser

    argv = ["bench", "noise", "--target", "fake"]
    with pytest.raises(SystemExit):               # not offered: an invalid choice
        build_parser(only="bench").parse_args(argv)
    monkeypatch.setattr(type(registered), "noise_bench", True)
    assert build_parser(only="bench").parse_args(argv).target == "fake"
