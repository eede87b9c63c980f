"""Who kept a runnable native probe thread off its CPU: a higher-priority task preempted
it; a lower-priority one cannot have, it held the CPU in non-preemptible kernel code."""

from __future__ import annotations

import pytest

from irqlab.explain.native import NativeAttributor

PROBE = 100


def _attributor(prio: dict[int, int]) -> NativeAttributor:
    # Only the priorities are read by _holder: no trace to build.
    nat = NativeAttributor.__new__(NativeAttributor)
    nat.prio = prio
    return nat


@pytest.mark.parametrize("their_prio, label", [
    (4, "preempted by hog/7 prio 95"),                      # FIFO 95 over FIFO 90
    (120, "non-preemptible hog/7 nice 0 (lower priority, held the CPU in the kernel; "
          "inferred)"),
    (29, "non-preemptible hog/7 prio 70 (lower priority, held the CPU in the kernel; "
         "inferred)"),
])
def test_the_holder_is_named_by_its_priority_against_the_probe(their_prio, label):
    nat = _attributor({PROBE: 9, 7: their_prio})            # probe: FIFO 90 (prio 9)
    assert nat._holder(7, "hog", PROBE) == label


def test_unknown_priorities_keep_preempted_by():
    assert _attributor({7: 120})._holder(7, "hog", PROBE) == "preempted by hog/7 nice 0"
    assert _attributor({PROBE: 9})._holder(7, "hog", None) == "preempted by hog/7"
