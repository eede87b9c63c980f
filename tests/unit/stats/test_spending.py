"""Group-sequential levels (irqlab.stats.spending): the boundaries spend the level as the
spending function says, checked against a direct simulation of the looks' joint normal
law, and the first look's is the spending function's own quantile."""

import math

import numpy as np
import pytest

from irqlab.stats import spending
from irqlab.stats.special import normal_quantile


def _z(p: float) -> float:
    return normal_quantile(p)


@pytest.mark.parametrize("info,alpha,kind", [
    ((1, 2, 3, 4, 5), 0.05, spending.OBRIEN_FLEMING),
    ((1, 2, 3, 4, 5), 0.05, spending.POCOCK),
    (tuple(range(3, 11)), 0.025, spending.OBRIEN_FLEMING),
    ((3, 4, 5, 6), 0.025, spending.OBRIEN_FLEMING),
])
def test_simulated_first_crossings_spend_the_level_as_the_function_says(info, alpha, kind):
    levels = spending.nominal_levels(tuple(float(i) for i in info), alpha, kind)
    bounds = np.array([_z(1 - p / 2) for p in levels])
    rng = np.random.default_rng(len(info))
    n_paths = 200_000
    inc_sd = np.sqrt(np.diff(np.concatenate([[0.0], np.asarray(info, float)])))
    z = np.cumsum(rng.standard_normal((n_paths, len(info))) * inc_sd, axis=1) \
        / np.sqrt(np.asarray(info, float))
    crossed_by = (np.cumsum(np.abs(z) >= bounds, axis=1) > 0).mean(axis=0)
    want = [spending.spent(i / info[-1], alpha, kind) for i in info]
    # Binomial sd of a share near 0.05 over 200,000 paths is 0.0005.
    assert np.allclose(crossed_by, want, atol=0.0015), (crossed_by, want)
    assert crossed_by[-1] <= alpha + 0.0015


def test_the_first_look_is_the_spending_function_quantile():
    levels = spending.nominal_levels((3.0, 6.0, 9.0), 0.05, spending.OBRIEN_FLEMING)
    first = spending.spent(1 / 3, 0.05, spending.OBRIEN_FLEMING)
    assert levels[0] == pytest.approx(first, rel=0.02)
    # O'Brien-Fleming spends almost nothing early and nearly all at the end.
    assert levels[0] < levels[1] < levels[2] < 0.05
    assert spending.spent(1.0, 0.05, spending.POCOCK) == pytest.approx(0.05)
    assert math.isclose(spending.spent(1.0, 0.05, spending.OBRIEN_FLEMING), 0.05,
                        rel_tol=1e-6)


def test_an_unknown_function_is_refused():
    with pytest.raises(ValueError, match="spending function"):
        spending.spent(0.5, 0.05, "haybittle")
