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

from irqlab.explain.clock import (MSR_ANCHORS, RING_READS, WAKE_ANCHORS, check_causality,
                                  fit_clock)
from irqlab.explain.load import decode_capture
from irqlab.trace.synth import PageWriter, encode

VCPU, OTHER = 100, 200
OFF = 7_654_321              # true offset: guest tick = host tick + OFF
PERIOD = 100_000
N = 40
HOST0 = 10_000_000
ISR_TO_WRMSR = 3_000         # host ticks from ISR entry to the traced WRMSR (+ jitter)
WAKE_TO_ISR = 800            # host ticks from the halt wakeup to ISR entry (+ jitter)
EXISTING_KEYS = {"method", "offset_tick", "error_bound_ns", "lower_tick", "upper_tick",
                 "anchors", "consistent"}


def hdr_page_text(h) -> str:
    return (f"\tfield: u64 timestamp;\toffset:{h.ts_offset};\tsize:8;\tsigned:0;\n"
            f"\tfield: local_t commit;\toffset:{h.commit_offset};"
            f"\tsize:{h.commit_size};\tsigned:1;\n"
            f"\tfield: char data;\toffset:{h.data_offset};\tsize:{h.data_size};\tsigned:0;\n")


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
    header = {"header_page": hdr_page_text(page_header), "cpus": [0], "clock": clock,
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
