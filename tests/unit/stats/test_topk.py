"""TopK (irqlab.stats.topk): the k largest values of a stream in batches, with their
positions, equal to a sort of the whole stream (ties included)."""

import numpy as np
import pytest

from irqlab.stats.topk import TopK


@pytest.mark.parametrize("n,k,batch", [(1000, 7, 13), (100_000, 2001, 999),
                                       (50, 100, 7), (300_000, 6000, 100_000)])
def test_top_values_and_positions_match_a_full_sort(n, k, batch):
    rng = np.random.default_rng(n + k)
    x = rng.integers(0, 500, n).astype(float)        # many ties at the k-th value
    top = TopK(k)
    for i in range(0, n, batch):
        top.add(x[i:i + batch])
    values, positions = top.ascending()
    assert np.array_equal(values, np.sort(x)[-k:])
    assert np.array_equal(x[positions], values)
    assert np.unique(positions).size == positions.size
    assert top.seen == n


def test_nothing_kept_for_k_zero():
    top = TopK(0)
    top.add(np.arange(10.0))
    values, positions = top.ascending()
    assert values.size == 0 and positions.size == 0 and top.seen == 10
