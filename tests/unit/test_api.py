"""irqlab.api: exact tick -> ns conversion of whole arrays."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.api import ticks_to_ns_array
from irqlab.stats import ticks_to_ns


@pytest.mark.parametrize("hz", [2_596_118_000, 33_333_333, 1_000_000_000, 62_500_000, 3])
def test_array_conversion_equals_the_scalar_rule(hz):
    rng = np.random.default_rng(hz)
    # the largest tick whose ns fits int64 (at 1 GHz a tick is a ns)
    limit = 2**63 - 1 if hz == 10**9 else ((2**63 - 1) // 10**9) * hz
    top = min(limit, 2**63 - 1)
    ticks = np.concatenate([
        rng.integers(-10**6, 10**6, 2000),
        rng.integers(0, top, 2000),               # TSC-sized counters: tick * 1e9 overflows
        -rng.integers(0, top, 200),
        np.array([0, 1, -1, hz // 2, -(hz // 2), hz, top, -top]),
    ]).astype(np.int64)
    got = ticks_to_ns_array(ticks, hz)
    want = [ticks_to_ns(int(t), hz) for t in ticks]
    assert got.tolist() == want
    if limit < 2**63 - 1:
        with pytest.raises(OverflowError, match="beyond int64"):
            ticks_to_ns_array(np.array([limit + 1], np.int64), hz)
