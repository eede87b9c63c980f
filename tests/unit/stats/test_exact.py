import numpy as np
import pytest

from irqlab.stats.exact import as_tick_array, exact_sum, exact_sum_squares

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


def _py_sum(values):
    return sum(int(v) for v in values)


def _py_sum_sq(values):
    return sum(int(v) * int(v) for v in values)


@pytest.mark.parametrize("high", [10, 2**20, 2**31, 2**40, 2**62, INT64_MAX])
def test_sums_match_python_ints(high):
    rng = np.random.default_rng(high % 1000)
    values = rng.integers(-high, high, 20_000, dtype=np.int64, endpoint=True)
    assert exact_sum(values) == _py_sum(values)
    assert exact_sum_squares(values) == _py_sum_sq(values)


def test_overflowing_int64_reductions_are_exact():
    values = np.array([INT64_MAX, INT64_MAX, INT64_MIN, INT64_MIN, INT64_MIN], np.int64)
    assert exact_sum(values) == _py_sum(values)          # numpy's sum would wrap
    assert exact_sum_squares(values) == _py_sum_sq(values)
    # Medium values whose squares fit but whose sum of squares does not.
    values = np.full(100_000, 2**30, np.int64)
    assert exact_sum_squares(values) == 100_000 * 2**60
    # Chunked dot path: squares ~2^44, 2^20 values.
    values = np.full(2**20, -(2**22) - 3, np.int64)
    assert exact_sum_squares(values) == 2**20 * (2**22 + 3) ** 2


def test_empty():
    empty = np.array([], np.int64)
    assert exact_sum(empty) == 0 and exact_sum_squares(empty) == 0


def test_as_tick_array():
    assert as_tick_array([1, 2]).dtype == np.int64
    assert as_tick_array(np.array([1, 2], np.uint32)).tolist() == [1, 2]
    with pytest.raises(TypeError):
        as_tick_array(np.array([1.5]))
    with pytest.raises(ValueError):
        as_tick_array(np.array([2**63], np.uint64))
