"""The self-check's verdict (issue 32): every sample flagged injected must be found above
the threshold, through the run flow with the fake target and through `irqlab run`."""

from __future__ import annotations

import json

import pytest

from irqlab.cli.main import main
from irqlab.measure import run
from tests.unit.measure.test_run_flow import Recorder, _cfg, fake, store  # noqa: F401


def test_every_injected_sample_found_passes(fake, store):
    fake(inject_every=10)
    s = run(_cfg(samples=100, duration_ns=None), store, Recorder()).summary
    assert s["self_check"] == {"injected": 10, "found": 10, "passed": True,
                               "text": "self-check: 10 injected, 10 found: PASS"}


def test_an_injected_sample_without_its_delay_fails(fake, store):
    fake(inject_every=10, inject_misses=2)
    s = run(_cfg(samples=100, duration_ns=None), store, Recorder()).summary
    assert s["self_check"]["text"] == "self-check: 10 injected, 8 found: FAIL"


def test_a_run_without_injection_has_no_verdict(fake, store):
    fake()
    s = run(_cfg(samples=20, duration_ns=None), store, Recorder()).summary
    assert "self_check" not in s


@pytest.mark.parametrize("misses,code,verdict", [(0, 0, "PASS"), (1, 1, "FAIL")])
def test_irqlab_run_prints_the_verdict_and_exits_1_on_fail(fake, tmp_path, capsys, misses,
                                                           code, verdict):
    fake(inject_every=10, inject_misses=misses)
    db = str(tmp_path / "r.duckdb")
    assert main(["run", "--target", "fake", "--samples", "50", "--db", db]) == code
    assert f"self-check: 5 injected, {5 - misses} found: {verdict}" in capsys.readouterr().out
    assert main(["run", "--target", "fake", "--samples", "50", "--json", "--db", db]) == code
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert next(x for x in lines if x["type"] == "summary")["self_check"]["passed"] is (
        misses == 0)
