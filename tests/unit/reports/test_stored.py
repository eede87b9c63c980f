"""Runs too big to read whole (RunData.stored) give the same compare, check and figures
as when their samples are in memory; plots keep every sample above the threshold."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.reports.check import evaluate
from irqlab.reports.compare import build_compare
from irqlab.reports.data import figures, load_run, load_runs
from irqlab.reports.plotdata import fine_histogram
from irqlab.reports.plotdata import survival as _survival
from irqlab.reports.plots import histogram_plot, over_time_plot
from irqlab.reports.select import select_runs

REFS = ["base", "double", "elsewhere", "summary-only", "logn-a", "logn-b"]


def _stairs(plot, run) -> tuple[np.ndarray, np.ndarray]:
    """(edges, heights) of a histogram plot's stairs, in the run's fine bins: the plot
    draws runs of equal bins as one step (plots._merged_bins), which must expand back to
    the same heights as plotdata.fine_histogram's."""
    drawn = plot.figure.axes[0].patches[0].get_data()
    fine = fine_histogram(run)
    heights = drawn.values[np.searchsorted(drawn.edges, fine.edges_ns[:-1], "right") - 1]
    assert drawn.edges[0] == fine.edges_ns[0] and drawn.edges[-1] == fine.edges_ns[-1]
    assert np.array_equal(heights, fine.counts)
    return fine.edges_ns, heights


def both(store, refs):
    rows = select_runs(store, refs)
    return load_runs(store, rows), load_runs(store, rows, in_memory_samples=0)


def test_stored_runs_are_not_read_whole(store):
    run = load_run(store, store.resolve("logn-a"), in_memory_samples=0)
    assert run.stored is not None and run.latency_tick is None and run.has_raw


@pytest.mark.parametrize("threshold_ns", [None, 3_000])
def test_compare_is_the_same(store, threshold_ns):
    mem, big = both(store, REFS)
    a = build_compare(mem, threshold_ns, resamples=300)
    b = build_compare(big, threshold_ns, resamples=300)
    assert a == b


def test_figures_and_check_are_the_same(store):
    mem, big = both(store, REFS)
    for m, b in zip(mem, big):
        assert figures(m) == figures(b)
        assert figures(m, 2_000) == figures(b, 2_000)
        limits = [("p99.9", 9_000), ("max", 20_000), ("above-threshold", 5)]
        assert evaluate(m, limits).to_dict() == evaluate(b, limits).to_dict()


def test_plots_from_batches(store):
    mem, big = both(store, ["elsewhere", "logn-a"])
    for m, b in zip(mem, big):
        hm, hb = histogram_plot(m), histogram_plot(b)
        # Same bins; counts from the log histogram (1/128 resolution): each sample lands
        # in its bin or a neighbour, none is lost.
        (em, cm), (eb, cb) = _stairs(hm, m), _stairs(hb, b)
        assert np.allclose(em, eb) and cm.sum() == cb.sum() == m.latency_tick.size
        assert np.abs(cm - cb).sum() <= 0.2 * cm.sum()
        # The survival curve's exact tail: the largest samples themselves.
        (xm, ym), (xb, yb) = _survival(m), _survival(b)
        assert np.array_equal(xm[-100:], xb[-100:]) and np.array_equal(ym[-100:], yb[-100:])
        assert (np.diff(yb) <= 0).all() and yb[0] == 1.0
    # Every sample above the threshold is drawn (threshold 5 us on a ramp to 10 us).
    line = next(l for l in over_time_plot(big[0]).figure.axes[0].get_lines()
                if l.get_gid() == "above-threshold")
    assert len(line.get_xdata()) == int(np.count_nonzero(mem[0].latency_tick
                                                         > mem[0].threshold_tick(5_000)))


@pytest.mark.slow
def test_the_tail_model_is_the_same_from_the_store_and_from_memory(store):
    """A stored run's tail fit reads its top samples from the scan pass (TopK) and counts
    a latency below them with one more pass; the model equals the in-memory run's."""
    from irqlab.reports.tail import build_tail

    (mem,), (big,) = both(store, ["logn-a"])
    below = int(np.percentile(mem.latency_ns_float(), 50))      # deep in the body
    at = [below, int(mem.latency_ns_float().max()) * 2]
    m, b = build_tail([mem], at), build_tail([big], at)
    assert big.stored is not None and big.stored.tail is not None
    for key in ("samples", "max_ns", "threshold_ns", "exceedances", "xi", "sigma_ns",
                "extremal_index", "refused"):
        assert m[key] == b[key], key
    assert [c["p_value"] for c in m["checks"]] == [c["p_value"] for c in b["checks"]]
    assert m["exceedance"] == b["exceedance"]
    if not m["refused"]:
        assert m["exceedance"][0]["p"] == pytest.approx(0.5, abs=0.01)
