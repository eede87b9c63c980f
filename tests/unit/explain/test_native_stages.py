"""A native spike's stages (deadline → timer IRQ entry → woken → switched in → handler)
on traces assembled from this kernel's formats: which are there, which are missing, and
which are not to be waited for."""

from __future__ import annotations

import pytest

from irqlab.explain.attribute import Explainer
from irqlab.explain.load import decode_capture
from irqlab.explain.native import NativeAttributor
from irqlab.trace.synth import PageWriter, encode, header_page_text

PROBE, HOG = 100, 500


def _attributor(formats, hdr_page, events) -> NativeAttributor:
    """events: (ts, "system:event", {fields}, common_pid) on CPU 0."""
    for key in ("irq_vectors:local_timer_entry", "irq_vectors:local_timer_exit"):
        if key not in formats:
            pytest.skip(f"this kernel has no {key}")
    return _attributor_from(formats, hdr_page, events)


def sw(ts, prev, state, nxt):
    names = {PROBE: "irqlab-native", HOG: "hog", 0: "swapper/0"}
    return (ts, "sched:sched_switch", {"prev_pid": prev, "prev_state": state,
                                       "next_pid": nxt, "prev_comm": names[prev],
                                       "next_comm": names[nxt]}, prev)


def timer(ts, exit_ts):
    return [(ts, "irq_vectors:local_timer_entry", {"vector": 236}, 0),
            (exit_ts, "irq_vectors:local_timer_exit", {"vector": 236}, 0)]


def waking(ts):
    return (ts, "sched:sched_waking", {"pid": PROBE, "target_cpu": 0}, 0)


def _asleep_then(events):
    return [(0, "ftrace:print", {"buf": "irqlab-trace-start"}, 1),
            sw(100, PROBE, 1, 0)] + events + [
            sw(9000, PROBE, 1, 0), (9500, "ftrace:print", {"buf": "irqlab-trace-stop"}, 1)]


def test_every_stage_of_a_plain_wakeup(kernel_formats, page_header):
    nat = _attributor(kernel_formats, page_header, _asleep_then(
        timer(1100, 1400) + [waking(1300), sw(1500, 0, 0, PROBE)]))
    att = nat.explain(0, 1000, 1600, 0)
    assert att.stages == [("deadline", 1000), ("timer IRQ entry", 1100),
                          ("probe thread woken", 1300), ("switched in", 1500),
                          ("handler", 1600)]
    assert att.stages_missing == [] and att.notes == []


def test_a_deadline_inside_a_running_timer_irq_is_its_entry(kernel_formats, page_header):
    # The tick's interrupt entered at 900, before the deadline (1000); its handler ran the
    # probe's expiry too and woke the thread at 1300: no entry of its own in the window.
    nat = _attributor(kernel_formats, page_header, _asleep_then(
        timer(900, 1400) + [waking(1300), sw(1500, 0, 0, PROBE)]))
    att = nat.explain(0, 1000, 1600, 0)
    assert [s for s, _t in att.stages] == ["deadline", "timer IRQ entry",
                                           "probe thread woken", "switched in", "handler"]
    assert dict(att.stages)["timer IRQ entry"] == 1000
    assert att.stages_missing == []
    assert att.notes == ["the deadline passed inside a timer IRQ entered 100 ns before it, "
                         "which ran the probe's expiry"]
    assert sum(att.causes.values()) == 600


def test_an_irq_that_exited_before_the_deadline_is_not_it(kernel_formats, page_header):
    # The tick's interrupt (700-800) ended before the deadline: the wake-up at 1300 came
    # from no traced timer entry, which is reported missing.
    nat = _attributor(kernel_formats, page_header, _asleep_then(
        timer(700, 800) + [waking(1300), sw(1500, 0, 0, PROBE)]))
    att = nat.explain(0, 1000, 1600, 0)
    assert "timer IRQ entry" not in dict(att.stages)
    assert att.stages_missing[0].startswith("timer IRQ entry")


def test_a_deadline_that_passed_while_preempted_waits_for_no_timer(kernel_formats,
                                                                    page_header):
    # The hog took the CPU just after the probe's last sample, before it slept again; the
    # deadline (1000) passed while it was runnable: no timer IRQ, no wake-up, only the
    # switch back in.
    nat = _attributor(kernel_formats, page_header, [
        (0, "ftrace:print", {"buf": "irqlab-trace-start"}, 1),
        sw(500, PROBE, 0, HOG), sw(3000, HOG, 1, PROBE), sw(9000, PROBE, 1, 0),
        (9500, "ftrace:print", {"buf": "irqlab-trace-stop"}, 1)])
    att = nat.explain(0, 1000, 3100, 0)
    assert att.stages == [("deadline", 1000), ("switched in", 3000), ("handler", 3100)]
    assert att.stages_missing == []
    assert att.notes == ["the deadline passed while the probe thread was runnable: no "
                         "timer IRQ or wake-up to wait for"]
    assert att.causes[f"preempted by hog/{HOG} prio 95"] == 2000


def _arm64_attributor(formats, hdr_page, events) -> NativeAttributor:
    """As _attributor, on a kernel without x86's irq_vectors (an arm64 guest's)."""
    for key in ("irq:irq_handler_entry", "irq:irq_handler_exit"):
        if key not in formats:
            pytest.skip(f"this kernel has no {key}")
    return _attributor_from({k: v for k, v in formats.items()
                             if not k.startswith("irq_vectors:")}, hdr_page, events)


def trace_of(formats, hdr_page, events, **header):
    """A one-CPU native capture of ``events`` ((ts, "system:event", {fields},
    common_pid)), decoded; ``header``: keys added to the capture's header."""
    w = PageWriter(hdr_page)
    for ts, key, vals, pid in sorted(events, key=lambda e: e[0]):
        w.add(ts, encode(formats[key], {"common_pid": pid, **vals}))
    keys = [k for k in formats if k != "ftrace:print"]
    header = {"header_page": header_page_text(hdr_page), "cpus": [0], "clock": "mono",
              "formats": {k: formats[k].text for k in keys + ["ftrace:print"]},
              "enabled": keys, "vmm_threads": {str(PROBE): "irqlab-native"},
              "stats": {"0": {"overrun": 0}}, **header}
    return decode_capture(header, {0: w.data()})


def _attributor_from(formats, hdr_page, events) -> NativeAttributor:
    ex = Explainer(trace_of(formats, hdr_page, events), vcpu_tids=[],
                   other_tids={PROBE: "irqlab-native"})
    return NativeAttributor(ex, {PROBE: 9, HOG: 4}, [PROBE])


def irq(ts, exit_ts, number, name):
    return [(ts, "irq:irq_handler_entry", {"irq": number, "name": name}, 0),
            (exit_ts, "irq:irq_handler_exit", {"irq": number, "ret": 1}, 0)]


def test_arm64s_timer_irq_is_the_arch_timer_handler(kernel_formats, page_header):
    # An arm64 guest has no local_timer vector: its timer interrupt is the IRQ its
    # driver names "arch_timer" (irq 11 on QEMU virt). Another IRQ before it (virtio)
    # is not the timer's, and the hrtimer expiry inside the handler comes later.
    nat = _arm64_attributor(kernel_formats, page_header, _asleep_then(
        irq(1050, 1080, 40, "virtio0-input.0") + irq(1100, 1400, 11, "arch_timer")
        + [(1200, "timer:hrtimer_expire_entry", {"hrtimer": 1, "function": 2, "now": 0},
            0), waking(1300), sw(1500, 0, 0, PROBE)]))
    att = nat.explain(0, 1000, 1600, 0)
    assert att.stages == [("deadline", 1000), ("timer IRQ entry", 1100),
                          ("probe thread woken", 1300), ("switched in", 1500),
                          ("handler", 1600)]
    assert att.stages_missing == [] and sum(att.causes.values()) == 600
    assert att.causes["hardirq: irq 40 virtio0-input.0"] == 30
