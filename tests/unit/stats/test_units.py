from fractions import Fraction

import numpy as np
import pytest

from irqlab.stats import round_half_away, ticks_to_ns

HZ_30NS = 33_333_333  # 30.000000300 ns per tick


def _reference(tick: int | float, hz: int) -> int:
    exact = Fraction(tick) * 10**9 / hz
    whole = abs(exact.numerator) // exact.denominator
    if abs(exact) - whole >= Fraction(1, 2):
        whole += 1
    return whole if exact >= 0 else -whole


@pytest.mark.parametrize("tick,ns", [(306, 9180), (3, 90), (265, 7950), (376, 11280),
                                     (263, 7890), (0, 0), (-3, -90)])
def test_seed_log_values(tick, ns):
    assert ticks_to_ns(tick, HZ_30NS) == ns


def test_ties_round_away_from_zero():
    # 1 tick at 2 GHz = 0.5 ns exactly: a tie.
    assert ticks_to_ns(1, 2_000_000_000) == 1
    assert ticks_to_ns(-1, 2_000_000_000) == -1
    assert ticks_to_ns(3, 2_000_000_000) == 2  # 1.5 -> 2 (banker's would also give 2)
    assert ticks_to_ns(5, 2_000_000_000) == 3  # 2.5 -> 3 (banker's would give 2)
    assert ticks_to_ns(2.5, 10**9) == 3 and ticks_to_ns(-2.5, 10**9) == -3


def test_large_ticks_use_integer_math():
    tick = 2**62 + 1
    assert ticks_to_ns(tick, 3) == _reference(tick, 3)
    assert ticks_to_ns(np.int64(2**62), 7) == _reference(2**62, 7)


def test_random_against_fraction_reference():
    rng = np.random.default_rng(3)
    for tick, hz in zip(rng.integers(-10**12, 10**12, 500).tolist(),
                        rng.integers(1, 5 * 10**9, 500).tolist()):
        assert ticks_to_ns(tick, hz) == _reference(tick, hz)
    for x in rng.normal(0, 1e4, 200).tolist():
        assert ticks_to_ns(x, HZ_30NS) == _reference(x, HZ_30NS)


def test_round_half_away():
    assert [round_half_away(x) for x in (0.5, 1.5, 2.5, -0.5, -2.5, 2.49, -2.51)] == \
        [1, 2, 3, -1, -3, 2, -3]


def test_rejects_bad_input():
    with pytest.raises(ValueError):
        ticks_to_ns(1, 0)
    with pytest.raises(TypeError):
        ticks_to_ns("1", 10)
