"""The bootstrap noise test: exact order-statistic draws, verdicts, determinism."""

import numpy as np

from irqlab.reports import noise
from irqlab.stats import quantile_rank


def test_order_statistic_draws_match_brute_force_resampling():
    # The Beta shortcut must give the same bootstrap distribution as resampling n values.
    rng = np.random.default_rng(7)
    x = np.sort(rng.lognormal(0, 1, 400))
    k = quantile_rank(0.9, x.size)
    brute = np.array([np.sort(rng.choice(x, x.size))[k - 1] for _ in range(4000)])
    fast = noise.bootstrap_quantile(x, 0.9, 4000, np.random.default_rng(8))
    for q in (0.1, 0.5, 0.9):
        a, b = np.quantile(brute, q), np.quantile(fast, q)
        assert abs(a - b) <= 0.03 * a, (q, a, b)


def test_same_distribution_is_within_noise_and_a_doubling_is_beyond():
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(8, 0.5, 20_000), rng.lognormal(8, 0.5, 20_000)
    same = noise.compare_runs(a, b)
    assert [r.quantile for r in same] == ["p50", "p99.9"]
    assert not any(r.beyond_noise for r in same)
    assert all(r.ci_low <= 1 <= r.ci_high and r.p_value > 0.05 for r in same)
    moved = noise.compare_runs(a, b * 2)
    assert all(r.beyond_noise and r.p_value < 0.001 for r in moved)
    assert 1.9 < moved[0].ratio < 2.1 and moved[0].ci_low > 1.8


def test_deterministic_for_a_seed_and_subsampled_above_the_cap():
    rng = np.random.default_rng(5)
    a, b = rng.exponential(1e4, 50_000), rng.exponential(1e4, 50_000)
    assert noise.compare_runs(a, b, seed=11) == noise.compare_runs(a, b, seed=11)
    sub = noise.prepare(a, seed=1, max_samples=1000)
    assert sub.size == 1000 and np.array_equal(sub, noise.prepare(a, seed=1, max_samples=1000))
    assert np.all(np.diff(sub) >= 0)


def test_identical_constant_runs_are_within_noise_with_p_1():
    res = noise.compare_runs(np.full(1000, 29.0), np.full(3000, 29.0))
    assert all(not r.beyond_noise and r.p_value == 1.0 and r.ratio == 1.0 for r in res)
