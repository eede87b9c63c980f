"""The noise test on synthetic data of known truth (seeded, deterministic).

Replicates: Welch's t on log per-run quantiles must hold its 5 % family-wise level over
many simulated A/A comparisons of 2-5 runs a side, and find a 10 % shift. Single runs:
an autocorrelated series against another of the same distribution is never "beyond
noise"; the block length grows with the autocorrelation."""

import math

import numpy as np
import pytest

from irqlab.reports import noise
from irqlab.stats import quantile_rank


def _ar1_latencies(rng: np.random.Generator, phi: float, n: int) -> np.ndarray:
    """Lognormal latencies (median 5 us) whose log follows an AR(1) of coefficient phi:
    the same marginal distribution for every phi, bursts as long as phi makes them."""
    e = rng.normal(size=n) * math.sqrt(1 - phi ** 2)
    x = np.empty(n)
    x[0] = rng.normal()
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return np.round(np.exp(np.log(5_000) + 0.4 * x))


def _run_quantiles(rng: np.random.Generator, runs: int, shift: float = 1.0,
                   run_sd: float = 0.03, n: int = 2_000) -> dict[str, list[float]]:
    """Per-run nearest-rank p50 and p99.9 of `runs` runs, each with its own level (the
    run-to-run variation: log-normal with sd run_sd) and n lognormal samples."""
    out: dict[str, list[float]] = {label: [] for _q, label in noise.QUANTILES}
    for _ in range(runs):
        level = math.exp(rng.normal(0, run_sd)) * shift
        x = np.sort(rng.lognormal(np.log(5_000), 0.4, n) * level)
        for q, label in noise.QUANTILES:
            out[label].append(float(x[quantile_rank(q, n) - 1]))
    return out


def _row_beyond(rng: np.random.Generator, k: int, shift: float, run_sd: float) -> bool:
    a, b = _run_quantiles(rng, k, run_sd=run_sd), _run_quantiles(rng, k, shift, run_sd)
    results = [noise.welch_log_ratio(a[label], b[label], label) for _q, label in
               noise.QUANTILES]
    beyond, _text = noise.verdict(noise.TEST_REPLICATES, results)
    return bool(beyond)


def test_student_t_matches_tables():
    assert noise.t_quantile(0.975, 10) == pytest.approx(2.228139, abs=1e-5)
    assert noise.t_quantile(0.975, 1) == pytest.approx(12.706205, abs=1e-4)
    assert noise.t_quantile(0.975, 1e7) == pytest.approx(1.959964, abs=1e-4)
    assert noise.t_sf2(2.228139, 10) == pytest.approx(0.05, abs=1e-6)
    assert noise.t_sf2(0.0, 3) == 1.0 and noise.t_sf2(math.inf, 3) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 3, 5])
def test_replicate_test_holds_its_level_over_seeded_a_a_simulations(k):
    rng = np.random.default_rng(1000 + k)
    trials = 600
    false = sum(_row_beyond(rng, k, 1.0, run_sd=0.03) for _ in range(trials))
    # Family-wise 5 % (Bonferroni over p50 and p99.9): binomial sd at 600 trials ~0.9 %.
    assert false / trials <= 0.075, false
    # ...and not a test that never fires (it would have no power either).
    assert false / trials >= 0.005, false


def test_replicate_test_finds_a_ten_percent_shift():
    rng = np.random.default_rng(7)
    trials = 200
    found = sum(_row_beyond(rng, 5, 1.10, run_sd=0.02) for _ in range(trials))
    assert found / trials >= 0.9, found
    # With 3 runs a side and twice the run-to-run spread the same shift is mostly missed:
    # the run, not the sample, decides how much can be seen.
    found3 = sum(_row_beyond(rng, 3, 1.10, run_sd=0.08) for _ in range(trials))
    assert found3 < found


def test_replicate_ratio_interval_and_exact_cases():
    r = noise.welch_log_ratio([100, 110, 105], [200, 220, 210], "p50")
    assert r.ratio == pytest.approx(2.0) and r.ci_low < 2.0 < r.ci_high
    assert r.beyond_noise and r.p_value < 0.001 and r.confidence == 0.975
    assert r.p_adjusted == pytest.approx(min(1.0, 2 * r.p_value))
    same = noise.welch_log_ratio([29, 29], [29, 29], "p50")
    assert same.ratio == 1.0 and same.p_value == 1.0 and same.beyond_noise is False
    moved = noise.welch_log_ratio([29, 29], [31, 31], "p50")
    assert moved.p_value == 0.0 and moved.beyond_noise is True
    bad = noise.welch_log_ratio([0, 29], [31, 31], "p50")
    assert bad.ratio is None and bad.beyond_noise is None


def test_autocorrelated_single_runs_of_one_distribution_are_never_beyond_noise():
    within = 0
    pairs = 12
    for s in range(pairs):
        rng = np.random.default_rng(200 + s)
        a, b = _ar1_latencies(rng, 0.9, 5_000), _ar1_latencies(rng, 0.9, 5_000)
        results = noise.block_bootstrap(noise.BlockSide.of([a]), noise.BlockSide.of([b]),
                                        seed=s, resamples=500)
        beyond, text = noise.verdict(noise.TEST_SINGLE, results)
        assert beyond is not True and all(r.beyond_noise is not True for r in results)
        assert text in (noise.VERDICT_WITHIN, noise.VERDICT_SINGLE)
        within += beyond is False
    # Blocks as long as the bursts keep the interval honest: mostly "within noise".
    assert within >= pairs - 2, within


def test_single_runs_with_a_real_shift_are_told_to_re_run():
    rng = np.random.default_rng(3)
    a, b = _ar1_latencies(rng, 0.5, 5_000), _ar1_latencies(rng, 0.5, 5_000) * 2
    results = noise.block_bootstrap(noise.BlockSide.of([a]), noise.BlockSide.of([b]),
                                    resamples=500)
    assert noise.verdict(noise.TEST_SINGLE, results) == (None, noise.VERDICT_SINGLE)
    assert all(1.8 < r.ratio < 2.2 and r.ci_low > 1 for r in results)


def test_block_length_grows_with_autocorrelation():
    lengths = []
    for phi in (0.0, 0.5, 0.9, 0.97):
        rng = np.random.default_rng(11)
        lengths.append(noise.block_length(_ar1_latencies(rng, phi, 40_000)))
    assert lengths[0] <= 3
    assert lengths == sorted(lengths) and lengths[-1] > 5 * lengths[1], lengths
    assert noise.block_length(np.full(1000, 7.0)) == 1


def test_block_bootstrap_is_deterministic_and_reports_its_blocks():
    rng = np.random.default_rng(5)
    a, b = _ar1_latencies(rng, 0.9, 4_000), _ar1_latencies(rng, 0.9, 4_000)
    one = noise.block_bootstrap(noise.BlockSide.of([a]), noise.BlockSide.of([b]), seed=9,
                                resamples=300)
    two = noise.block_bootstrap(noise.BlockSide.of([a]), noise.BlockSide.of([b]), seed=9,
                                resamples=300)
    assert one == two
    side = noise.BlockSide.of([a], strides=[10])
    assert side.block_len == noise.block_length(a) and side.block_len_samples == \
        10 * side.block_len


def test_grid_gives_each_resample_its_quantile_rounded_up_to_the_grid():
    # The grid shortcut against resampling the blocks themselves: never below the exact
    # quantile, at most the grid's step above it.
    rng = np.random.default_rng(2)
    x = _ar1_latencies(rng, 0.8, 3_000)
    side = noise.BlockSide.of([x])
    w = side.weights(50, np.random.default_rng(4))
    for q, _label in noise.QUANTILES:
        fast = side.bootstrap(q, w)
        for r in range(50):
            pool = np.sort(np.concatenate([np.repeat(blk, int(c)) for blk, c in
                                           zip(side.blocks, w[r]) if c]))
            exact = pool[quantile_rank(q, pool.size) - 1]
            assert exact <= fast[r] <= exact * 1.02, (q, r, exact, fast[r])


def test_thinning_keeps_time_order_and_the_stream_equals_memory():
    x = np.arange(10_000, dtype=np.int64)
    mem = noise.prepare(x, max_samples=1_000)
    assert mem.size == 1_000 and np.all(np.diff(mem) == 10)
    batches = iter([x[:3_333], x[3_333:7_000], x[7_000:]])
    assert np.array_equal(noise.prepare_stream(batches, x.size, 1.0, 1_000), mem)
    assert noise.thinning(10_000, 1_000) == 10 and noise.thinning(999, 1_000) == 1


def test_wilson_interval():
    lo, hi = noise.wilson_interval(0, 20)
    assert lo == 0.0 and hi == pytest.approx(0.1611, abs=1e-3)
    lo, hi = noise.wilson_interval(10, 20)
    assert (lo, hi) == pytest.approx((0.2993, 0.7007), abs=1e-3)


def test_mid_ranks_are_the_searchsorted_definition():
    from irqlab.reports.noise import mid_ranks
    rng = np.random.default_rng(45)
    for x in (rng.integers(0, 7, 1000).astype(np.float64),     # many ties
              rng.lognormal(10, 1, 5000), np.full(17, 3.0), np.arange(5.0)[::-1],
              np.array([2.0, np.inf, -1.0, 2.0])):
        srt = np.sort(x)
        want = (np.searchsorted(srt, x, "left") + np.searchsorted(srt, x, "right")) / 2
        assert np.array_equal(mid_ranks(x), want)
