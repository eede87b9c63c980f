"""Run data for reports: exact percentiles from raw samples, summary fallback, selectors."""

import numpy as np
import pytest

from irqlab.reports.data import FROM_RAW, FROM_SUMMARY, figures, load_run
from irqlab.reports.select import select_runs
from irqlab.store import StoreError
from irqlab.store.interface import NewRun


def test_percentiles_are_exact_nearest_rank_from_raw_samples(store):
    run = load_run(store, store.resolve("base"))
    f = figures(run)
    assert f["percentiles_from"] == FROM_RAW
    # ramp 1..10000: nearest rank of q is ceil(q * n).
    assert (f["min_ns"], f["p50_ns"], f["p99_ns"], f["p999_ns"], f["p9999_ns"],
            f["max_ns"]) == (1, 5000, 9900, 9990, 9999, 10000)
    vals = np.arange(1, 10_001)
    for key, q in (("p50_ns", .5), ("p99_ns", .99), ("p999_ns", .999)):
        assert f[key] == int(np.quantile(vals, q, method="inverted_cdf"))


def test_without_raw_samples_the_summary_is_used_and_said(store):
    f = figures(load_run(store, store.resolve("summary-only")))
    assert f["percentiles_from"] == FROM_SUMMARY
    assert f["p50_ns"] == 5023   # the histogram's value (<= 1/128 above the exact 5000)


def test_above_threshold_follows_the_live_rule_and_an_override(store):
    run = load_run(store, store.resolve("elsewhere"))   # threshold 5 us, ramp 1..10000
    assert figures(run)["above_threshold"] == 5000 == run.row.summary["above_threshold"]
    f = figures(run, threshold_ns=9_000)
    assert (f["above_threshold"], f["above_threshold_pct"]) == (1000, 10.0)


def test_signed_latency_across_the_top_bit_of_the_counter(tmp_path):
    from irqlab.samples.record import RECORD_DTYPE
    from irqlab.store import Store
    with Store(tmp_path / "x.duckdb") as st:
        rid = st.create_run(NewRun("wrap", "guest", {}, {}))
        rec = np.zeros(3, RECORD_DTYPE)
        rec["deadline_tick"] = [2**63 - 1, 2**63, 2**64 - 5]
        rec["entry_tick"] = rec["deadline_tick"] + np.array([7, 8, 3], dtype=np.uint64)
        rec["entry_tick"][0] -= 9   # negative latency (-2)
        st.add_samples(rid, rec)
        run = load_run(st, st.resolve("wrap"))
    assert run.latency_tick.tolist() == [-2, 8, 3]


def test_selectors_by_tag_suite_id_and_name_keep_order_without_duplicates(store):
    ids = [r.run_id for r in select_runs(store, ["tag:kernel=6.1"])]
    assert ids == [1, 2]
    assert [r.run_id for r in select_runs(store, ["suite:s", "1", "base"])] == [1, 2]
    assert [r.run_id for r in select_runs(store, ["3", "suite:s"])] == [3, 1, 2]
    for bad, msg in (("tag:nokey", "tag:KEY=VALUE"), ("tag:k=v", "no run has tag"),
                     ("suite:none", "no run belongs"), ("nope", "irqlab list")):
        with pytest.raises(StoreError, match=msg):
            select_runs(store, [bad])
