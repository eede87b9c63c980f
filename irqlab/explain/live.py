"""The IRQ/thread split of each window while a traced run records (issue 44): the
window lines' two columns, as rtla timerlat top shows IRQ and Thread beside each other.

At each window the run asks its capture hook (irqlab.runconfig.LiveCapture) for the
pages read since the window before, puts the pages kept from the window before in
front (those from just before its last deadline on: a window's first sample may have
been woken by a timer IRQ entered before it, and a window that closed late, its samples
read in a burst, left the next windows' events among the pages read by then), decodes
those of the window's own span and splits the window's samples with the run's own rule (irqlab.explain.parts.split_samples:
the same timer IRQ, irqlab.explain.timer_irq). Only a capture on the samples' clock can
be split (parts.SAMPLES_CLOCK_CAPTURE: a native run's, a Linux guest's guest-side one).

The columns are a preview: the run's stored split is made once more at its end from the
whole capture (Run.split_parts), which the summary's ``irq_latency`` and
``thread_latency`` and ``sample_parts`` hold. A sample whose events are not read yet
when its window closes (a page the kernel has not handed over, a guest's 50 ms copy)
is left out of its window's columns, counted by ``split_samples`` < ``samples``.
Why decode twice: the pages are spooled undecoded for the run's end (decoding while
measuring would mean holding the whole decoded capture); decoding each window's pages
once more costs the run flow one decode a window, bounded by the hook's
LIVE_MAX_BYTES (irqlab.trace.capture).
"""

from __future__ import annotations

import struct
import time
from typing import Any

import numpy as np

from irqlab.explain.load import decode_capture
from irqlab.explain.parts import SAMPLES_CLOCK_CAPTURE, split_samples
from irqlab.runconfig import LiveCapture
from irqlab.stats.parts import WindowParts


# How far before a window's last deadline its pages are kept for the next window: the
# timer IRQ and the switches just before that window's first deadline (the IRQ that ran
# an expiry can have been entered before it, irqlab.explain.timer_irq), a period or two.
CONTEXT_NS = 20_000_000
_PAGE_TIME = struct.Struct("<Q")   # a ring buffer page's first field: its base time


def pages_in(pages: list[tuple[int, bytes]], lo: int, hi: int | None = None
             ) -> list[tuple[int, bytes]]:
    """The pages of ``pages`` (each CPU's in time order) that may hold events in [lo,
    hi] (hi None: no end): a page begins at its base time and ends where the CPU's next
    page begins (a CPU's last page: not before ``lo``)."""
    out: list[tuple[int, bytes]] = []
    end: dict[int, int] = {}
    for k in range(len(pages) - 1, -1, -1):
        cpu, page = pages[k]
        start = _PAGE_TIME.unpack_from(page)[0]
        if end.get(cpu, lo) >= lo and (hi is None or start <= hi):
            out.append((cpu, page))
        end[cpu] = start
    return out[::-1]


class LiveSplit:
    """A run's live IRQ/thread split, one window at a time."""

    def __init__(self, capture: LiveCapture) -> None:
        self.capture = capture
        self._before: list[tuple[int, bytes]] = []   # pages kept for the next window
        self.errors: list[str] = []
        self.windows = self.pages = 0
        self.seconds = 0.0          # the run flow's time spent here (its cost)

    @classmethod
    def for_hooks(cls, hooks: list[Any]) -> LiveSplit | None:
        """The live split of the first hook with a capture on the samples' clock that
        keeps its pages for it from now on, or None."""
        for hook in hooks:
            if isinstance(hook, LiveCapture) and \
                    hook.capture_kind() in SAMPLES_CLOCK_CAPTURE and hook.keep_live():
                return cls(hook)
        return None

    def window(self, samples: np.ndarray) -> WindowParts | None:
        """The parts of a window's samples (records with seq, cpu, deadline_tick,
        entry_tick), or None when the capture gives nothing yet; a decoder's error is
        kept (at most 5) and the window goes without columns: the run goes on."""
        t0 = time.perf_counter()
        try:
            return self._window(samples)
        finally:
            self.seconds += time.perf_counter() - t0

    def _window(self, samples: np.ndarray) -> WindowParts | None:
        got = self.capture.live_pages()
        if got is None:
            return None
        header, pages = got
        both = self._before + pages
        first, last = (int(x) for x in (samples["deadline_tick"].min(),
                                        samples["deadline_tick"].max()))
        # What the next windows may need: a window can close late (its samples read in a
        # burst), and the pages read by then hold the next windows' events too; this
        # window decodes only its own span's (each page once, bar the context).
        self._before = pages_in(both, last - CONTEXT_NS)
        both = pages_in(both, first - CONTEXT_NS, int(samples["entry_tick"].max()))
        self.windows, self.pages = self.windows + 1, self.pages + len(both)
        per_cpu: dict[int, list[bytes]] = {}
        for cpu, page in both:
            per_cpu.setdefault(cpu, []).append(page)
        try:
            trace = decode_capture(header, {c: b"".join(p) for c, p in per_cpu.items()})
            parts = split_samples(trace, {k: samples[k] for k in
                                          ("seq", "cpu", "deadline_tick", "entry_tick")})
        except Exception as exc:  # noqa: BLE001 - a page cut mid-event, a format the
            # decoder refuses: the columns are a preview, the run must not stop for them.
            if len(self.errors) < 5:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            return None
        return WindowParts.of(parts.deadline_tick, parts.entry_tick, parts.irq_tick)

    def metadata(self) -> dict[str, Any]:
        """The run's metadata ``live_parts`` (docs/formats.md section 4)."""
        return {"kind": self.capture.capture_kind(), "windows": self.windows,
                "pages": self.pages, "seconds": round(self.seconds, 3),
                "errors": self.errors}
