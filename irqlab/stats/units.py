"""Unit conversion between raw counter ticks and nanoseconds.

All statistics are kept in raw ticks (exact integers); nanoseconds are derived only
for display and storage, with one rounding rule everywhere: round half away from zero.
"""

from __future__ import annotations

from fractions import Fraction
from numbers import Rational

import numpy as np

_NS_PER_S = 1_000_000_000


def round_half_away(x: float | int | Fraction) -> int:
    """Round to the nearest integer, ties away from zero (2.5 -> 3, -2.5 -> -3).

    Python's round() rounds ties to even, which would make 0.5-tick means flip
    between neighbours; the seed logs' C printf-style rounding is half away from zero.
    The rational value of a float is used, so there is no double rounding.
    """
    if isinstance(x, (int, np.integer)):
        return int(x)
    frac = Fraction(x)  # exact value of the float / rational
    whole, rem = divmod(abs(frac.numerator), frac.denominator)
    if 2 * rem >= frac.denominator:
        whole += 1
    return whole if frac.numerator >= 0 else -whole


def ticks_to_ns(tick: int | float, tick_hz: int) -> int:
    """Convert ticks to integer nanoseconds: tick * 10^9 / tick_hz, rounded half away from zero.

    Integer ticks use pure integer arithmetic (no float rounding at any size); a float
    (e.g. a mean) is converted through its exact rational value.
    """
    if tick_hz <= 0:
        raise ValueError(f"tick_hz must be positive, got {tick_hz}")
    if isinstance(tick, (int, np.integer)):
        num = int(tick) * _NS_PER_S
        q, r = divmod(abs(num), int(tick_hz))
        if 2 * r >= tick_hz:
            q += 1
        return q if num >= 0 else -q
    if isinstance(tick, (float, np.floating, Rational)):
        return round_half_away(Fraction(tick) * _NS_PER_S / int(tick_hz))
    raise TypeError(f"tick must be an int or float, got {type(tick).__name__}")
