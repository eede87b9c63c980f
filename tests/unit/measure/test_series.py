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
