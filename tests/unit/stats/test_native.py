"""The C statistics fast path (irqlab/native/stats.c) gives exactly what the numpy
reference gives: windows, summary, histogram buckets, exact sums and the errors, on
random and adversarial batches (ties, out-of-range buckets, one sample, 2^63-scale)."""

from __future__ import annotations

import numpy as np
import pytest
from irqlab import native
from irqlab.stats import LogHistogram, RunStats
from irqlab.stats.native import reduce_batch
from irqlab.stats.segments import reduce_segments

from tests.unit.native_paths import both_ways

from ._ref import heavy_tailed, make_deadlines

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min


def run_stats(deadlines, latencies, batch, window_tick=5_000, threshold_tick=400):
    """Windows and summary of a RunStats fed `batch`-long pieces."""
    stats = RunStats(1_000_000, threshold_tick, window_tick, warmup_windows=2)
    windows = []
    for start in range(0, latencies.size, batch):
        windows += stats.add(deadlines[start:start + batch], latencies[start:start + batch])
    last, summary = stats.finish()
    return windows + last, summary


def assert_same_run(fast, slow):
    (w_fast, s_fast), (w_slow, s_slow) = fast, slow
    assert w_fast == w_slow
    assert s_fast.histogram.to_dict() == s_slow.histogram.to_dict()
    assert s_fast == s_slow


def test_the_library_has_the_stats_kernel():
    assert native.lib() is not None, native.why_not()
    assert hasattr(native.lib(), "irq_stats_reduce_valid")


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 7, 1000, 1023, 1025, 50_000])
def test_random_runs_match(batch):
    rng = np.random.default_rng(batch)
    n = 60_000 if batch >= 1000 else 3_000   # one add() per batch: keep small ones short
    deadlines = make_deadlines(rng, n, period=100, stall_every=9_000, stall_tick=40_000)
    latencies = heavy_tailed(rng, n)
    assert_same_run(*both_ways(lambda: run_stats(deadlines, latencies, batch)))


@pytest.mark.parametrize("name", ["ties", "one", "overflow", "underflow", "huge",
                                  "extremes", "threshold"])
def test_adversarial_runs_match(name):
    rng = np.random.default_rng(3)
    n = {"one": 1}.get(name, 5_000)
    deadlines = make_deadlines(rng, n, period=100)
    if name in ("ties", "one"):
        latencies = np.full(n, 300, dtype=np.int64)
    elif name == "overflow":   # beyond max_trackable: the overflow bucket
        latencies = rng.integers(1 << 40, 1 << 50, n)
        latencies[::3] = (1 << 40) - 129          # max_trackable itself
    elif name == "underflow":
        latencies = -rng.integers(1, 1 << 20, n)
        latencies[::2] = 0
    elif name == "huge":       # squares and sums beyond int64 and int128-of-squares
        latencies = rng.integers(I64_MAX - 1000, I64_MAX, n, endpoint=True)
        latencies[1::2] = I64_MIN + rng.integers(0, 1000, n // 2)
    elif name == "extremes":
        latencies = rng.choice(np.array([I64_MIN, I64_MAX, -1, 0, 1, 127, 128, 1 << 26,
                                         -(1 << 26), (1 << 31) + 1, 1 << 52]), n)
    else:                      # exactly at the threshold and one above
        latencies = rng.choice(np.array([399, 400, 401]), n)
    latencies = latencies.astype(np.int64)
    for batch in (n, 1024, 333):
        assert_same_run(*both_ways(lambda: run_stats(deadlines, latencies, batch)))


def test_segments_and_tally_match_the_numpy_reduction():
    rng = np.random.default_rng(11)
    n = 20_000
    deadlines = make_deadlines(rng, n, period=50, stall_every=3_000, stall_tick=100_000)
    latencies = heavy_tailed(rng, n)
    latencies[::97] = I64_MAX
    hist = LogHistogram()
    seg, tally = reduce_batch(deadlines, latencies, int(deadlines[0]), 1_000, 500,
                              hist.layout)
    ref = reduce_segments(deadlines, latencies, int(deadlines[0]), 1_000, 500)
    for name in ("index", "count", "min", "max", "above", "total", "total_sq"):
        assert [int(v) for v in getattr(seg, name)] == \
            [int(v) for v in getattr(ref, name)], name
    native.set_enabled(False)
    try:
        hist.add(latencies)
    finally:
        native.set_enabled(True)
    assert np.array_equal(tally.counts, hist.counts)
    assert (tally.underflow, tally.overflow) == (hist.underflow, hist.overflow)


def test_histogram_add_matches():
    rng = np.random.default_rng(5)
    values = np.concatenate([heavy_tailed(rng, 30_000), [I64_MIN, I64_MAX, 0, -1]])

    def build():
        h = LogHistogram()
        h.add(values[:17])
        h.add(values[17:])
        return h.to_dict()
    fast, slow = both_ways(build)
    assert fast == slow


@pytest.mark.parametrize("deadlines", [[10, 20, 5], [0, 5_000, 10_000, 4_999]])
def test_out_of_order_is_refused_alike(deadlines):
    d = np.array(deadlines, dtype=np.int64)
    lat = np.arange(d.size, dtype=np.int64)

    def attempt():
        stats = RunStats(1_000_000, 400, 1_000, 0)
        if d[-1] >= d[0]:
            with pytest.raises(ValueError, match="out of window order"):
                stats.add(d, lat)
        else:
            with pytest.raises(ValueError):
                stats.add(d, lat)
        # Nothing was counted: a good batch afterwards gives a clean run.
        stats.add(np.array([10, 11]), np.array([1, 2]))
        return stats.finish()[1]
    fast, slow = both_ways(attempt)
    assert fast == slow and fast.samples == 2


def test_invalid_samples_are_reduced_alike():
    # Entries before their deadline (negative latencies) are counted invalid and left
    # out of every figure and the tally, in both paths: scattered, in whole 1,024-sample
    # blocks, and as the only samples of some windows (count 0 there).
    rng = np.random.default_rng(27)
    n = 30_000
    deadlines = make_deadlines(rng, n, period=50, stall_every=4_000, stall_tick=100_000)
    latencies = heavy_tailed(rng, n)
    latencies[rng.random(n) < 0.02] = -rng.integers(1, 10**6, 1)[0]
    latencies[5_000:7_100] = -3                       # whole blocks, whole windows
    latencies[-1] = I64_MIN
    origin = int(deadlines[0])
    hist = LogHistogram()
    seg, tally = reduce_batch(deadlines, latencies, origin, 1_000, 500, hist.layout,
                              valid_min=0)
    ref = reduce_segments(deadlines, latencies, origin, 1_000, 500, valid_min=0)
    for name in ("index", "count", "min", "max", "above", "total", "total_sq",
                 "invalid"):
        assert [int(v) for v in getattr(seg, name)] == \
            [int(v) for v in getattr(ref, name)], name
    assert int(seg.invalid.sum()) == np.count_nonzero(latencies < 0)
    assert int(seg.count.sum()) == np.count_nonzero(latencies >= 0)
    assert (seg.count == 0).any()                     # windows of invalid samples only
    native.set_enabled(False)
    try:
        hist.add(latencies[latencies >= 0])
    finally:
        native.set_enabled(True)
    assert np.array_equal(tally.counts, hist.counts)
    assert (tally.underflow, tally.overflow) == (0, hist.overflow)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 333, 1024, 30_000])
def test_runs_with_invalid_windows_match(batch):
    rng = np.random.default_rng(batch)
    # One add() per sample at batch 1: 3,000 still spans the invalid stretches below and
    # several windows.
    n = {1: 3_000}.get(batch, 6_000 if batch < 1000 else 30_000)
    deadlines = make_deadlines(rng, n, period=100, stall_every=9_000, stall_tick=40_000)
    latencies = heavy_tailed(rng, n)
    latencies[:120] = -7                  # the first windows: invalid samples only
    latencies[2_000:2_300] = -1
    fast, slow = both_ways(lambda: run_stats(deadlines, latencies, batch))
    assert_same_run(fast, slow)
    windows, summary = fast
    assert summary.invalid == sum(w.invalid for w in windows) == \
        np.count_nonzero(latencies < 0)
    assert summary.samples == np.count_nonzero(latencies >= 0)
    assert summary.min_tick == int(latencies[latencies >= 0].min()) >= 0
    empty = [w for w in windows if w.samples == 0 and w.invalid]
    assert empty and all(w.min_tick is None and w.mean_tick is None for w in empty)
    assert windows[0].global_min_tick is None     # no latency before the first valid one
