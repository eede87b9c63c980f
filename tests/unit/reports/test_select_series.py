"""The series: selector (irqlab.reports.select) on a real store."""

from __future__ import annotations

import pytest

from irqlab.reports.select import select_runs
from irqlab.store import Store, StoreError
from tests.unit.reports._runs import add_run, latencies


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.duckdb") as s:
        yield s


def _series(store: Store, name: str, sid: str, n: int) -> list[int]:
    return [add_run(store, name, latencies("ramp", 10), tags={"series": sid})
            for _ in range(n)]


def test_series_by_id_and_by_name_takes_the_latest_series(store):
    old = _series(store, "base", "base-000001", 2)
    other = _series(store, "other", "other-000002", 2)
    new = _series(store, "base", "base-000003", 3)
    add_run(store, "base", latencies("ramp", 10))          # a single run, latest of name
    ids = lambda refs: [r.run_id for r in select_runs(store, refs)]  # noqa: E731
    assert ids(["series:base-000001"]) == old
    assert ids(["series:base"]) == new          # not the single run, not the old series
    assert ids(["series:base-000001", "series:other"]) == old + other
    # A series id wins over a run name that happens to be equal.
    add_run(store, "other-000002", latencies("ramp", 10), tags={"series": "x-1"})
    assert ids(["series:other-000002"]) == other


@pytest.mark.parametrize("ref, words", [
    ("series:", "write series:ID or series:NAME"),
    ("series:nope", "no series 'nope'"),
    ("series:single", "are no series (made without --repeat)"),
])
def test_unknown_series_names_the_fix(store, ref, words):
    add_run(store, "single", latencies("ramp", 10))
    with pytest.raises(StoreError, match=words.replace("(", r"\(").replace(")", r"\)")):
        select_runs(store, [ref])
