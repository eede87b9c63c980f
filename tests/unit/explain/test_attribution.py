"""Attribution and KVM timer-path stages on traces assembled from this kernel's formats."""

from __future__ import annotations


from irqlab.explain.attribute import (CPU_IDLE, UNEXPLAINED, VCPU_BLOCKED, VCPU_RUNNING,
                                      VCPU_STOPPED, Explainer)
from irqlab.explain.load import decode_capture
from irqlab.trace.synth import PageWriter, encode, header_page_text

VCPU, MAIN, HOG = 100, 99, 500


def _trace(formats, hdr_page, events, lose_before=None, enabled=None):
    """events: (ts, "system:event", {fields}, common_pid) on CPU 0."""
    w = PageWriter(hdr_page)
    for ts, key, vals, pid in sorted(events, key=lambda e: e[0]):
        if lose_before is not None and ts == lose_before:
            w.lose_events()
        w.add(ts, encode(formats[key], {"common_pid": pid, **vals}))
    keys = enabled if enabled is not None else [k for k in formats if k != "ftrace:print"]
    header = {"header_page": header_page_text(hdr_page), "cpus": [0],
              "formats": {k: formats[k].text for k in keys + ["ftrace:print"]},
              "enabled": keys, "vmm_threads": {str(VCPU): "CPU 0/KVM", str(MAIN): "qemu"},
              "vcpu_tids": [VCPU], "stats": {"0": {"overrun": 0}}}
    return decode_capture(header, {0: w.data()})


def sw(ts, prev, state, nxt, comm_prev="x", comm_next="x"):
    return (ts, "sched:sched_switch", {"prev_pid": prev, "prev_state": state, "next_pid": nxt,
                                       "prev_comm": comm_prev, "next_comm": comm_next}, prev)


def mark(ts, text):
    return (ts, "ftrace:print", {"buf": text}, 1)


def _kvm_wakeup_scenario():
    return [mark(0, "irqlab-trace-start"),
            sw(100, VCPU, 1, 0, "CPU 0/KVM", "swapper/0"),              # vCPU halts
            (1200, "timer:hrtimer_expire_entry", {"hrtimer": 0xABC}, 0),
            (1300, "kvm:kvm_apic_accept_irq", {"vec": 236}, 0),
            (1350, "sched:sched_waking", {"pid": VCPU, "target_cpu": 0}, 0),
            sw(1400, 0, 0, HOG, "swapper/0", "hog"),                     # FIFO hog first
            sw(2400, HOG, 1, VCPU, "hog", "CPU 0/KVM"),
            (2450, "kvm:kvm_vcpu_wakeup", {}, VCPU),
            (2500, "kvm:kvm_inj_virq", {"vector": 236}, VCPU),
            (2550, "kvm:kvm_entry", {"vcpu_id": 0}, VCPU),
            sw(3000, VCPU, 1, 0, "CPU 0/KVM", "swapper/0"),
            mark(5000, "irqlab-trace-stop")]


def test_causes_add_up_and_name_the_preempting_task(kernel_formats, page_header):
    tr = _trace(kernel_formats, page_header, _kvm_wakeup_scenario())
    att = Explainer(tr).explain(0, 1000, 2600, 1600)
    assert att.status == "explained"
    assert att.causes == {VCPU_BLOCKED: 350, CPU_IDLE: 50, f"preempted by hog/{HOG}": 1000,
                          VCPU_RUNNING: 200}
    assert sum(att.causes.values()) == 1600 and att.ranked()[-1] == (UNEXPLAINED, 0)


def test_kvm_stages_in_order(kernel_formats, page_header):
    tr = _trace(kernel_formats, page_header, _kvm_wakeup_scenario())
    att = Explainer(tr).explain(0, 1000, 2600, 1600)
    assert att.stages == [("deadline", 1000), ("host timer fired", 1200),
                          ("interrupt accepted", 1300), ("vCPU woken", 2450),
                          ("interrupt injected", 2500), ("guest entered", 2550),
                          ("ISR entry", 2600)]
    assert att.stages_missing == []


def test_timer_armed_note_finds_the_write_of_this_deadline(kernel_formats, page_header):
    # Two deadline writes before the window: the one whose value is this sample's guest
    # deadline (77_000) armed it, not the later one (a re-arm for another value).
    msr = "kvm:kvm_msr"
    events = _kvm_wakeup_scenario() + [
        (40, msr, {"write": 1, "ecx": 0x6E0, "data": 77_000}, VCPU),
        (90, msr, {"write": 1, "ecx": 0x6E0, "data": 88_000}, VCPU)]
    tr = _trace(kernel_formats, page_header, events)
    by_value = Explainer(tr).explain(0, 1000, 2600, 1600, deadline_tick=77_000)
    assert "timer armed (MSR 0x6e0) 960 ticks before the deadline" in by_value.notes
    by_time = Explainer(tr).explain(0, 1000, 2600, 1600)
    assert "timer armed (MSR 0x6e0) 910 ticks before the deadline" in by_time.notes


def test_missing_kvm_events_are_named_not_guessed(kernel_formats, page_header):
    # This machine's software KVM never fires the VMX-only events: model that.
    events = [e for e in _kvm_wakeup_scenario()
              if e[1] not in ("kvm:kvm_inj_virq", "kvm:kvm_entry")]
    enabled = [k for k in kernel_formats if k not in ("ftrace:print", "kvm:kvm_entry")]
    tr = _trace(kernel_formats, page_header, events, enabled=enabled)
    att = Explainer(tr).explain(0, 1000, 2600, 1600)
    assert [s for s, _ in att.stages] == ["deadline", "host timer fired",
                                          "interrupt accepted", "vCPU woken", "ISR entry"]
    assert any("kvm_inj_virq never fired" in m for m in att.stages_missing)
    assert any("kvm_entry not traced" in m for m in att.stages_missing)


def test_lost_events_make_the_sample_incomplete(kernel_formats, page_header):
    tr = _trace(kernel_formats, page_header, _kvm_wakeup_scenario(), lose_before=2400)
    ex = Explainer(tr)
    att = ex.explain(0, 1000, 2600, 1600)
    assert att.status == "incomplete" and "lost" in att.reason
    assert att.causes == {UNEXPLAINED: 1600}
    # A sample after the loss is explained normally.
    assert ex.explain(1, 2600, 2700, 100).status == "explained"


def test_stopped_vcpu_thread(kernel_formats, page_header):
    events = [mark(0, "irqlab-trace-start"), sw(1100, VCPU, 4, 0, "CPU 0/KVM"),
              (2000, "sched:sched_waking", {"pid": VCPU, "target_cpu": 0}, 777),
              sw(2100, 0, 0, VCPU, "swapper/0", "CPU 0/KVM"), mark(5000, "irqlab-trace-stop")]
    tr = _trace(kernel_formats, page_header, events)
    att = Explainer(tr).explain(0, 1000, 2200, 1200)
    assert att.causes[VCPU_STOPPED] == 900


def _signal(ts, sig, pid, result=0):
    return (ts, "signal:signal_generate", {"sig": sig, "pid": pid, "group": 1,
                                           "result": result, "comm": "qemu"}, 7)


def _preempted_then_stopped(kernel_formats, page_header, *more):
    # The vCPU thread waits behind a CFS hog; SIGSTOP (to QEMU's main thread: the whole
    # process stops) comes at 1500; it runs at 2000 only to stop at 2010.
    events = [mark(0, "irqlab-trace-start"), sw(1000, VCPU, 0, HOG, "CPU 0/KVM", "hog"),
              _signal(1500, 19, MAIN), sw(2000, HOG, 0, VCPU, "hog", "CPU 0/KVM"),
              sw(2010, VCPU, 4, HOG, "CPU 0/KVM", "hog"), *more,
              mark(5000, "irqlab-trace-stop")]
    return Explainer(_trace(kernel_formats, page_header, events))


def test_a_stop_signal_stops_a_vcpu_thread_that_waits_for_its_cpu(kernel_formats,
                                                                  page_header):
    ex = _preempted_then_stopped(
        kernel_formats, page_header, _signal(3000, 18, MAIN),
        (3000, "sched:sched_waking", {"pid": VCPU, "target_cpu": 0}, 7),
        sw(3100, HOG, 0, VCPU, "hog", "CPU 0/KVM"), sw(3300, VCPU, 1, HOG, "CPU 0/KVM", "hog"))
    att = ex.explain(0, 1000, 3200, 2200)
    assert att.causes[f"preempted by hog/{HOG}"] == 500 + 100     # before, after SIGCONT
    assert att.causes[VCPU_STOPPED] == 500 + 990
    assert att.causes[VCPU_RUNNING] == 10 + 100


def test_a_stop_undone_before_the_thread_ran_is_no_stop(kernel_formats, page_header):
    events = [mark(0, "irqlab-trace-start"), sw(1000, VCPU, 0, HOG, "CPU 0/KVM", "hog"),
              _signal(1500, 19, VCPU), _signal(1700, 18, VCPU),
              _signal(1800, 19, 4242),                       # another process's stop
              sw(2000, HOG, 0, VCPU, "hog", "CPU 0/KVM"), mark(5000, "irqlab-trace-stop")]
    att = Explainer(_trace(kernel_formats, page_header, events)).explain(0, 1000, 2100, 1100)
    assert att.causes[VCPU_STOPPED] == 200
    assert att.causes[f"preempted by hog/{HOG}"] == 800


def test_blocked_vcpu_blames_what_delayed_its_waker(kernel_formats, page_header):
    # TCG: QEMU's main loop fires the guest timer and kicks the vCPU thread.
    events = [mark(0, "irqlab-trace-start"), sw(100, VCPU, 1, MAIN, "CPU 0/KVM", "qemu"),
              sw(1100, MAIN, 0, HOG, "qemu", "hog"),                    # main preempted
              sw(1900, HOG, 1, MAIN, "hog", "qemu"),
              (1950, "sched:sched_waking", {"pid": VCPU, "target_cpu": 0}, MAIN),
              sw(2000, MAIN, 1, VCPU, "qemu", "CPU 0/KVM"), mark(5000, "irqlab-trace-stop")]
    tr = _trace(kernel_formats, page_header, events)
    att = Explainer(tr).explain(0, 1000, 2100, 1100)
    assert att.causes[f"preempted by hog/{HOG}"] == 800
    assert att.causes[VCPU_BLOCKED] == 150
    # Not followed (linux-guest charges the main loop's delay itself): all blocked.
    att = Explainer(tr).explain(0, 1000, 2100, 1100, follow_waker=False)
    assert att.causes[VCPU_BLOCKED] == 950 and f"preempted by hog/{HOG}" not in att.causes


def test_window_outside_the_capture_is_not_traced(kernel_formats, page_header):
    tr = _trace(kernel_formats, page_header, _kvm_wakeup_scenario())
    att = Explainer(tr).explain(0, 6000, 7000, 1000)
    assert att.status == "not traced" and att.causes == {UNEXPLAINED: 1000}

