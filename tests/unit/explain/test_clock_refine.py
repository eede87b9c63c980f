"""irqlab.explain.clock.refine_with_causality: the offsets the most run-period
constraints allow, not the intersection of all of them in time order.

Every guest time the vCPU ran at lies, mapped to the host, in one of the vCPU thread's
running periods. In CI a Linux-guest fit came back ±157 ns wide with half of the guest's
own events outside those periods: intersected one after another, the first wrong
constraint (a switch the capture placed late) had narrowed the bounds to beside it, and
every right one after it was dropped as disjoint.
"""

from __future__ import annotations

import numpy as np

from irqlab.explain.clock import ClockMap, refine_with_causality
from irqlab.explain.timeline import RUNNING, SLEEPING, ThreadTimeline, _STATE_NAMES

TRUE_OFFSET = 1_000_000          # guest tick - host tick
PERIOD, RUN = 300_000, 100_000   # the vCPU runs 100 us of every 300 us (host ticks)


def _timeline(n: int) -> ThreadTimeline:
    starts = np.arange(n, dtype=np.int64) * PERIOD
    seg_starts = np.sort(np.r_[starts, starts + RUN])
    ends = np.r_[seg_starts[1:], n * PERIOD]
    states = np.tile([_STATE_NAMES.index(RUNNING), _STATE_NAMES.index(SLEEPING)], n)
    zeros = np.zeros(2 * n, np.int64)
    return ThreadTimeline(7, seg_starts, ends, states.astype(np.int8), zeros, zeros - 1,
                          ends.copy())


def _guest_times(n: int, rng) -> np.ndarray:
    """Guest times of events inside the run periods (host time + the true offset)."""
    host = rng.integers(0, n, 4000) * PERIOD + rng.integers(0, RUN, 4000)
    return np.sort(host) + TRUE_OFFSET


def _clock(half_width: int, offset: int = TRUE_OFFSET) -> ClockMap:
    return ClockMap(offset=offset, error=half_width, method="anchors",
                    lower=offset - half_width, upper=offset + half_width)


def test_right_constraints_narrow_the_bounds_around_the_true_offset():
    rng = np.random.default_rng(1)
    got = refine_with_causality(_clock(60_000), _timeline(200), _guest_times(200, rng))
    assert got.lower <= TRUE_OFFSET <= got.upper
    assert got.upper - got.lower < 2_000, (got.lower, got.upper)
    assert "outside the bounds" not in got.method


def test_wrong_constraints_first_do_not_capture_the_bounds():
    rng = np.random.default_rng(2)
    times = _guest_times(200, rng)
    # Three events first that the capture places 30 us past their run period's end (a
    # switch-out recorded late): each allows only offsets that exclude the true one.
    wrong = np.array([0, 1, 2]) * PERIOD + RUN + 30_000 + TRUE_OFFSET
    tl = _timeline(200)
    for w in wrong:                        # the setup: each is wrong, and unambiguous
        host = w - TRUE_OFFSET
        assert not any(s <= host < e for s, e in zip(*tl.spans("running")))
    got = refine_with_causality(_clock(60_000), tl, np.r_[wrong, times])
    assert got.lower <= TRUE_OFFSET <= got.upper, (got.lower, got.upper)
    assert got.upper - got.lower < 2_000
    assert "3 outside every run period" in got.method, got.method


def test_no_unambiguous_time_leaves_the_clock_as_it_was():
    # bounds wider than a period: every time meets two run periods
    clock = _clock(400_000)
    got = refine_with_causality(clock, _timeline(20), _guest_times(20,
                                                                 np.random.default_rng(3)))
    assert got is clock
