"""The IRQ and thread distributions of a split run (irqlab.stats.parts)."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.stats.parts import part_summary, part_ticks


def test_part_summary_is_nearest_rank_like_numpys_inverted_cdf():
    rng = np.random.default_rng(7)
    lat = rng.integers(0, 2_000_000, 12_345)
    got = part_summary(lat, 1_000_000_000, unsplit=3)
    want = {k: int(np.quantile(lat, q, method="inverted_cdf"))
            for k, q in (("p50_ns", 0.5), ("p99_ns", 0.99), ("p999_ns", 0.999))}
    assert {k: got[k] for k in want} == want
    assert got["max_ns"] == int(lat.max())
    assert got["samples"] == 12_345 and got["unsplit"] == 3


def test_ticks_become_ns_at_the_runs_rate():
    got = part_summary(np.array([3, 5, 7]), 2_000_000_000, unsplit=0)   # 0.5 ns a tick
    assert got["max_ns"] == 4 and got["p50_ns"] == 3       # 3.5 rounds half away


def test_an_empty_part_has_no_figures():
    got = part_summary(np.empty(0, np.int64), 1_000_000_000, unsplit=5)
    assert got == {"samples": 0, "unsplit": 5, "p50_ns": None, "p99_ns": None,
                   "p999_ns": None, "max_ns": None}


def test_the_parts_add_up_across_the_u64_wrap():
    top = np.uint64(2**64 - 10)
    dl = np.array([top], np.uint64)
    irq = dl + np.uint64(15)                    # wraps past 2^64
    en = irq + np.uint64(20)
    assert part_ticks(dl, en, irq, "irq").tolist() == [15]
    assert part_ticks(dl, en, irq, "thread").tolist() == [20]
    assert part_ticks(dl, en, irq, "total").tolist() == [35]
    with pytest.raises(ValueError, match="not one of total, irq, thread"):
        part_ticks(dl, en, irq, "softirq")


def test_a_windows_parts_are_the_min_and_max_of_each_part():
    from irqlab.stats.parts import WindowParts
    got = WindowParts.of(np.array([100, 200, 300]), np.array([150, 290, 330]),
                         np.array([110, 260, 300]))
    assert got == WindowParts(3, 0, 60, 30, 40)
    assert got.as_dict(2_000_000_000) == {"split_samples": 3, "irq_min_ns": 0,
                                          "irq_max_ns": 30, "thread_min_ns": 15,
                                          "thread_max_ns": 20}
    none = WindowParts.of(np.empty(0), np.empty(0), np.empty(0))
    assert none.as_dict(1_000_000_000)["irq_max_ns"] is None and none.split == 0
