"""Threads as the kernel's trace names them: the header's tids come from /proc at the
capture's start, which a pid namespace renumbers and a late thread misses. Uniquely named
threads (QEMU's vCPUs) are renamed to the kernel's pids when the capture is decoded; the
native probe's threads (one shared name) are found by name; a capture in which none of
the listed threads appears is explained (all unexplained), not an internal error."""

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


def test_uniquely_named_threads_are_renamed_to_the_kernel_pids(kernel_formats, page_header):
    # QEMU in a container: /proc said vCPU thread 5; the kernel's trace says 9005.
    w = PageWriter(page_header)
    fmt = kernel_formats["sched:sched_switch"]
    for ts, prev, prev_comm, nxt, next_comm in [
            (100, 0, "swapper/1", 9005, "CPU 0/KVM"),
            (200, 9005, "CPU 0/KVM", 9004, "qemu-system-x86"),
            (300, 9004, "qemu-system-x86", 0, "swapper/1")]:
        w.add(ts, encode(fmt, {"common_pid": prev, "prev_pid": prev, "prev_comm": prev_comm,
                               "prev_prio": 120, "prev_state": 1, "next_pid": nxt,
                               "next_comm": next_comm, "next_prio": 120}))
    header = {"header_page": header_page_text(page_header), "cpus": [1],
              "formats": {"sched:sched_switch": fmt.text},
              "vmm_threads": {"4": "qemu-system-x86", "5": "CPU 0/KVM"},
              "vcpu_tids": [5]}
    trace = decode_capture(header, {1: w.data()})
    assert trace.header["vcpu_tids"] == [9005]
    assert trace.header["vmm_threads"] == {"9004": "qemu-system-x86", "9005": "CPU 0/KVM"}
    assert trace.header["pid_namespace_map"] == {"4": 9004, "5": 9005}
    ex = Explainer(trace)
    assert ex.vcpus == [9005] and len(ex.threads[9005].starts) > 0


def test_names_shared_by_several_threads_are_not_renamed(kernel_formats, page_header):
    trace = _trace(kernel_formats, page_header)      # two listed 'irqlab-native', one seen
    assert trace.header["vmm_threads"] == {str(NS_MAIN): "irqlab-native",
                                           str(NS_THREAD): "irqlab-native"}
    assert "pid_namespace_map" not in trace.header
