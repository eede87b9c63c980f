"""Replicates (irqlab.suite): --repeat's series, interleaving and Ctrl-C, with the fake
target (no QEMU, a real ring and a real store)."""

from __future__ import annotations

import os
import re
import signal
from typing import Any

import pytest

from irqlab.measure import RunConfig, config_for_target
from irqlab.suite import interleave, new_series_id, run_suite
from irqlab.store import Store
from irqlab.targets import TARGETS
from tests.unit.measure.fake_target import FakeTarget

PERIOD_NS = 1_000_000


class Quiet:
    """An Observer; ``on_started`` may act (send SIGINT) at the start of run k."""

    def __init__(self, interrupt_run: int | None = None) -> None:
        self.started = 0
        self.interrupt_run = interrupt_run

    def on_started(self, info: dict[str, Any]) -> None:
        self.started += 1
        if self.started == self.interrupt_run:
            os.kill(os.getpid(), signal.SIGINT)

    def on_window(self, window, line):
        pass

    def on_progress(self, fraction, detail):
        pass

    def on_notice(self, text):
        pass


@pytest.fixture
def fake(monkeypatch):
    target = FakeTarget()
    monkeypatch.setitem(TARGETS, "fake", target)
    yield target
    target.close()


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.duckdb") as s:
        yield s


def _cfg(name: str) -> RunConfig:
    return config_for_target("fake", {}, period_ns=PERIOD_NS, samples=20,
                                duration_ns=None, window_ns=10 * PERIOD_NS, name=name)


def test_interleave_is_round_robin():
    assert interleave([["a1", "a2", "a3"], ["b1", "b2", "b3"]]) == \
        ["a1", "b1", "a2", "b2", "a3", "b3"]
    # A configuration with fewer runs left (a resumed matrix) drops out of later rounds.
    assert interleave([["a2", "a3"], ["b1", "b2", "b3"], []]) == \
        ["a2", "b1", "a3", "b2", "b3"]


def test_series_id_is_safe_and_unique():
    ids = {new_series_id("wfi-vs-poll/idle=hlt,load=cpu:cpus=1") for _ in range(50)}
    assert len(ids) == 50
    for sid in ids:
        assert re.fullmatch(r"[A-Za-z0-9._-]+", sid), sid
        assert sid.startswith("wfi-vs-poll-idle-hlt-load-cpu-cpus-1-")


def test_two_configurations_repeated_interleave_and_are_stored_as_series(fake, store):
    renewed: list[str] = []

    def renew(cfg: RunConfig) -> RunConfig:
        renewed.append(cfg.name)
        return cfg

    suite = run_suite([_cfg("A"), _cfg("B")], store, Quiet(), repeat=3, renew=renew)
    assert suite.status == "ok"
    runs = store.runs()
    # ABABAB: round 1 of every configuration, then round 2, then round 3.
    assert [r.name for r in runs] == ["A", "B", "A", "B", "A", "B"]
    assert [r.status for r in runs] == ["ok"] * 6
    sa, sb = suite.series
    assert sa.id != sb.id and (sa.name, sb.name) == ("A", "B")
    for series, name in ((sa, "A"), (sb, "B")):
        mine = [r for r in runs if r.name == name]
        assert series.run_ids == [r.run_id for r in mine]
        assert series.statuses == ["ok"] * 3
        assert [r.tags["series"] for r in mine] == [series.id] * 3
        assert [r.metadata["series"] for r in mine] == [
            {"id": series.id, "index": i, "count": 3} for i in (1, 2, 3)]
        assert "metadata" not in mine[0].params     # not a parameter
    # Every run after each configuration's first gets hooks of its own.
    assert sorted(renewed) == ["A", "A", "B", "B"]
    assert [row["target"] for row in suite.rows()] == ["fake"] * 6
    obj = sa.json_object()
    assert (obj["type"], obj["version"], obj["id"], obj["name"], obj["count"]) == \
        ("series", 1, sa.id, "A", 3)
    assert obj["run_ids"] == sa.run_ids and obj["statuses"] == ["ok"] * 3


def test_repeat_1_is_no_series(fake, store):
    suite = run_suite([_cfg("A")], store, Quiet())
    assert suite.status == "ok" and suite.series == []
    (row,) = store.runs()
    assert "series" not in row.tags and "series" not in row.metadata


def test_ctrl_c_stops_the_whole_series_and_keeps_what_is_stored(fake, store):
    suite = run_suite([_cfg("A"), _cfg("B")], store, Quiet(interrupt_run=3), repeat=3)
    assert suite.status == "interrupted"
    runs = store.runs()
    assert [(r.name, r.status) for r in runs] == [("A", "ok"), ("B", "ok"),
                                                  ("A", "interrupted")]
    assert suite.series[0].statuses == ["ok", "interrupted"]
    assert suite.series[1].statuses == ["ok"]
    assert "(ok 1)" in suite.series[0].line(suite.series[1:])


def test_until_stops_after_a_whole_round_and_the_suite_says_so(fake, store):
    """--repeat auto (issue 45): run_suite asks `until` after each whole round; when it
    says enough the suite ends there, ok, with that many runs planned."""
    asked: list[int] = []

    def until(suite, rounds: int) -> bool:
        asked.append(rounds)
        assert len(suite.results) == 2 * rounds          # only after whole rounds
        return rounds == 3

    suite = run_suite([_cfg("A"), _cfg("B")], store, Quiet(), repeat=6, until=until)
    assert asked == [1, 2, 3] and suite.status == "ok" and suite.repeat == 3
    assert [s.count for s in suite.series] == [3, 3]
    assert [len(s.run_ids) for s in suite.series] == [3, 3]
    assert len(store.runs()) == 6
    # Never enough: the cap, asked once more after the last round.
    asked.clear()
    capped = run_suite([_cfg("A"), _cfg("B")], store, Quiet(), repeat=2,
                       until=lambda s, r: asked.append(r) or False)
    assert asked == [1, 2] and capped.repeat == 2 and capped.status == "ok"


def test_auto_until_judges_the_series_as_compare_does():
    """The CLI's stopping rule on run summaries: two series whose per-run p50 and p99.9
    differ by x2 are decided (`different`) at the third round, not before."""
    from types import SimpleNamespace

    from irqlab.cli.cmd_run import _auto_until
    from irqlab.suite import Series, SuiteResult

    until = _auto_until(6)
    suite = SuiteResult("s", ["a", "b"], repeat=6)
    suite.series = [Series("a-1", "a", 6), Series("b-1", "b", 6)]
    for k in range(1, 4):
        for j, (series, level) in enumerate(zip(suite.series, (1.0, 2.0))):
            rid = 2 * k + j
            summary = {"p50_ns": 20_000 * level * (1 + 0.01 * k),
                       "p999_ns": 90_000 * level * (1 - 0.01 * k)}
            suite.results.append(SimpleNamespace(run_id=rid, summary=summary))
            series.run_ids.append(rid)
        stop = until(suite, k)
        assert stop is (k == 3)
    assert suite.auto["decided"] and suite.auto["runs"] == 3 and suite.auto["looks"] == 4
    assert suite.auto["verdicts"] == [{"series": "b-1", "verdict": "different"}]
