"""switch_priorities: each task's priority from sched_switch, on either side of a switch."""

from __future__ import annotations

from irqlab.explain.native import switch_priorities
from irqlab.trace.synth import PageWriter, encode, header_page_text

PROBE, HOG, OTHER = 300, 400, 500


def _capture(formats, hdr_page, switches):
    """switches: (ts, prev_pid, prev_prio, next_pid, next_prio) on CPU 0."""
    w = PageWriter(hdr_page)
    fmt = formats["sched:sched_switch"]
    for ts, prev, pprio, nxt, nprio in switches:
        w.add(ts, encode(fmt, {"common_pid": prev, "prev_pid": prev, "prev_prio": pprio,
                               "next_pid": nxt, "next_prio": nprio}))
    header = {"header_page": header_page_text(hdr_page), "cpus": [0],
              "formats": {"sched:sched_switch": fmt.text}}
    return header, {0: w.data()}


def test_a_task_seen_only_leaving_the_cpu_has_its_priority(kernel_formats, page_header):
    # The hog's switch-in was on a lost page: only its switch-out (prev_prio) is left.
    header, per_cpu = _capture(kernel_formats, page_header,
                               [(100, HOG, 4, PROBE, 9), (200, PROBE, 9, OTHER, 120)])
    assert switch_priorities(header, per_cpu) == {HOG: 4, PROBE: 9, OTHER: 120}


def test_the_latest_switch_wins(kernel_formats, page_header):
    # A task boosted from nice 0 to SCHED_FIFO 95 (kernel prio 4) between two switches.
    header, per_cpu = _capture(kernel_formats, page_header,
                               [(100, 0, 120, HOG, 120), (200, HOG, 120, 0, 120),
                                (300, 0, 120, HOG, 4)])
    assert switch_priorities(header, per_cpu)[HOG] == 4


def test_no_sched_switch_format_means_no_priorities(kernel_formats, page_header):
    assert switch_priorities({"formats": {}}, {}) == {}
