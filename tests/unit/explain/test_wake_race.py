"""A wake-up that races its target's switch-out (irqlab.explain.timeline.wakings_of).

The waker's sched_waking is written while the target is still leaving its CPU (it set
itself sleeping and was dequeued), so it falls *before* the target's sleeping
sched_switch; the wake-up completes after it, on the target's CPU, where sched_wakeup is
written with that CPU's current task (the idle task) as common_pid. Seen on a real
capture (tests/integration/test_linux_guest_explain.py, arm64): QEMU's main loop woke
the vCPU thread this way, a SCHED_FIFO hog then held the CPU for 2 ms, and the vCPU
thread looked asleep (the guest halted: the guest's own time) for all of it — 8 of 73
of the host hog's spikes went unnamed.
"""

from __future__ import annotations

import pytest

from irqlab.explain.attribute import Explainer
from irqlab.explain.timeline import RUNNABLE, SLEEPING

from .test_attribution import HOG, MAIN, VCPU, _trace, mark, sw
from .test_fast_paths_match_golden import fast_path  # noqa: F401  (C and numpy)

pytestmark = pytest.mark.usefixtures("fast_path")


def _waking(ts, by):
    return (ts, "sched:sched_waking", {"pid": VCPU, "target_cpu": 0}, by)


def _wakeup(ts, on_cpu_task):
    return (ts, "sched:sched_wakeup", {"pid": VCPU, "target_cpu": 0}, on_cpu_task)


def _scenario(waking_ts: int) -> list:
    """The vCPU thread runs, sleeps at 1,050, is woken by the main loop (its waking at
    ``waking_ts``, the wake-up done at 1,100 on its CPU), and a hog holds the CPU from
    1,200 to 5,200."""
    return [mark(0, "irqlab-trace-start"),
            sw(100, 0, 0, VCPU, "swapper/0", "CPU 0/TCG"),
            _waking(waking_ts, MAIN),
            sw(1050, VCPU, 1, 0, "CPU 0/TCG", "swapper/0"),
            _wakeup(1100, 0),
            sw(1200, 0, 0, HOG, "swapper/0", "hog"),
            sw(5200, HOG, 1, VCPU, "hog", "CPU 0/TCG"),
            sw(5600, VCPU, 1, 0, "CPU 0/TCG", "swapper/0"),
            mark(6000, "irqlab-trace-stop")]


def _states(tr) -> list[tuple[str, int, int, int]]:
    tl = Explainer(tr).threads[VCPU]
    return [(seg.state, lo, hi, seg.waker) for seg, lo, hi in tl.between(0, 6000)]


def test_a_waking_before_the_switch_out_ends_the_sleep_at_its_wakeup(kernel_formats,
                                                                       page_header):
    tr = _trace(kernel_formats, page_header, _scenario(waking_ts=1000))
    states = _states(tr)
    # asleep only until the wake-up completed, woken by the main loop (the waking's
    # waker, not the idle task the wakeup was written by), then kept off by the hog
    assert (SLEEPING, 1050, 1100, MAIN) in states, states
    assert (RUNNABLE, 1100, 5200, -1) in states, states
    att = Explainer(tr).explain(0, 1000, 5300, 4300, vcpu=VCPU)
    assert att.causes.get(f"preempted by hog/{HOG}", 0) == 4000, att.causes


def test_the_usual_order_is_unchanged(kernel_formats, page_header):
    # waking after the switch-out: it ends the sleep, the later wakeup changes nothing
    tr = _trace(kernel_formats, page_header, _scenario(waking_ts=1080))
    states = _states(tr)
    assert (SLEEPING, 1050, 1080, MAIN) in states, states
    assert (RUNNABLE, 1080, 5200, -1) in states, states


def test_without_sched_wakeup_the_waking_alone_is_read_as_before(kernel_formats,
                                                                   page_header):
    # A capture that did not enable sched_wakeup: no way to see the race, and no change.
    events = [e for e in _scenario(waking_ts=1000) if e[1] != "sched:sched_wakeup"]
    enabled = [k for k in kernel_formats if k not in ("ftrace:print", "sched:sched_wakeup")]
    states = _states(_trace(kernel_formats, page_header, events, enabled=enabled))
    assert (SLEEPING, 1050, 5200, -1) in states, states
