"""The explainer seam (issue 29): one registry of explainers by capture kind, the kind
each run recorded (or, for runs recorded before hooks wrote it, what explain used to
infer), and a CLI that names no kind."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from irqlab.explain.registry import EXPLAINERS, capture_kind, explainer_for
from irqlab.store.db import RunRow

CMD_EXPLAIN = Path(__file__).parents[3] / "irqlab" / "cli" / "cmd_explain.py"


def _run(target: str, hooks: dict) -> RunRow:
    return RunRow(run_id=1, name="r", target=target, arch="x86_64", accel=None,
                  emulated=None, status="ok", started_at=dt.datetime(2026, 11, 26),
                  ended_at=None, tick_hz=10**9, period_ns=10**6, threshold_ns=30_000,
                  message=None, params={}, metadata={"hooks": hooks}, summary=None)


def test_every_explainer_is_registered_under_its_own_kind() -> None:
    assert set(EXPLAINERS) == {"host-vcpu", "xentrace", "net-path", "native", "linux-guest",
                               "kvm-arm64", "noise"}
    for kind, explainer in EXPLAINERS.items():
        assert explainer.kind == kind and explainer.title
        assert set(explainer.outputs) <= {"dat", "text", "perfetto", "chrome_json"}


@pytest.mark.parametrize("target,hooks,kind", [
    ("guest", {"trace": {"kind": "native"}}, "native"),          # the recorded kind wins
    ("xen", {"xentrace": {"kind": "xentrace"}}, "xentrace"),
    ("guest", {"trace": {"file": "x"}}, "host-vcpu"),              # before 2026-11-26
    ("net", {"trace": {"path": "net"}}, "net-path"),
    ("native", {"trace": {"file": "x"}}, "native"),
    ("xen", {"xentrace": {"file": "x"}, "trace": None}, "xentrace"),
    ("guest", {}, None),
])
def test_capture_kind(target: str, hooks: dict, kind: str | None) -> None:
    assert capture_kind(_run(target, hooks)) == kind


def test_a_run_without_a_capture_goes_to_the_host_explainer_as_before() -> None:
    # Its capture_path() then says "no trace capture … record one with --trace".
    assert explainer_for(_run("guest", {})).kind == "host-vcpu"


def test_an_unknown_kind_is_one_clear_error() -> None:
    from irqlab.store import StoreError
    with pytest.raises(StoreError, match="kind 'quantum-guest'.*cannot explain"):
        explainer_for(_run("linux-guest", {"trace": {"kind": "quantum-guest"}}))


def test_a_noise_run_is_sent_to_its_summary_in_one_line() -> None:
    from irqlab.explain.seam import Request, Silent
    from irqlab.store import StoreError
    run = _run("noise", {"trace": {"kind": "noise", "file": "x"}})
    with pytest.raises(StoreError, match=r"run 1 is a noise run: .*`irqlab show 1`"):
        explainer_for(run).explain(None, run, Request(None), Silent())


def test_the_cli_names_no_capture_kind() -> None:
    text = CMD_EXPLAIN.read_text()
    for word in ("xentrace", "xen", "net", "native", "host-vcpu", "NET_PATH"):
        assert f'"{word}"' not in text and f"irqlab.{word}" not in text, word
    assert "irqlab.xen" not in text and "explain.run" not in text
