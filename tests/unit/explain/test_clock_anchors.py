"""Clock mapping from kvm_msr deadline anchors, halt wakeups and debugfs offsets.

Synthetic captures built from this kernel's real event formats: a guest whose TSC is the
host TSC plus a known offset arms each deadline (kvm_msr, MSR 0x6e0) inside the previous
sample's ISR, halts, and is woken before each ISR. The fitted offset must contain the true
one within the reported bound, and the kvm_msr anchors must tighten that bound.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from irqlab.explain.clock import (EOI_ANCHORS, MSR_ANCHORS, RING_READS, WAKE_ANCHORS,
                                  check_causality, fit_clock)
from irqlab.explain.load import decode_capture
from irqlab.trace.formats import parse_format
from irqlab.trace.synth import PageWriter, encode, header_page_text

VCPU, OTHER = 100, 200
OFF = 7_654_321              # true offset: guest tick = host tick + OFF
PERIOD = 100_000
N = 40
HOST0 = 10_000_000
ISR_TO_WRMSR = 3_000         # host ticks from ISR entry to the traced WRMSR (+ jitter)
WAKE_TO_ISR = 800            # host ticks from the halt wakeup to ISR entry (+ jitter)
EXISTING_KEYS = {"method", "offset_tick", "error_bound_ns", "lower_tick", "upper_tick",
                 "anchors", "consistent"}


def _guest(drop_arming: set[int] = frozenset()):
    """Samples (guest ticks) and the host events of the scenario in the module doc."""
    rng = np.random.default_rng(7)
    dl = (HOST0 + OFF + 50_000 + PERIOD * np.arange(N)).astype(np.int64)
    lat = rng.integers(5_000, 20_000, N)
    en = dl + lat
    host_en = en - OFF
    events = []
    # D_0 is armed by the probe's main code, D_j (j >= 1) in the ISR of sample j-1.
    arm = np.concatenate([[host_en[0] - 80_000],
                          host_en[:-1] + ISR_TO_WRMSR + rng.integers(0, 2_000, N - 1)])
    for j in range(N):
        if j not in drop_arming:
            events.append((int(arm[j]), "kvm:kvm_msr",
                           {"write": 1, "ecx": 0x6E0, "data": int(dl[j])}, VCPU))
        wake = host_en[j] - WAKE_TO_ISR - int(rng.integers(0, 3_000))
        events.append((int(wake), "kvm:kvm_vcpu_wakeup", {}, VCPU))
    # Noise that must not count: another MSR, another thread, an unknown value.
    events += [(int(host_en[3] + 500), "kvm:kvm_msr", {"write": 1, "ecx": 0x80B, "data": 0}, VCPU),
               (int(host_en[4] + 500), "kvm:kvm_msr",
                {"write": 1, "ecx": 0x6E0, "data": int(dl[20])}, OTHER),
               (int(host_en[5] + 500), "kvm:kvm_msr",
                {"write": 1, "ecx": 0x6E0, "data": int(dl[-1]) + PERIOD}, VCPU)]
    return np.arange(N, dtype=np.int64), dl, en, host_en, events


def _ring_reads(host_en: np.ndarray, en: np.ndarray, every: int = 7):
    """A few ring reads at a poor phase (late after a publication): loose bounds."""
    events, anchors = [], []
    for n, j in enumerate(range(2, N - 2, every)):
        ta = int(host_en[j] + PERIOD // 2)
        events += [(ta, "ftrace:print", {"buf": f"irqlab-anchor a {n}"}, 1),
                   (ta + 200, "ftrace:print", {"buf": f"irqlab-anchor b {n}"}, 1)]
        anchors.append([n, j + 1, int(en[j])])          # head = j + 1 records, last = j
    return events, anchors


def _trace(formats, page_header, events, anchors, debugfs=None, clock="x86-tsc"):
    need = ("kvm:kvm_msr", "kvm:kvm_vcpu_wakeup", "ftrace:print")
    if any(k not in formats for k in need):
        pytest.skip("this kernel has no kvm tracepoints")
    w = PageWriter(page_header)
    for ts, key, vals, pid in sorted(events, key=lambda e: e[0]):
        w.add(ts, encode(formats[key], {"common_pid": pid, **vals}))
    keys = [k for k in formats if k != "ftrace:print"]
    header = {"header_page": header_page_text(page_header), "cpus": [0], "clock": clock,
              "formats": {k: formats[k].text for k in keys + ["ftrace:print"]},
              "enabled": keys, "vmm_threads": {str(VCPU): "CPU 0/KVM"},
              "vcpu_tids": [VCPU], "stats": {"0": {"overrun": 0}}, "anchors": anchors}
    if debugfs is not None:
        header["kvm_debugfs"] = debugfs
    return decode_capture(header, {0: w.data()})


def _contains(clock, true_offset: int) -> bool:
    return clock.offset - clock.error <= true_offset <= clock.offset + clock.error


def test_msr_anchors_contain_the_true_offset_and_tighten_the_bound(kernel_formats,
                                                                    page_header):
    seq, dl, en, host_en, events = _guest()
    marks, anchors = _ring_reads(host_en, en)
    tr = _trace(kernel_formats, page_header, events + marks, anchors)
    ring_only = fit_clock(tr, seq, en, "kvm", None)
    both = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert ring_only.consistent and both.consistent
    assert _contains(ring_only, OFF) and _contains(both, OFF)
    assert both.lower <= OFF <= both.upper
    assert both.error < ring_only.error / 4, (both.error, ring_only.error)
    # Every arming write of the vCPU thread is used, none of the noise.
    assert both.msr_anchors == N
    assert both.sources[WAKE_ANCHORS].used == N - 1
    assert both.anchors == ring_only.anchors == len(anchors)
    assert both.method == f"fitted from {RING_READS} and {MSR_ANCHORS}"
    # Bound sides: ISR entry -> WRMSR below, wakeup -> ISR entry above.
    assert OFF - both.lower <= ISR_TO_WRMSR + 2_000
    assert both.upper - OFF <= WAKE_TO_ISR + 3_000
    d = both.as_dict(1_000_000_000)
    assert EXISTING_KEYS <= set(d) and d["msr_anchors"] == N
    assert set(d["bounds_by_source"]) == {RING_READS, MSR_ANCHORS, WAKE_ANCHORS}
    json.dumps(d)


def test_msr_anchors_alone_without_ring_reads(kernel_formats, page_header):
    seq, dl, en, _host_en, events = _guest()
    tr = _trace(kernel_formats, page_header, events, [])
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.consistent and _contains(clock, OFF) and clock.anchors == 0
    assert clock.method == f"fitted from {MSR_ANCHORS}"


def test_a_lost_arming_event_never_makes_a_wrong_bound(kernel_formats, page_header):
    # Without the write arming D_11, the halt wakeup before ISR 11 lies between the
    # writes arming D_10 and D_12: pairing them would bound the offset by ISR 10's entry
    # from a wakeup after it (wrong by a period). Such a pair must not be used.
    seq, dl, en, host_en, events = _guest(drop_arming={11})
    tr = _trace(kernel_formats, page_header, events, [])
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.msr_anchors == N - 1
    assert clock.sources[WAKE_ANCHORS].used == N - 3
    assert clock.consistent and _contains(clock, OFF)


def _debugfs(offset: int, ratio: int | None = None, frac: int | None = None) -> dict:
    row = {"vm": "1409-9", "vcpu": 0, "pid": VCPU, "tsc_offset": offset,
           "tsc_scaling_ratio": ratio, "frac_bits": frac, "mono": 0}
    return {"reads": [dict(row, read_at="start"), dict(row, read_at="end")],
            "why_not": None, "missing": [], "changed": False}


def test_debugfs_offset_is_used_when_the_anchors_agree(kernel_formats, page_header):
    seq, dl, en, host_en, events = _guest()
    marks, anchors = _ring_reads(host_en, en)
    tr = _trace(kernel_formats, page_header, events + marks, anchors, debugfs=_debugfs(OFF))
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.offset == OFF and clock.consistent
    assert clock.method.startswith("debugfs tsc-offset (read at start and end), checked "
                                   "against")
    assert [c["status"] for c in clock.candidates] == ["accepted"]
    # The error bound is what the anchors prove around it, not zero.
    assert clock.error == max(OFF - clock.lower, clock.upper - OFF)
    # A scaling ratio of exactly 1.0 is the same offset.
    tr1 = _trace(kernel_formats, page_header, events + marks, anchors,
                 debugfs=_debugfs(OFF, 1 << 48, 48))
    assert fit_clock(tr1, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU).offset == OFF


def test_debugfs_offset_contradicting_the_anchors_is_rejected(kernel_formats, page_header):
    seq, dl, en, host_en, events = _guest()
    marks, anchors = _ring_reads(host_en, en)
    wrong = OFF + 3 * PERIOD
    tr = _trace(kernel_formats, page_header, events + marks, anchors,
                debugfs=_debugfs(wrong))
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.offset != wrong and _contains(clock, OFF)
    assert clock.method == f"fitted from {RING_READS} and {MSR_ANCHORS}"
    (cand,) = clock.candidates
    assert cand["source"] == "debugfs" and cand["status"] == "rejected"
    assert "outside the anchor bounds" in cand["why"]
    # A trace clock that is not the TSC cannot use it at all.
    tr_mono = _trace(kernel_formats, page_header, events + marks, anchors,
                     debugfs=_debugfs(OFF), clock="mono")
    c2 = fit_clock(tr_mono, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert c2.candidates[0]["status"] == "unusable"


def test_causality_flags_samples_outside_their_mapped_window(kernel_formats, page_header):
    seq, dl, en, _host_en, events = _guest()
    tr = _trace(kernel_formats, page_header, events, [])
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    ok = check_causality(clock, seq, en)
    assert ok.causality == {"checked": N + N - 1, "violations": 0, "samples": []}
    # Mapped too early (offset too large): the wakeups come after the mapped entries
    # (every sample but the last, which no arming write follows) ...
    late = check_causality(replace(clock, offset=OFF + 10_000), seq, en)
    assert late.causality["violations"] == N - 1
    assert late.causality["samples"] == list(range(N - 1))
    assert any("woke from halt" in n for n in late.violations[5])
    # ... and by two periods, the deadlines are armed after them too.
    later = check_causality(replace(clock, offset=OFF + 2 * PERIOD), seq, en)
    assert later.causality["violations"] == N
    assert any("armed (kvm_msr)" in n and "after its mapped ISR entry" in n
               for n in later.violations[N - 1])
    # Mapped too late: the WRMSR written inside ISR j precedes ISR j's mapped entry.
    early = check_causality(replace(clock, offset=OFF - 10_000), seq, en)
    assert early.causality["violations"] == N - 1
    assert any("next deadline was armed" in n for n in early.violations[5])
    assert json.dumps(late.as_dict(1_000_000_000))


# --- kvm_eoi anchors --------------------------------------------------------------------
# The guest's EOI write of ISR j lies between its TSC read and its WRMSR arming D_{j+1}.
# "upstream" KVM traces one kvm_eoi per ISR (the timer vector); "pvm" is what this
# host's software backend (kvm_pvm) was measured to do: a timer-vector kvm_eoi *before*
# the ISR's TSC read, then the guest's write with vector -1 (in-service bit already clear).

TIMER_VEC, OTHER_VEC = 0x40, 0xEF
EOI_AFTER_ENTRY = 400        # host ticks from ISR entry to the guest's EOI (+ jitter < 600)
PRE_EOI = 150                # pvm: host ticks from its early EOI to the ISR entry


@pytest.fixture(scope="module")
def eoi_formats(kernel_formats, tracefs):
    try:
        text = tracefs.read("events/kvm/kvm_eoi/format")
    except OSError:
        pytest.skip("this kernel has no kvm:kvm_eoi")
    return {**kernel_formats, "kvm:kvm_eoi": parse_format(text, "kvm")}


def _eois(host_en: np.ndarray, mode: str, drop: set[int] = frozenset(),
          accept: bool = True) -> list:
    """kvm_eoi (and kvm_apic_accept_irq) events of every ISR; ``drop``: ISRs whose guest
    EOI event is lost."""
    rng = np.random.default_rng(11)
    out = []
    for j, t in enumerate(host_en.tolist()):
        if accept:
            out.append((t - 300, "kvm:kvm_apic_accept_irq", {"apicid": 0, "vec": TIMER_VEC},
                        VCPU))
        if mode == "pvm":
            out.append((t - PRE_EOI, "kvm:kvm_eoi", {"apicid": 0, "vector": TIMER_VEC},
                        VCPU))
        if j not in drop:
            out.append((t + EOI_AFTER_ENTRY + int(rng.integers(0, 600)), "kvm:kvm_eoi",
                        {"apicid": 0, "vector": -1 if mode == "pvm" else TIMER_VEC}, VCPU))
    return out


def test_eoi_anchors_tighten_the_lower_bound(eoi_formats, page_header):
    seq, dl, en, host_en, events = _guest()
    without = fit_clock(_trace(eoi_formats, page_header, events, []), seq, en, "kvm", None,
                        deadline=dl, vcpu_tid=VCPU)
    # No accept events: the timer vector is read from the EOIs themselves. Another
    # thread's EOIs do not count.
    noise = [(int(host_en[6] + 100), "kvm:kvm_eoi", {"apicid": 0, "vector": TIMER_VEC},
              OTHER)]
    tr = _trace(eoi_formats, page_header, events + _eois(host_en, "upstream", accept=False)
                + noise, [])
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.consistent and _contains(clock, OFF) and clock.lower <= OFF <= clock.upper
    assert clock.eoi_anchors == N - 1
    assert clock.lower == clock.sources[EOI_ANCHORS].lower > without.lower
    assert OFF - clock.lower <= EOI_AFTER_ENTRY + 600 < OFF - without.lower
    assert clock.upper - clock.lower < (without.upper - without.lower) / 2
    d = clock.as_dict(1_000_000_000)
    assert EXISTING_KEYS <= set(d) and d["eoi_anchors"] == N - 1
    src = d["bounds_by_source"][EOI_ANCHORS]
    assert (src["timer_vector"], src["pattern"], src["windows"], src["skipped"]) == \
        (TIMER_VEC, [TIMER_VEC], N - 1, 0)
    assert "rejected" not in src
    ok = check_causality(clock, seq, en)
    assert ok.causality["checked"] == N + (N - 1) + (N - 1)
    assert ok.causality["violations"] == 0
    # Mapped too late by more than the EOI lag: each EOI now precedes its mapped entry.
    late = check_causality(replace(clock, offset=OFF - 2_000), seq, en)
    assert any("EOI (kvm_eoi)" in n for n in late.violations[5])
    json.dumps(d)


def test_eoi_anchor_is_the_last_eoi_and_a_lost_guest_eoi_skips_the_window(eoi_formats,
                                                                         page_header):
    seq, dl, en, host_en, events = _guest()
    tr = _trace(eoi_formats, page_header, events + _eois(host_en, "pvm"), [])
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.consistent and _contains(clock, OFF) and clock.lower <= OFF
    assert clock.eoi_anchors == N - 1 and clock.eoi.pattern == (TIMER_VEC, -1)
    assert OFF - clock.lower <= EOI_AFTER_ENTRY + 600
    # The guest EOIs of ISRs 9 and 20 are lost: their windows hold only the early EOI,
    # which precedes the ISR's TSC read (as an anchor: offset >= OFF + PRE_EOI, wrong).
    tr = _trace(eoi_formats, page_header, events + _eois(host_en, "pvm", drop={9, 20}), [])
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.eoi_anchors == N - 3 and clock.eoi.skipped == 2
    assert not {9, 20} & set(clock.eoi.idx.tolist())
    assert clock.consistent and clock.lower <= OFF and _contains(clock, OFF)


def test_an_eoi_without_both_arming_writes_is_not_used(eoi_formats, page_header):
    # The write arming D_11 (in ISR 10) is lost, and with it ISR 10's EOI event (events
    # are lost in bursts): the window between the writes arming D_10 and D_12 then holds
    # one EOI, ISR 11's, like any window; it must not be used for either sample.
    seq, dl, en, host_en, events = _guest(drop_arming={11})
    tr = _trace(eoi_formats, page_header,
                events + _eois(host_en, "upstream", drop={10}), [])
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.eoi_anchors == N - 3 and clock.eoi.windows == N - 3
    assert not {10, 11} & set(clock.eoi.idx.tolist())
    assert clock.consistent and _contains(clock, OFF)


def test_eois_of_another_vector_are_ignored(eoi_formats, page_header):
    seq, dl, en, host_en, events = _guest()
    # ISR 7's EOI is lost and another interrupt's EOI (before ISR 7's TSC read) is all its
    # window holds; window 8 has one more besides its own.
    other = [(int(host_en[j] - 100), "kvm:kvm_eoi", {"apicid": 0, "vector": OTHER_VEC},
              VCPU) for j in (7, 8)]
    tr = _trace(eoi_formats, page_header,
                events + _eois(host_en, "upstream", drop={7}) + other, [])
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.eoi.vector == TIMER_VEC
    idx = set(clock.eoi.idx.tolist())
    assert 7 not in idx and 8 in idx and clock.eoi_anchors == N - 2
    assert clock.consistent and clock.lower <= OFF and _contains(clock, OFF)


def test_eois_before_the_isr_are_rejected_by_the_other_bounds(eoi_formats, page_header):
    # A backend whose only kvm_eoi comes at delivery, before the ISR's TSC read: the
    # pattern is regular, but the bound it gives contradicts the wakeups; rejected.
    seq, dl, en, host_en, events = _guest()
    early = [(int(t - 2_000), "kvm:kvm_eoi", {"apicid": 0, "vector": TIMER_VEC}, VCPU)
             for t in host_en.tolist()]
    tr = _trace(eoi_formats, page_header, events + early, [])
    clock = fit_clock(tr, seq, en, "kvm", None, deadline=dl, vcpu_tid=VCPU)
    assert clock.sources[EOI_ANCHORS].lower > OFF
    assert clock.sources[EOI_ANCHORS].rejected and clock.eoi_anchors == 0
    assert clock.consistent and _contains(clock, OFF) and clock.uppers_dropped == 0
    d = clock.as_dict(1_000_000_000)
    assert "rejected" in d["bounds_by_source"][EOI_ANCHORS]
    assert check_causality(clock, seq, en).causality["checked"] == N + N - 1
