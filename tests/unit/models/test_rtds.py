"""The RTDS periodic-server model and `irqlab model rtds`."""

from __future__ import annotations

import json

import pytest

from irqlab.cli.main import main
from irqlab.models.rtds import rtds_bound, sbf_ns


def test_issue_figure() -> None:
    b = rtds_bound(10_000_000, 4_000_000)
    assert b.bound_ns == 12_000_000
    assert b.bandwidth == pytest.approx(0.4)


@pytest.mark.parametrize("period,budget", [(100, 15), (30, 15), (10, 4), (7, 7)])
def test_bound_is_sbf_blackout(period: int, budget: int) -> None:
    # The bound is the last window length with zero guaranteed supply.
    b = rtds_bound(period, budget)
    assert sbf_ns(b.bound_ns, period, budget) == 0
    assert sbf_ns(b.bound_ns + 1, period, budget) == 1


@pytest.mark.parametrize("handler", [1, 15, 16, 30, 31, 100])
def test_response_bound_inverts_sbf(handler: int) -> None:
    b = rtds_bound(100, 15, handler)
    assert sbf_ns(b.response_bound_ns, 100, 15) == handler
    assert sbf_ns(b.response_bound_ns - 1, 100, 15) < handler


def test_rejects_budget_above_period() -> None:
    with pytest.raises(ValueError):
        rtds_bound(1000, 2000)


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "rtds", "--period", "10ms", "--budget", "4ms", "--json"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["type"] == "model" and line["version"] == 1
    assert line["bound_ns"] == 12_000_000


def test_cli_bad_budget_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "rtds", "--period", "1ms", "--budget", "2ms"]) == 2
    assert "exceeds period" in capsys.readouterr().err
