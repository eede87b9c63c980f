import numpy as np
import pytest

from irqlab.stats import Windower, WindowStats

from ._ref import heavy_tailed, make_deadlines, window_reference

HZ = 1_000_000
WINDOW = 50_000   # ~50 samples per window at a 1000-tick period
THRESHOLD = 400


def _feed(deadlines, latencies, cuts, window=WINDOW, threshold=THRESHOLD):
    w = Windower(HZ, window, threshold)
    out = []
    for d, l in zip(np.split(deadlines, cuts), np.split(latencies, cuts)):
        out += w.add(d, l)
    return out + w.flush(), w


def _check_against_reference(windows, deadlines, latencies, window=WINDOW):
    ref = window_reference(deadlines, latencies, window, THRESHOLD)
    last = max(ref)
    assert [w.index for w in windows] == list(range(last + 1))  # gaps are emitted
    gmin = gmax = None
    for w in windows:
        assert w.start_s == w.index * window / HZ
        r = ref.get(w.index)
        if r is None:
            assert (w.samples, w.mean_tick, w.stddev_tick, w.min_tick, w.max_tick,
                    w.above_threshold) == (0, None, None, None, None, 0)
        else:
            gmin = r["min"] if gmin is None else min(gmin, r["min"])
            gmax = r["max"] if gmax is None else max(gmax, r["max"])
            assert (w.samples, w.min_tick, w.max_tick, w.above_threshold) == \
                (r["samples"], r["min"], r["max"], r["above"])
            # Exact (correctly rounded) values, and numpy's float results nearby.
            assert w.mean_tick == r["mean"] and w.stddev_tick == r["stddev"]
            assert w.mean_tick == pytest.approx(r["np_mean"], rel=1e-12)
            assert w.stddev_tick == pytest.approx(r["np_std"], rel=1e-9, abs=1e-9)
        assert (w.global_min_tick, w.global_max_tick) == (gmin, gmax)
    return ref


def _data(seed=0, n=60_000):
    rng = np.random.default_rng(seed)
    deadlines = make_deadlines(rng, n, 1000, stall_every=4000, stall_tick=310_000)
    return rng, deadlines, heavy_tailed(rng, n)


def test_windows_match_reference_and_gaps_are_emitted():
    rng, deadlines, latencies = _data()
    windows, w = _feed(deadlines, latencies, [])
    ref = _check_against_reference(windows, deadlines, latencies)
    assert sum(1 for x in windows if x.samples == 0) >= 10  # stalls made empty windows
    assert sum(r["above"] for r in ref.values()) > 0
    assert w.totals.count == latencies.size and w.totals.total == int(latencies.sum())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_arbitrary_batch_splits_give_identical_windows(seed):
    rng, deadlines, latencies = _data(seed)
    whole, _ = _feed(deadlines, latencies, [])
    cuts = np.sort(rng.choice(np.arange(1, latencies.size), 40, replace=False))
    split, _ = _feed(deadlines, latencies, cuts)
    assert split == whole
    # Windows are only emitted once complete: each batch's output ends before its data.
    w = Windower(HZ, WINDOW, THRESHOLD)
    for d, l in zip(np.split(deadlines, cuts), np.split(latencies, cuts)):
        for x in w.add(d, l):
            assert x.index < (d[-1] - deadlines[0]) // WINDOW


def test_one_sample_per_batch():
    _, deadlines, latencies = _data(4, n=3000)
    whole, _ = _feed(deadlines, latencies, [])
    single, _ = _feed(deadlines, latencies, np.arange(1, latencies.size))
    assert single == whole


def test_huge_values_take_exact_paths():
    rng = np.random.default_rng(5)
    n = 5000
    deadlines = make_deadlines(rng, n, 1000)
    latencies = rng.integers(-2**40, 2**40, n)
    latencies[::97] = 2**61  # sums of squares overflow int64 by far
    latencies[100:110] = 2**62 + np.arange(10)  # so does one window's plain sum
    windows, w = _feed(deadlines, latencies, [1234, 2345])
    _check_against_reference(windows, deadlines, latencies)
    assert w.totals.total == sum(latencies.tolist())


def test_window_boundaries():
    origin = 7_000
    d = np.array([origin, origin + WINDOW - 1, origin + WINDOW, origin + 3 * WINDOW - 1,
                  origin + 3 * WINDOW], np.int64)
    lat = np.array([1, 2, 3, 4, 5], np.int64)
    windows, _ = _feed(d, lat, [])
    assert [(w.index, w.samples, w.min_tick, w.max_tick) for w in windows] == \
        [(0, 2, 1, 2), (1, 1, 3, 3), (2, 1, 4, 4), (3, 1, 5, 5)]


def test_gap_longer_than_batch_and_globals_of_empty_windows():
    w = Windower(HZ, 10, threshold_tick=5)
    out = w.add(np.array([0, 5, 95], np.int64), np.array([7, 3, 9], np.int64))
    assert [x.index for x in out] == list(range(9))
    assert (out[0].samples, out[0].above_threshold, out[0].mean_tick) == (2, 1, 5.0)
    assert all(x.samples == 0 and x.global_min_tick == 3 and x.global_max_tick == 7
               for x in out[1:])
    last = w.flush()
    assert [(x.index, x.samples, x.global_max_tick) for x in last] == [(9, 1, 9)]


def test_threshold_is_strict():
    w = Windower(HZ, 100, threshold_tick=10)
    w.add(np.array([0, 1, 2], np.int64), np.array([9, 10, 11], np.int64))
    assert w.flush()[0].above_threshold == 1


def test_out_of_order_is_rejected_without_side_effects():
    w = Windower(HZ, 10, 0)
    assert w.add(np.array([0, 15], np.int64), np.array([1, 2], np.int64))[0].samples == 1
    with pytest.raises(ValueError):
        w.add(np.array([3], np.int64), np.array([4], np.int64))     # window 0 is closed
    with pytest.raises(ValueError):
        w.add(np.array([30, 25, 50], np.int64), np.array([4, 4, 4], np.int64))
    with pytest.raises(ValueError):
        w.add(np.array([30, 60, 35], np.int64), np.array([4, 4, 4], np.int64))
    out = w.add(np.array([16, 21], np.int64), np.array([5, 6], np.int64))
    assert [(x.index, x.samples, x.max_tick) for x in out] == [(1, 2, 5)]
    assert w.totals.count == 4


def test_empty_input_flush_and_misuse():
    w = Windower(HZ, 10, 0)
    assert w.add(np.array([], np.int64), np.array([], np.int64)) == []
    assert w.flush() == [] and w.flush() == []
    with pytest.raises(RuntimeError):
        w.add(np.array([1], np.int64), np.array([1], np.int64))
    with pytest.raises(ValueError):
        Windower(HZ, 10, 0).add(np.array([1, 2], np.int64), np.array([1], np.int64))


def test_single_sample():
    w = Windower(33_333_333, 33_333_333, 100)
    assert w.add(np.array([123456789], np.int64), np.array([-4], np.int64)) == []
    assert w.flush() == [WindowStats(0, 0.0, 1, -4.0, 0.0, -4, -4, 0, -4, -4)]
