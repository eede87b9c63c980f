import math
from fractions import Fraction

import numpy as np
import pytest

from irqlab.stats import Moments

from ._ref import heavy_tailed


def _exact_std(values):
    ints = [int(v) for v in values]
    mean = Fraction(sum(ints), len(ints))
    return math.sqrt(float(sum((v - mean) ** 2 for v in ints) / len(ints)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_against_numpy(seed):
    values = heavy_tailed(np.random.default_rng(seed), 50_000)
    m = Moments()
    m.add(values)
    assert m.count == values.size
    assert m.total == sum(values.tolist())
    assert m.min == values.min() and m.max == values.max()
    assert m.mean == pytest.approx(values.mean(), rel=1e-12)
    assert m.stddev == pytest.approx(values.std(ddof=0), rel=1e-9)
    assert m.stddev != pytest.approx(values.std(ddof=1), rel=1e-9)  # population, not sample


def test_exact_where_floating_point_cancels():
    # Huge offset, tiny spread: the naive float formula returns garbage here.
    values = np.array([10**15 + d for d in (0, 1, 2, 3, 4)], np.int64)
    m = Moments()
    m.add(values)
    assert m.stddev == _exact_std(values) == math.sqrt(2.0)
    assert m.mean == 10**15 + 2


def test_batch_split_is_bit_identical():
    rng = np.random.default_rng(5)
    values = heavy_tailed(rng, 30_000)
    whole = Moments()
    whole.add(values)
    cuts = np.sort(rng.choice(values.size, 17, replace=False))
    parts = Moments()
    for part in np.split(values, cuts):
        parts.add(part)
    assert (parts.count, parts.total, parts.total_sq, parts.min, parts.max) == \
        (whole.count, whole.total, whole.total_sq, whole.min, whole.max)
    assert parts.mean == whole.mean and parts.stddev == whole.stddev
    merged = Moments()
    for part in np.split(values, cuts):
        other = Moments()
        other.add(part)
        merged.merge(other)
    assert merged.stddev == whole.stddev


def test_empty_and_single():
    m = Moments()
    m.add(np.array([], np.int64))
    assert (m.count, m.mean, m.stddev, m.min, m.max) == (0, None, None, None, None)
    m.add(np.array([-7], np.int64))
    assert (m.count, m.mean, m.stddev, m.min, m.max) == (1, -7.0, 0.0, -7, -7)
