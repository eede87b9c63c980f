"""The live IRQ/thread split of each window (irqlab.explain.live) on pages assembled
from this kernel's formats, handed over as a capture hook hands them while it records:
the split is the run's rule (irqlab.explain.parts), the pages kept from one window let
the next split its first sample, and a window that closes late loses nothing."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.explain.live import LiveSplit, pages_in
from irqlab.runconfig import LiveCapture
from irqlab.trace.synth import PageWriter, encode, header_page_text
from tests.unit.explain.test_native_stages import PROBE, timer, waking
from tests.unit.explain.test_parts import sw

PERIOD = 1_000_000


class HandedPages:
    """A LiveCapture handing out prepared page groups, one group a call (what the trace
    hook's reader read between two windows)."""

    def __init__(self, header: dict, groups: list[list[bytes]], kind: str = "native"):
        self.header, self.groups, self.kind = header, list(groups), kind
        self.kept = False

    def capture_kind(self) -> str:
        return self.kind

    def keep_live(self) -> bool:
        self.kept = True
        return True

    def live_pages(self):
        if not self.groups:
            return self.header, []
        return self.header, [(0, p) for p in self.groups.pop(0)]


def _sample_events(dl: int, irq_at: int, entry: int) -> list:
    return [*timer(irq_at, irq_at + 300), waking(irq_at + 200),
            sw(entry - 100, 0, PROBE), sw(entry + 200, PROBE, 0)]


def _capture(formats, hdr_page, cuts: list[list[tuple[int, int, int]]]):
    """(header, page groups): each group the pages of its samples' events
    ((deadline, timer IRQ entry, entry) each), flushed as a reader's partial page."""
    for key in ("irq_vectors:local_timer_entry", "irq_vectors:local_timer_exit"):
        if key not in formats:
            pytest.skip(f"this kernel has no {key}")
    w = PageWriter(hdr_page)
    groups, done = [], 0
    for group in cuts:
        events = [e for s in group for e in _sample_events(*s)]
        for ts, key, vals, pid in sorted(events, key=lambda e: e[0]):
            w.add(ts, encode(formats[key], {"common_pid": pid, **vals}))
        w.flush()
        groups.append(w.pages[done:])
        done = len(w.pages)
    keys = [k for k in formats if k != "ftrace:print"]
    header = {"header_page": header_page_text(hdr_page), "cpus": [0], "clock": "mono",
              "formats": {k: formats[k].text for k in keys + ["ftrace:print"]},
              "enabled": keys, "vmm_threads": {str(PROBE): "irqlab-native"},
              "stats": {}, "mono_start": 0, "mono_stop": 0}
    return header, groups


def _recs(samples: list[tuple[int, int, int]]) -> np.ndarray:
    out = np.zeros(len(samples), [("seq", "u8"), ("cpu", "u4"), ("deadline_tick", "u8"),
                                  ("entry_tick", "u8")])
    for k, (dl, _irq, en) in enumerate(samples):
        out[k] = (dl // PERIOD, 0, dl, en)
    return out


W1 = [(10 * PERIOD, 10 * PERIOD + 2_000, 10 * PERIOD + 9_000),
      (11 * PERIOD, 11 * PERIOD + 50_000, 11 * PERIOD + 60_000)]
W2 = [(12 * PERIOD, 12 * PERIOD + 1_000, 12 * PERIOD + 400_000),
      (13 * PERIOD, 13 * PERIOD + 3_000, 13 * PERIOD + 8_000)]


def test_each_window_is_split_by_the_runs_rule(kernel_formats, page_header):
    header, groups = _capture(kernel_formats, page_header, [W1, W2])
    cap = HandedPages(header, groups)
    assert isinstance(cap, LiveCapture)
    live = LiveSplit.for_hooks([object(), cap])
    assert live is not None and cap.kept
    got = live.window(_recs(W1))
    assert (got.split, got.irq_min_tick, got.irq_max_tick, got.thread_min_tick,
            got.thread_max_tick) == (2, 2_000, 50_000, 7_000, 10_000)
    got = live.window(_recs(W2))
    assert (got.split, got.irq_max_tick, got.thread_max_tick) == (2, 3_000, 399_000)
    meta = live.metadata()
    assert meta["kind"] == "native" and meta["windows"] == 2 and meta["errors"] == []
    assert meta["pages"] >= len(groups[0]) + len(groups[1]) and meta["seconds"] >= 0


def test_a_window_closing_late_leaves_the_next_its_pages(kernel_formats, page_header):
    # The first window's call is handed both windows' pages (it closed late: its samples
    # came in a burst); the second's call gets nothing new and still splits.
    header, groups = _capture(kernel_formats, page_header, [W1, W2])
    live = LiveSplit(HandedPages(header, [groups[0] + groups[1]]))
    assert live.window(_recs(W1)).split == 2
    got = live.window(_recs(W2))
    assert (got.split, got.irq_max_tick, got.thread_max_tick) == (2, 3_000, 399_000)


def test_a_sample_whose_events_are_not_read_yet_is_left_out(kernel_formats, page_header):
    header, groups = _capture(kernel_formats, page_header, [W1[:1], W1[1:]])
    live = LiveSplit(HandedPages(header, groups[:1]))
    got = live.window(_recs(W1))
    assert (got.split, got.irq_max_tick) == (1, 2_000)


def test_only_a_capture_on_the_samples_clock_is_split(kernel_formats, page_header):
    header, groups = _capture(kernel_formats, page_header, [W1])
    assert LiveSplit.for_hooks([HandedPages(header, groups, kind="host-vcpu")]) is None
    assert LiveSplit.for_hooks([HandedPages(header, groups, kind="linux-guest")]) \
        is not None


def test_pages_in_keeps_each_cpus_pages_that_reach_the_span():
    def page(t: int) -> bytes:
        return t.to_bytes(8, "little") + b"\0" * 8

    def times(got):
        return [(c, int.from_bytes(p[:8], "little")) for c, p in got]
    pages = [(0, page(100)), (1, page(150)), (0, page(200)), (0, page(300)),
             (1, page(400))]
    # CPU 0's page at 100 ends where its next begins (200): before 250, dropped; its
    # page at 200 runs to 300, kept; CPU 1's at 150 runs to 400, kept; the last kept.
    assert times(pages_in(pages, 250)) == [(1, 150), (0, 200), (0, 300), (1, 400)]
    assert times(pages_in(pages, 350)) == [(1, 150), (0, 300), (1, 400)]
    # A span's end drops the pages that begin after it.
    assert times(pages_in(pages, 120, 250)) == [(0, 100), (1, 150), (0, 200)]
    assert pages_in(pages, 0) == pages


def test_the_flight_recorder_gives_no_live_pages(tmp_path):
    # Its ring is read only around spikes: a live read would empty it.
    from irqlab.trace.recorder import FlightRecorder
    rec = FlightRecorder(tmp_path / "x.duckdb", 1_000_000, threshold_ns=500_000,
                         ring_kb=1024, around_ns=100_000_000, keep_per_day=10,
                         clock="mono", kind="native")
    assert isinstance(rec, LiveCapture) and rec.capture_kind() == "native"
    assert LiveSplit.for_hooks([rec]) is None and rec.live_pages() is None
