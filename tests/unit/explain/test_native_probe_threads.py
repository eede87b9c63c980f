"""The probe's threads as the trace names them: the header's tids come from /proc at the
capture's start, which a pid namespace renumbers and a late thread misses; the trace's
tasks of the probe's name are found instead, and a capture in which none of the listed
threads appears is explained (all unexplained), not an internal error."""

from __future__ import annotations

from irqlab.explain.attribute import Explainer
from irqlab.explain.load import decode_capture
from irqlab.explain.native import probe_threads_by_name
from irqlab.trace.synth import PageWriter, encode, header_page_text

NS_MAIN, NS_THREAD = 2, 3                # what /proc said inside the namespace
KERNEL_THREAD, HOG = 7001, 7002          # what the kernel's trace records


def _trace(kernel_formats, page_header):
    w = PageWriter(page_header)
    fmt = kernel_formats["sched:sched_switch"]
    for ts, prev, prev_comm, nxt, next_comm in [
            (100, 0, "swapper/1", KERNEL_THREAD, "irqlab-native"),
            (200, KERNEL_THREAD, "irqlab-native", HOG, "irqlab-hog"),
            (300, HOG, "irqlab-hog", KERNEL_THREAD, "irqlab-native"),
            (400, KERNEL_THREAD, "irqlab-native", 0, "swapper/1")]:
        w.add(ts, encode(fmt, {"common_pid": prev, "prev_pid": prev, "prev_comm": prev_comm,
                               "prev_prio": 120, "prev_state": 1 if nxt == 0 else 0,
                               "next_pid": nxt, "next_comm": next_comm, "next_prio": 120}))
    header = {"header_page": header_page_text(page_header), "cpus": [1],
              "formats": {"sched:sched_switch": fmt.text},
              "vmm_threads": {str(NS_MAIN): "irqlab-native", str(NS_THREAD): "irqlab-native"}}
    return decode_capture(header, {1: w.data()})


def test_the_probe_threads_are_found_by_name_in_a_pid_namespace(kernel_formats, page_header):
    trace = _trace(kernel_formats, page_header)
    known = {NS_MAIN: "irqlab-native", NS_THREAD: "irqlab-native"}
    assert probe_threads_by_name(trace, known) == [KERNEL_THREAD]
    # Listed by the kernel's pid already: nothing to add.
    assert probe_threads_by_name(trace, {KERNEL_THREAD: "irqlab-native"}) == []


def test_threads_absent_from_the_capture_give_no_timeline(kernel_formats, page_header):
    ex = Explainer(_trace(kernel_formats, page_header), vcpu_tids=[])
    assert sorted(ex.threads) == [NS_MAIN, NS_THREAD]
    assert all(len(tl.starts) == 0 for tl in ex.threads.values())
