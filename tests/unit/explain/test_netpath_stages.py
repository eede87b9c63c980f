"""A net run's packet path (irqlab/explain/netpath.py) on traces assembled from this
kernel's formats: where QEMU takes the packet up, woken for it or already awake."""

from __future__ import annotations

import pytest

from irqlab.explain.load import decode_capture
from irqlab.explain.netpath import TO_QEMU, TO_SENDER, NetPathExplainer
from irqlab.trace.formats import parse_format
from irqlab.trace.synth import PageWriter, encode, header_page_text

SENDER, MAIN, VCPU, HOG = 300, 99, 100, 500
SENT, TAP_QUEUED = 900, 1000            # user-space send; the packet queued to the tap
REPLY = 8000                            # the reply's hand-over to the host stack (traced)
RX_STAMP = 7998                         # the kernel's RX stamp, just before its tracepoint
# A kernel-stamped sample: the send time plus the kernel's RTT (TX stamp ~ TAP_QUEUED).
KERNEL_RECEIVED = SENT + (RX_STAMP - TAP_QUEUED)
USER_RECEIVED = 9000                    # user-space stamps: after recvmsg() returned


@pytest.fixture(scope="module")
def formats(kernel_formats, tracefs):
    out = dict(kernel_formats)
    for name in ("net_dev_queue", "netif_rx"):
        try:
            out[f"net:{name}"] = parse_format(tracefs.read(f"events/net/{name}/format"), "net")
        except OSError:
            pytest.skip(f"this kernel has no net:{name} event")
    return out


def _trace(formats, page_header, events, peers=True):
    """events: (ts, cpu, "system:event", {fields}, common_pid)."""
    writers = {0: PageWriter(page_header), 1: PageWriter(page_header)}
    for ts, cpu, key, vals, pid in sorted(events, key=lambda e: e[0]):
        writers[cpu].add(ts, encode(formats[key], {"common_pid": pid, **vals}))
    keys = [k for k in formats if k != "ftrace:print"]
    header = {"header_page": header_page_text(page_header), "cpus": [0, 1],
              "formats": {k: formats[k].text for k in keys + ["ftrace:print"]},
              "enabled": keys,
              "vmm_threads": {str(VCPU): "CPU 0/TCG", str(MAIN): "qemu-system-x86"},
              "vcpu_tids": [VCPU],
              "stats": {"0": {"overrun": 0}, "1": {"overrun": 0}}}
    if peers:
        header["peer_threads"] = {str(SENDER): "irqlab-netsend"}
    return decode_capture(header, {c: w.data() for c, w in writers.items()})


def sw(ts, cpu, prev, state, nxt, comm_prev, comm_next):
    return (ts, cpu, "sched:sched_switch", {"prev_pid": prev, "prev_state": state,
                                            "next_pid": nxt, "prev_comm": comm_prev,
                                            "next_comm": comm_next}, prev)


def waking(ts, cpu, pid, by):
    return (ts, cpu, "sched:sched_waking", {"pid": pid, "target_cpu": cpu}, by)


def _round_trip(main_at_send):
    """The sender on CPU 1 sends at SENT; QEMU's main loop (CPU 0) takes the packet up,
    kicks the vCPU (a VMM thread's wake-up, later), hands another packet's reply over at
    7700 and this one's at REPLY, which wakes the sender's receiving thread."""
    ev = [(0, 0, "ftrace:print", {"buf": "irqlab-trace-start"}, 1),
          sw(10, 1, 0, 0, SENDER, "swapper/1", "irqlab-netsend"),
          sw(20, 0, 0, 0, VCPU, "swapper/0", "CPU 0/TCG"),
          sw(30, 0, VCPU, 1, 0, "CPU 0/TCG", "swapper/0")]        # the vCPU halts
    ev += main_at_send
    ev += [(TAP_QUEUED, 1, "net:net_dev_queue", {"name": "irqtap0", "len": 64}, SENDER),
           sw(1050, 1, SENDER, 1, 0, "irqlab-netsend", "swapper/1"),
           waking(3000, 0, VCPU, MAIN),                           # the kick
           sw(3100, 0, MAIN, 1, VCPU, "qemu-system-x86", "CPU 0/TCG"),
           sw(7000, 0, VCPU, 1, 0, "CPU 0/TCG", "swapper/0"),
           waking(7500, 0, MAIN, 0),
           sw(7600, 0, 0, 0, MAIN, "swapper/0", "qemu-system-x86"),
           (7700, 0, "net:netif_rx", {"name": "irqtap0", "len": 64}, MAIN),
           (REPLY, 0, "net:netif_rx", {"name": "irqtap0", "len": 64}, MAIN),
           waking(8100, 0, SENDER, MAIN),
           sw(8200, 1, 0, 0, SENDER, "swapper/1", "irqlab-netsend"),
           (20_000, 0, "ftrace:print", {"buf": "irqlab-trace-stop"}, 1)]
    return ev


def _asleep():
    """QEMU's main loop asleep in poll until the packet wakes it (1100), on CPU at 1200."""
    return [sw(40, 0, 0, 0, MAIN, "swapper/0", "qemu-system-x86"),
            sw(50, 0, MAIN, 1, 0, "qemu-system-x86", "swapper/0"),
            waking(1100, 0, MAIN, SENDER),
            sw(1200, 0, 0, 0, MAIN, "swapper/0", "qemu-system-x86")]


def _stages(att):
    return [(name, ts) for name, ts in att.stages]


def test_a_sleeping_main_loop_is_woken_for_the_packet(formats, page_header):
    att = NetPathExplainer(_trace(formats, page_header, _round_trip(_asleep()))).explain(
        0, SENT, KERNEL_RECEIVED)
    # Kernel stamps: from the tap's queue to the RX stamp; the reply is the hand-over just
    # after the stamp (before, the last one before the sample's end: 7700, another's).
    assert _stages(att) == [("sent", SENT), ("host stack: to irqtap0", TAP_QUEUED),
                            ("QEMU woken", 1100), ("QEMU running", 1200),
                            ("reply from the guest: irqtap0", RX_STAMP),
                            ("received", RX_STAMP)]
    assert att.causes[TO_QEMU] == 1100 - TAP_QUEUED
    assert att.causes.get(TO_SENDER, 0) == 0
    assert sum(att.causes.values()) == KERNEL_RECEIVED - SENT


def test_user_space_stamps_follow_the_reply_to_the_receiving_thread(formats, page_header):
    att = NetPathExplainer(_trace(formats, page_header, _round_trip(_asleep()))).explain(
        0, SENT, USER_RECEIVED, kernel_ts=False)
    assert _stages(att) == [("sent", SENT), ("host stack: to irqtap0", TAP_QUEUED),
                            ("QEMU woken", 1100), ("QEMU running", 1200),
                            ("reply from the guest: irqtap0", REPLY),
                            ("sender woken", 8100), ("received", USER_RECEIVED)]
    assert att.causes[TO_QEMU] == 1100 - SENT
    assert att.causes[TO_SENDER] == 8100 - REPLY
    assert sum(att.causes.values()) == USER_RECEIVED - SENT


def test_the_sender_threads_are_found_by_name_without_the_header(formats, page_header):
    # Captures before 2026-11-27 did not list them; comms decode as bytes.
    px = NetPathExplainer(_trace(formats, page_header, _round_trip([]), peers=False))
    assert px.sender == [SENDER]


def test_a_running_main_loop_takes_the_packet_without_a_wake_up(formats, page_header):
    # Before, the first VMM wake-up after the packet (the vCPU's kick at 3000) stood for
    # "QEMU woken": the guest's part began 2 us late and the host stack got them.
    running = [sw(40, 0, 0, 0, MAIN, "swapper/0", "qemu-system-x86")]
    att = NetPathExplainer(_trace(formats, page_header, _round_trip(running))).explain(
        0, SENT, KERNEL_RECEIVED)
    assert _stages(att) == [("sent", SENT), ("host stack: to irqtap0", TAP_QUEUED),
                            ("QEMU already awake", TAP_QUEUED), ("QEMU running", TAP_QUEUED),
                            ("reply from the guest: irqtap0", RX_STAMP),
                            ("received", RX_STAMP)]
    assert TO_QEMU not in att.causes
    assert att.stages_missing == []
    assert sum(att.causes.values()) == KERNEL_RECEIVED - SENT


def test_a_preempted_main_loop_is_awake_and_waits_for_its_cpu(formats, page_header):
    preempted = [sw(40, 0, 0, 0, MAIN, "swapper/0", "qemu-system-x86"),
                 sw(500, 0, MAIN, 0, HOG, "qemu-system-x86", "hog"),   # preempted: R
                 sw(1500, 0, HOG, 1, MAIN, "hog", "qemu-system-x86")]
    att = NetPathExplainer(_trace(formats, page_header, _round_trip(preempted))).explain(
        0, SENT, KERNEL_RECEIVED)
    assert _stages(att)[2:4] == [("QEMU already awake", TAP_QUEUED), ("QEMU running", 1500)]
    assert att.causes[f"preempted by hog/{HOG}"] == 1500 - TAP_QUEUED
    assert sum(att.causes.values()) == KERNEL_RECEIVED - SENT
