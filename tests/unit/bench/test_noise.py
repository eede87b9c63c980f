"""`irqlab bench noise` on a tiny input: real native runs through the run flow, judged by
compare's model; the figures say what was measured (no rate is asserted: it is the
machine's, and the bench reports it, it does not test it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from irqlab.bench.noise import bench_noise
from irqlab.reports import noise
from irqlab.runner.native import NATIVE_PROBE

pytestmark = pytest.mark.integration     # runs the native probe on this host

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "docs/schema/bench.schema.json")
                    .read_text())


@pytest.fixture(scope="module")
def native_built():
    if not NATIVE_PROBE.exists():
        subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)


@pytest.mark.parametrize("k", [3, 1])
def test_bench_noise_figures(native_built, k):
    figs = bench_noise(pairs=2, runs_per_side=k, duration_ns=100_000_000,
                       max_repeat=4 if k > 1 else 0)
    aa, ab = figs[:2]
    assert aa["name"] == "noise A/A" and ab["name"] == "noise A/B (x1.3)"
    for f in (aa, ab):
        jsonschema.validate({"type": "bench", "version": 1, **f}, SCHEMA)
        assert f["pairs"] == 2 and f["runs_per_side"] == k
        assert f["runs"] == 2 * 2 * (4 if k > 1 else 1)
        assert f["value"] == f["hits"] / 2
        assert (f["ci_low"], f["ci_high"]) == noise.wilson_interval(f["hits"], 2)
        # 2 pairs cannot show a goal met: the Wilson interval is too wide.
        assert f["status"] in ("undecided", "NOT met") and f["met"] is False
        assert f["samples_per_run"] > 100 and f["machine"]["cores"] >= 1
        assert f["test"] == ("run-t" if k > 1 else "bootstrap")
        assert "95% Wilson" in f["text"] and f"{k} vs {k} runs" in f["text"]
    if k == 1:
        # Single runs are never called different, whatever the data.
        assert aa["hits"] == 0 and len(aa["block_len"]) == 2 and len(figs) == 2
    else:
        # The power curve: the same pairs at every shift, as shares of the pairs.
        assert set(ab["by_shift"]) == {"1.05", "1.1", "1.2", "1.3", "1.5", "2"}
        assert all(v in (0.0, 0.5, 1.0) for v in ab["by_shift"].values())
        assert ab["by_shift"]["1.3"] == ab["value"] and aa["same"] in (0, 1, 2)
        # --repeat auto replayed on the 4 runs a side measured.
        auto_aa, auto_ab = figs[2:]
        assert auto_aa["name"] == "noise auto A/A" and auto_ab["max_repeat"] == 4
        assert 3 <= auto_ab["runs_used_median"] <= auto_ab["runs_used_max"] <= 4


def test_goal_status_needs_the_interval_to_clear_the_goal():
    from irqlab.bench.noise import goal_status
    assert goal_status(*noise.wilson_interval(0, 20), 0.05, True) == "undecided"
    assert goal_status(*noise.wilson_interval(0, 73), 0.05, True) == "met"
    assert goal_status(*noise.wilson_interval(30, 80), 0.05, True) == "NOT met"
    assert goal_status(*noise.wilson_interval(80, 80), 0.9, False) == "met"
    assert goal_status(*noise.wilson_interval(18, 20), 0.9, False) == "undecided"


def test_bench_noise_real_ab_measures_a_third_series(native_built):
    """--b-period: each pair also measures a series at another period and compare
    judges A against it; the figure says which difference it is and what it found."""
    figs = bench_noise(pairs=1, runs_per_side=3, duration_ns=100_000_000,
                       b_period_ns=1_000_000)
    assert [f["name"] for f in figs] == ["noise A/A", "noise A/B (x1.3)",
                                         "noise A/B (real: period 100 us vs 1000 us)"]
    real = figs[2]
    jsonschema.validate({"type": "bench", "version": 1, **real}, SCHEMA)
    assert real["runs"] == 3 * 1 * 3 and real["b_period_ns"] == 1_000_000
    assert real["hits"] in (0, 1) and len(real["p50_ratios"]) == 1
    assert real["p50_ratios"][0] > 0
