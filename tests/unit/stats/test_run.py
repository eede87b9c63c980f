from fractions import Fraction

import numpy as np
import pytest

from irqlab.stats import RunStats

from ._ref import heavy_tailed, make_deadlines

HZ, WINDOW, THRESHOLD, WARMUP = 1_000_000, 20_000, 1_000, 3
PCTS = {"p50_tick": 0.5, "p90_tick": 0.9, "p99_tick": 0.99, "p999_tick": 0.999,
        "p9999_tick": 0.9999}


def _run(deadlines, latencies, cuts=(), warmup=WARMUP):
    stats = RunStats(HZ, THRESHOLD, WINDOW, warmup)
    windows = []
    for d, l in zip(np.split(deadlines, list(cuts)), np.split(latencies, list(cuts))):
        windows += stats.add(d, l)
    last, summary = stats.finish()
    return windows + last, summary


def _data(seed, n=200_000):
    rng = np.random.default_rng(seed)
    deadlines = make_deadlines(rng, n, 1000, stall_every=20_000, stall_tick=100_000)
    latencies = heavy_tailed(rng, n)
    # The largest spikes land in the warm-up windows, so warm max != max.
    latencies[:5] = [-60, 2**39 + 5, 2**39 + 1, 7, 7]  # heavy_tailed caps at 2^39
    return rng, deadlines, latencies


@pytest.mark.parametrize("seed", [0, 1])
def test_summary_against_numpy(seed):
    _, deadlines, all_latencies = _data(seed)
    windows, s = _run(deadlines, all_latencies)
    # An entry before its deadline (a negative latency) is invalid, never a latency.
    valid = all_latencies >= 0
    latencies, deadlines_valid = all_latencies[valid], deadlines[valid]
    assert s.invalid == sum(w.invalid for w in windows) == np.count_nonzero(~valid) > 0
    ints = latencies.tolist()
    assert s.samples == latencies.size == sum(w.samples for w in windows)
    assert (s.min_tick, s.max_tick) == (latencies.min(), latencies.max())
    assert s.mean_tick == float(Fraction(sum(ints), len(ints)))
    assert s.mean_tick == pytest.approx(latencies.mean(), rel=1e-12)
    assert s.stddev_tick == pytest.approx(latencies.std(ddof=0), rel=1e-9)
    assert s.above_threshold == np.count_nonzero(latencies > THRESHOLD)
    index = (deadlines_valid - deadlines[0]) // WINDOW
    assert s.warm_max_tick == latencies[index >= WARMUP].max()
    assert s.warm_max_tick < s.max_tick
    for name, q in PCTS.items():
        true = int(np.quantile(latencies, q, method="inverted_cdf"))
        got = getattr(s, name)
        assert true <= got <= true + true / 128, (name, true, got)
    assert s.saturated_percentiles == ()
    assert s.histogram.count == s.samples


def test_batch_splits_give_identical_results():
    rng, deadlines, latencies = _data(2, n=50_000)
    windows, summary = _run(deadlines, latencies)
    cuts = np.sort(rng.choice(np.arange(1, latencies.size), 25, replace=False))
    windows2, summary2 = _run(deadlines, latencies, cuts)
    assert windows2 == windows
    assert summary2 == summary  # dataclass eq includes the histogram's state


def test_the_warmup_never_takes_the_last_window():
    # Issue 32: a run of at most --warmup windows (a one-window run) has its last
    # window's max as warm max (was None, shown "—").
    d = np.arange(0, 3 * WINDOW, 1000, dtype=np.int64)  # windows 0..2 only
    lat = np.full(d.size, 300, np.int64)
    lat[d < WINDOW] = 900                                # a cold first window
    lat[d >= 2 * WINDOW] = 500
    _, s = _run(d, lat, warmup=3)
    assert (s.warm_max_tick, s.max_tick) == (500, 900)
    _, s = _run(d, lat, warmup=1)
    assert s.warm_max_tick == 500
    _, s = _run(d, lat, warmup=0)
    assert s.warm_max_tick == 900
    one = d < WINDOW
    _, s = _run(d[one], lat[one], warmup=1)             # one window: its max
    assert s.warm_max_tick == 900
    cuts = np.array([7, 150, 151, 2000])                 # windows cut across batches
    assert _run(d, lat, cuts, warmup=3)[1].warm_max_tick == 500


def test_overflowing_percentiles_are_flagged():
    d = np.arange(0, 1_000_000, 1000, dtype=np.int64)
    lat = np.full(d.size, 300, np.int64)     # bucket [300, 301]
    lat[-5:] = 2**45 + np.arange(5)
    _, s = _run(d, lat)
    assert s.p50_tick == 301 and s.p99_tick == 301
    assert s.p999_tick == 2**45 + 4           # rank 999 in the overflow bucket: max
    assert s.p9999_tick == 2**45 + 4          # rank 1000 = n: the exact max
    assert s.saturated_percentiles == ("p999_tick",)


def test_empty_run():
    windows, s = RunStats(HZ, THRESHOLD, WINDOW, WARMUP).finish()
    assert windows == []
    assert (s.samples, s.min_tick, s.mean_tick, s.stddev_tick, s.max_tick, s.warm_max_tick,
            s.p50_tick, s.p9999_tick, s.above_threshold) == (0,) + (None,) * 7 + (0,)


def test_single_sample():
    stats = RunStats(HZ, THRESHOLD, WINDOW, warmup_windows=0)
    assert stats.add(np.array([10**9], np.int64), np.array([1234], np.int64)) == []
    windows, s = stats.finish()
    assert len(windows) == 1 and windows[0].samples == 1
    assert (s.samples, s.min_tick, s.mean_tick, s.stddev_tick, s.max_tick,
            s.warm_max_tick, s.p50_tick, s.p9999_tick, s.above_threshold) == \
        (1, 1234, 1234.0, 0.0, 1234, 1234, 1234, 1234, 1)
    assert stats.summary() is s


def test_misuse():
    stats = RunStats(HZ, THRESHOLD, WINDOW, WARMUP)
    with pytest.raises(RuntimeError):
        stats.summary()
    stats.finish()
    with pytest.raises(RuntimeError):
        stats.add(np.array([1], np.int64), np.array([1], np.int64))
    with pytest.raises(RuntimeError):
        stats.finish()
    with pytest.raises(ValueError):
        RunStats(HZ, THRESHOLD, WINDOW, -1)
