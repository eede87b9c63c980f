"""scripts/rtla-side-by-side's reading of rtla timerlat's stop trace (issue 29)."""

from __future__ import annotations

import importlib.util
from importlib.machinery import SourceFileLoader
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rtla-side-by-side"
_loader = SourceFileLoader("rtla_side_by_side", str(SCRIPT))
side = importlib.util.module_from_spec(importlib.util.spec_from_loader(_loader.name, _loader))
_loader.exec_module(side)

# Lines as rtla 6.1's saved timerlat_trace.txt has them (Debian 6.1.0-56-rt-amd64 guest).
_TRACE = """\
     rcu_preempt-17      [000] d..h1..    11.214532: #2676  context    irq timer_latency    238271 ns
     rcu_preempt-17      [000] d...3..    11.214576: thread_noise: rcu_preempt:17 start 11.214530799 duration 12073 ns
      timerlat/0-100     [000] .......    11.214583: #2676  context thread timer_latency    290048 ns
      irqlab-hog-91      [000] d..h...    11.223816: #2677  context    irq timer_latency     31446 ns
      irqlab-hog-91      [000] d...3..    11.224967: thread_noise:     rtla:99 start 11.223609135 duration 276368 ns
      irqlab-hog-91      [000] d...3..    11.225967: thread_noise: irqlab-hog:91 start 11.223009135 duration 1999000 ns
      timerlat/0-100     [000] .......    11.225080: #2677  context thread timer_latency   2076707 ns
"""


def test_the_culprit_is_the_thread_with_most_noise_in_the_stopping_activation():
    # rcu_preempt's noise belongs to activation #2676, before the stopping #2677.
    assert side.stop_culprit(_TRACE) == ("irqlab-hog/91", 1999000)


def test_no_thread_noise_no_culprit():
    lines = [ln for ln in _TRACE.splitlines() if "thread_noise" not in ln]
    assert side.stop_culprit("\n".join(lines)) is None
    assert side.stop_culprit("") is None


def test_the_stop_latencies_are_the_last_activation_s():
    assert side.stop_latencies(_TRACE) == (31446, 2076707)
    assert side.stop_latencies("") == (0, 0)


def test_guest_tally_counts_each_sample_s_largest_guest_cause():
    hog, idle = "guest: preempted by irqlab-hog/91 prio 95", "guest: IRQ latency: idle exit"
    js = {"samples": [
        {"causes": [{"cause": "host: vCPU thread preempted by x/1", "ns": 9000},
                    {"cause": hog, "ns": 2000}, {"cause": idle, "ns": 100}]},
        {"causes": [{"cause": idle, "ns": 3000}, {"cause": hog, "ns": 10}]},
        {"causes": [{"cause": hog, "ns": 2500}]},
        {"causes": [{"cause": "host: vCPU thread preempted by x/1", "ns": 5}]},
        {"causes": None}]}
    # host-side causes never count: rtla inside the guest cannot see them
    assert side.guest_tally(js) == [(hog, 2), (idle, 1)]
