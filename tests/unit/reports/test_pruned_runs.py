"""A run whose raw samples retention pruned (`irqlab monitor --keep-raw`) is judged on its
stored summary, which covers every sample, not on the samples left (recent ones, spikes)."""

from __future__ import annotations

import numpy as np

from irqlab.reports.data import FROM_RAW, FROM_SUMMARY, figures, load_run, samples_pruned
from irqlab.store import Store
from tests.unit.reports._runs import add_run, latencies


def test_a_pruned_run_s_figures_are_its_summary_s(tmp_path):
    db = tmp_path / "m.duckdb"
    with Store(db) as st:
        rid = add_run(st, "monitor", latencies("lognormal", 20_000, seed=3))
        row = st.resolve(str(rid))
        whole = figures(load_run(st, row))
        assert whole["percentiles_from"] == FROM_RAW and not samples_pruned(row)
        # Retention drops the quiet samples and keeps the spikes: what is left is skewed.
        lat = latencies("lognormal", 20_000, seed=3)
        spikes = int((lat > row.threshold_ns).sum())
        meta = {**row.metadata, "retention": {"keep_raw_s": 300, "dropped_files": 3,
                                              "dropped_samples": 20_000 - spikes,
                                              "kept_above_threshold": spikes}}
        st.update_run(rid, metadata=meta)
        pruned_row = st.resolve(str(rid))
        assert samples_pruned(pruned_row)
        got = figures(load_run(st, pruned_row))
    s = pruned_row.summary
    assert got["percentiles_from"] == FROM_SUMMARY
    for key in ("p50_ns", "p99_ns", "max_ns", "min_ns"):
        assert got[key] == s[key], key
    assert got["samples"] == s["samples"] == 20_000
    assert np.isclose(got["p50_ns"], whole["p50_ns"], rtol=1 / 64)
