"""E-divisive means (irqlab.stats.changepoint) on synthetic series of per-run figures.

The issue's case: 60 runs, p99.9 with lognormal run-to-run noise (sigma 0.05 of the log:
about the 5 % spread of a configuration's tail from run to run), one step of +20 % at
run 40. Fewer permutations than the default where the test allows: with R = 99 the
p-values are multiples of 1/100 and p <= 0.05 keeps its exact level (5 of 100 ranks).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from irqlab.stats.changepoint import (MAX_VALUES, ChangePoint, _best_split,
                                      find_change_points)

SIGMA = 0.05
P99_9_NS = 20_000.0


def series(seed: int, step_at: int | None = 40, factor: float = 1.2, n: int = 60,
           sigma: float = SIGMA) -> np.ndarray:
    rng = np.random.default_rng(10_000 + seed)
    level = np.full(n, P99_9_NS)
    if step_at is not None:
        level[step_at:] *= factor
    return level * np.exp(rng.normal(0.0, sigma, n))


def _q_by_definition(z: np.ndarray, tau: int, kappa: int) -> float:
    """Matteson & James (2014) eq. 4-5 with alpha = 1, term by term."""
    x, y = z[:tau], z[tau:kappa]
    m, n = len(x), len(y)
    between = 2.0 / (m * n) * np.abs(x[:, None] - y[None, :]).sum()
    within_x = np.abs(x[:, None] - x[None, :]).sum() / 2 / math.comb(m, 2)
    within_y = np.abs(y[:, None] - y[None, :]).sum() / 2 / math.comb(n, 2)
    return m * n / (m + n) * (between - within_x - within_y)


def test_the_best_split_is_the_argmax_of_the_papers_statistic():
    rng = np.random.default_rng(5)
    for n, min_size in ((12, 2), (23, 3), (30, 5)):
        z = rng.normal(size=n) + np.r_[np.zeros(n // 2), np.full(n - n // 2, 0.8)]
        pairs = [(t, k) for t in range(min_size, n - min_size + 1)
                 for k in range(t + min_size, n + 1)]
        qs = [_q_by_definition(z, t, k) for t, k in pairs]
        q, tau = _best_split(z[None, :], min_size)
        assert q[0] == pytest.approx(max(qs), rel=1e-9)
        assert tau[0] == pairs[int(np.argmax(qs))][0]


def test_the_issue_s_step_of_20_percent_at_run_40_is_found_with_its_p_value():
    (cp,) = find_change_points(series(0))
    assert abs(cp.index - 40) <= 1
    assert cp.p_value <= 0.01
    assert cp.p_value == pytest.approx(1 / 200)      # no permutation reached it
    assert cp.ratio == pytest.approx(1.2, abs=0.03)
    assert cp.mean_after / cp.mean_before == pytest.approx(cp.ratio)


@pytest.mark.slow
def test_the_step_is_found_at_40_plus_minus_1_in_most_of_50_series():
    hits = 0
    for seed in range(50):
        # R = 99: p-values are multiples of 1/100, 0.01 (the default level) when no
        # permutation reaches it.
        found = find_change_points(series(seed), permutations=99, seed=seed)
        hits += any(abs(c.index - 40) <= 1 and c.p_value <= 0.01 for c in found)
    # Measured 50/50 here; over 1000 series (scripts/changepoint_figures.py, R = 199)
    # 99.2 % (95 % CI 98.4-99.6 %).
    assert hits >= 45


def test_series_without_a_step_give_few_false_change_points():
    # p <= 0.05 under exchangeable values is a 5 % test exactly (permutation ranks), so
    # the false positives of 50 series are Binomial(50, 0.05): mean 2.5, and more than 6
    # has a probability of 1.2 %. More would mean the test is not at its level.
    flagged = [s for s in range(50)
               if find_change_points(series(s, None), permutations=99, seed=s, p_max=0.05)]
    # Measured 2/50 here; over 1000 series 5.8 % (95 % CI 4.5-7.4 %).
    assert len(flagged) <= 6
    # At the default p <= 0.01 at most 5 % of 50: 2 series (P(more) = 1.4 % for a 1 %
    # test). The first test draws the same permutations whatever p_max is, so only the
    # series flagged at 0.05 can be flagged at 0.01.
    strict = [s for s in flagged
              if find_change_points(series(s, None), permutations=99, seed=s)]
    assert len(strict) <= 2


def test_two_steps_are_both_found_with_the_segment_means():
    level = np.r_[np.full(20, 100.0), np.full(20, 150.0), np.full(20, 90.0)]
    noise = np.exp(np.random.default_rng(3).normal(0, 0.03, 60))
    found = find_change_points(level * noise, permutations=99)
    assert [c.index for c in found] == [20, 40]
    first, second = found
    values = level * noise
    assert first.mean_before == pytest.approx(values[:20].mean())
    assert first.mean_after == pytest.approx(values[20:40].mean())
    assert second.mean_before == pytest.approx(values[20:40].mean())
    assert second.mean_after == pytest.approx(values[40:].mean())
    assert second.ratio == pytest.approx(0.6, abs=0.03)


def test_a_noise_free_step_is_exact_and_a_constant_series_has_none():
    (cp,) = find_change_points([100.0] * 12 + [120.0] * 12, permutations=99)
    assert cp == ChangePoint(12, 0.01, 100.0, 120.0, 1.2)
    assert find_change_points([7.0] * 30, permutations=99) == []


def test_min_size_bounds_where_a_change_can_be_and_how_few_runs_suffice():
    values = [100.0] * 3 + [200.0] * 20
    assert all(c.index >= 5 for c in find_change_points(values, permutations=99))
    assert [c.index for c in find_change_points(values, permutations=99, min_size=3)] == [3]
    # Fewer than 2 * min_size values: no split exists, nothing is tested.
    assert find_change_points([1.0, 2.0, 50.0, 60.0], min_size=3) == []


def test_same_seed_same_answer_and_the_seed_only_moves_the_p_value():
    values = series(7, factor=1.06)           # a small step: p-values near the edge
    a = find_change_points(values, seed=3, p_max=0.5)
    assert a == find_change_points(values, seed=3, p_max=0.5)
    b = find_change_points(values, seed=4, p_max=0.5)
    assert [c.index for c in a][:1] == [c.index for c in b][:1]


def test_log_scale_sees_ratios_linear_scale_sees_differences():
    # A x2 step at a low level beside small absolute noise at a high level: on the log
    # scale the step stands out; the CLI uses log unless a value is 0.
    values = [10.0, 11.0, 10.0, 9.0, 10.0, 11.0, 20.0, 21.0, 19.0, 20.0, 22.0, 20.0]
    (cp,) = find_change_points(values, permutations=99, min_size=3)
    assert cp.index == 6
    assert find_change_points([0.0] * 6 + [5.0] * 6, permutations=99, min_size=3,
                              log=False)[0].index == 6


@pytest.mark.parametrize("values, kwargs, words", [
    ([1.0, 0.0, 2.0], {}, "<= 0 and has no log"),
    ([1.0, math.nan], {}, "finite"),
    ([1.0, math.inf], {"log": False}, "finite"),
    ([[1.0, 2.0]], {}, "one series"),
    ([1.0] * 20, {"min_size": 1}, "min_size must be at least 2"),
    ([1.0] * 20, {"p_max": 0.0}, "p_max"),
    ([1.0] * 20, {"permutations": 0}, "permutations"),
    ([1.0] * (MAX_VALUES + 1), {}, f"at most {MAX_VALUES}"),
])
def test_bad_input_is_a_value_error_naming_it(values, kwargs, words):
    with pytest.raises(ValueError, match=words):
        find_change_points(values, **kwargs)


def _ar_runs(rng, n, phi, sd=0.05):
    x = np.empty(n)
    x[0] = rng.normal() * sd
    for i in range(1, n):
        x[i] = phi * x[i - 1] + rng.normal() * sd * math.sqrt(1 - phi ** 2)
    return 20_000 * np.exp(x)


@pytest.mark.slow
def test_drifting_runs_rarely_show_a_change_and_a_step_is_no_wrong_change():
    """Issue 45: with no change but run-level AR(1) drift the plain permutation test
    found a change in 14 % (phi 0.3) and 40 % (phi 0.5) of 40-run series, blocks of runs
    alone 8 % and 14 %. With the step-beyond-drift gate, measured over 500 series each:
    1.0 % and 1.6 % (docs/figures.md); a 20 % step under drift 0.3 is found in 81 %,
    "drift: no verdict" otherwise, never a change elsewhere."""
    from irqlab.stats.changepoint import find_with_exchangeability
    for phi in (0.3, 0.5):
        rng = np.random.default_rng(int(phi * 10) + 1)
        found = sum(bool(find_with_exchangeability(_ar_runs(rng, 40, phi), seed=i)[0])
                    for i in range(200))
        # 200 series of a ~1.5 % rate: more than 8 has a probability below 1 %.
        assert found <= 8, (phi, found)
    rng = np.random.default_rng(9)
    hits = wrong = no_verdict = 0
    for i in range(60):
        x = _ar_runs(rng, 40, 0.3)
        x[20:] *= 1.2
        cps, ex = find_with_exchangeability(x, seed=i)
        hits += any(abs(c.index - 20) <= 2 for c in cps)
        wrong += any(abs(c.index - 20) > 2 for c in cps)
        no_verdict += ex.drift and not cps
    assert hits / 60 >= 0.65 and wrong <= 2 and hits + no_verdict >= 55, \
        (hits, wrong, no_verdict)


def test_a_staircase_is_two_changes_not_drift():
    """Two steps the same way: the second inside the first split's Y read as dependence
    and the trend said "drift: no verdict" (39 of 40 series of 60 independent runs)."""
    from irqlab.stats.changepoint import find_with_exchangeability
    rng = np.random.default_rng(5)
    found = 0
    for i in range(20):
        x = _ar_runs(rng, 60, 0.0)
        x[20:40] *= 1.2
        x[40:] *= 1.44
        cps, ex = find_with_exchangeability(x, seed=i)
        found += sorted(c.index for c in cps) == [20, 40] and not ex.drift
    assert found >= 18, found


def test_a_step_no_bigger_than_drift_makes_is_no_verdict():
    from irqlab.stats.changepoint import step_beyond_drift
    rng = np.random.default_rng(2)
    x = rng.normal(0, 0.05, 40)
    x[20:] += 0.15                                # 3 sd of the runs' noise
    # Beyond what independent runs (and a mild AR(1)) make; within what strong drift makes.
    assert step_beyond_drift(x, 0, 20, 40, 0.0, 0.01, 5)
    assert not step_beyond_drift(x, 0, 20, 40, 0.8, 0.01, 5)


def test_a_drifting_series_with_few_runs_says_no_verdict():
    from irqlab.stats.changepoint import find_with_exchangeability
    x = 20_000 * np.exp(np.linspace(0, 0.5, 12) + np.sin(np.arange(12)) * 0.01)
    cps, ex = find_with_exchangeability(x, min_size=3)
    assert ex.block_len > 1 and ex.lag1 > ex.bound
    assert ex.drift and cps == []
