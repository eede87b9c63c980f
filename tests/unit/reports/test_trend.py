"""The series of a trend (irqlab.reports.trend) on a real store: the runs a selector
names, in time order, each with its stored summary's value."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from irqlab.reports.trend import (TrendError, build_trend, metric_field, metric_names,
                                  series_points)
from irqlab.store import Store, StoreError
from tests.unit.reports._runs import add_run

T0 = dt.datetime(2026, 11, 1, 3, 0, 0)


def _nightly(store: Store, n: int, step_at: int, sid: str,
             kernels: list[str] | None = None) -> list[int]:
    """n runs of one series, one a day, the latencies x1.5 from run ``step_at`` on."""
    rng = np.random.default_rng(11)
    ids = []
    for i in range(n):
        scale = 1.5 if i >= step_at else 1.0
        lat = np.round(rng.lognormal(np.log(5_000 * scale), 0.3, 1_000)).astype(np.int64)
        tags = {"series": sid} | ({"kernel": kernels[i]} if kernels and kernels[i] else {})
        # The summary is what a trend reads; raw samples would only slow the test.
        rid = add_run(store, "nightly", lat, tags=tags, raw=False)
        store.update_run(rid, started_at=T0 + dt.timedelta(days=i))
        ids.append(rid)
    return ids


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """series "step" (14 runs, x1.5 from the 9th), series "short" (9 runs), series
    "shuffled" (4 runs, the first started last, and one run without a summary), series
    "kernels" (5 runs tagged kernel, one not)."""
    path = tmp_path_factory.mktemp("trend") / "trend.duckdb"
    with Store(path) as st:
        ids = {"step": _nightly(st, 14, 8, "step-000001"),
               "short": _nightly(st, 9, 99, "short-000002"),
               "shuffled": _nightly(st, 4, 99, "shuffled-000003"),
               "kernels": _nightly(st, 6, 99, "kernels-000004",
                                   ["6.10.2", "6.9", "6.1", "", "6.10.2", "6.9-rt"])}
        st.update_run(ids["shuffled"][0], started_at=T0 + dt.timedelta(days=10))
        ids["no summary"] = [add_run(st, "nightly", None, tags={"series": "shuffled-000003"})]
        st.update_run(ids["no summary"][0], started_at=T0 + dt.timedelta(days=5))
    return path, ids


@pytest.fixture
def store(runs):
    with Store(runs[0], read_only=True) as st:
        yield st


def test_metric_names_are_the_tables_labels_and_keys():
    assert "p99.9" in metric_names() and "warm-max" in metric_names()
    assert metric_field("p99.9").key == "p999_ns"
    assert metric_field("P999_NS").key == "p999_ns"
    assert metric_field("warm max").key == metric_field("warm-max").key == "warm_max_ns"
    with pytest.raises(TrendError, match="unknown metric 'p99.8': choose one of min, "):
        metric_field("p99.8")


def test_points_are_the_stored_summary_values_in_start_time_order(store, runs):
    ids = runs[1]["shuffled"]
    points, skipped = series_points(store, ["series:shuffled-000003"], metric_field("max"))
    # The first run started last: time order, not run-id order.
    assert [p.run_id for p in points] == ids[1:] + ids[:1]
    assert [p.run_id for p in skipped] == runs[1]["no summary"]
    by_id = {r.run_id: r for r in store.runs()}
    # One definition of each number: the stored summary's, as `irqlab show --json` has it.
    assert [p.value_ns for p in points] == [by_id[p.run_id].summary["max_ns"] for p in points]
    assert all(isinstance(p.value_ns, int) for p in points)


def test_build_trend_finds_the_step_and_names_its_runs(store, runs):
    ids = runs[1]["step"]
    trend = build_trend(store, ["series:step-000001"], "p99.9")
    (cp,) = trend.change_points
    assert cp.index == 8 and cp.p_value <= 0.05
    head, *runs = trend.lines()[:15]
    change = trend.lines()[-1]
    assert head["type"] == "trend" and head["runs"] == 14 and head["change_points"] == 1
    assert head["scale"] == "log" and head["key"] == "p999_ns"
    assert [r["run_id"] for r in runs] == ids
    assert [r["change_point"] for r in runs] == [i == 8 for i in range(14)]
    assert change["type"] == "trend_change" and change["run_id"] == ids[8]
    assert change["before_run_id"] == ids[7]
    values = [r["value_ns"] for r in runs]
    assert change["mean_before_ns"] == round(np.mean(values[:8]))
    assert change["mean_after_ns"] == round(np.mean(values[8:]))
    assert change["ratio"] == pytest.approx(np.mean(values[8:]) / np.mean(values[:8]))


def test_too_few_runs_and_unknown_selectors_are_said(store):
    with pytest.raises(TrendError, match="9 runs with a p99.9 value in series:short-000002: "
                                         "no change can be found with fewer than 10 runs"):
        build_trend(store, ["series:short-000002"], "p99.9")
    assert len(build_trend(store, ["series:short-000002"], "p99.9", min_size=4).points) == 9
    with pytest.raises(StoreError, match="no series 'nope'"):
        build_trend(store, ["series:nope"], "p99.9")


def test_by_tag_orders_by_the_tag_s_natural_order_then_time(store, runs):
    ids = runs[1]["kernels"]
    points, skipped = series_points(store, ["series:kernels-000004"], metric_field("p50"),
                                    by_tag="kernel")
    # 6.1 < 6.9 < 6.9-rt < 6.10.2 (twice: in start order); the untagged run is left out.
    assert [(p.run_id, p.tag_value) for p in points] == [
        (ids[2], "6.1"), (ids[1], "6.9"), (ids[5], "6.9-rt"), (ids[0], "6.10.2"),
        (ids[4], "6.10.2")]
    assert [p.run_id for p in skipped] == [ids[3]]
    trend = build_trend(store, ["series:kernels-000004"], "p50", by_tag="kernel",
                        min_size=2)
    head, first = trend.lines()[:2]
    assert head["order"] == "tag:kernel" and head["skipped_run_ids"] == [ids[3]]
    assert first["tag_value"] == "6.1"
    assert build_trend(store, ["series:step-000001"], "p50").lines()[0]["order"] == \
        "started_at"
