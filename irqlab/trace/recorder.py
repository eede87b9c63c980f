"""The flight recorder (issue 44): ``--trace`` with ``--on-threshold LATENCY``.

A long run or a monitor cannot keep its whole trace (about 1 GB a minute here), so the
capture stays in the tracefs instance's own ring, which the kernel overwrites oldest
first (``options/overwrite``, on by default): ``--trace-ring SIZE`` a CPU, a few seconds
of events by default. Nothing drains it while the run goes on. When a sample's latency
is above the threshold (the run flow tells every ``SpikeListener`` hook,
irqlab.runconfig), the recorder waits ``--trace-around`` past the sample's entry, then
reads the ring out and keeps the pages from ``--trace-around`` before its deadline on as
a capture of that window: the archive of an ordinary capture (docs/formats.md section
9), named after the sample (irqlab.trace.archive.spike_file_for), so `irqlab explain
RUN --spike SEQ` explains it as a whole traced run. Spikes close together share one
window. At most ``--trace-keep`` windows are kept a day (UTC): past that the least bad
of the day is deleted, so the worst stay.

Only captures on the samples' clock (kind ``native``: CLOCK_MONOTONIC both) can be cut
around a sample and explained as a window (RECORDER_KINDS); the CLI refuses the others
in one line (exit 2), naming the target and its capture's kind: a Linux guest's
(``linux-guest``: its guest kernel's trace is copied out whole through ivshmem, no ring
the host can cut), a guest probe's, a Xen guest's and an arm64 KVM guest's
(``host-vcpu``, ``kvm-arm64``, ``xentrace``: host or dom0 captures, not on the guest's
clock) and the network path's (``net-path``: on the samples' clock, but its explainer
reads the whole run's capture only).
"""

from __future__ import annotations

import datetime as dt
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from irqlab.trace.archive import spike_file_for, spool_chunk, write_archive
from irqlab.trace.capture import TraceHook, buffer_kb_for, ready_pages

_POLL_S = 0.05
_DEBUGFS_EVERY = 20
_PAGE_TS = struct.Struct("<Q")      # a ring buffer page starts with its time stamp
# How long pages read out of the ring stay for later windows (bounded by a ring's size).
RECENT_S = 5.0
# Windows waiting to be cut at most (a storm of spikes far apart): the rest are counted.
_MAX_PENDING = 64


# The capture kinds a flight recorder can cut and `irqlab explain --spike` explain
# (their explainer reads Request.capture; irqlab.explain.registry's keys).
RECORDER_KINDS = ("native",)


def default_ring_kb(period_ns: int) -> int:
    """A few seconds of events a CPU: twice the capture's 2 s reader-stall buffer."""
    return 2 * buffer_kb_for(period_ns)


class FlightRecorder(TraceHook):
    """TraceHook whose capture stays in the instance's ring and is cut around spikes."""

    keeps_trace = True         # irqlab.runconfig.SpikeListener

    def __init__(self, db_path: Path, period_ns: int, *, threshold_ns: int,
                 ring_kb: int, around_ns: int, keep_per_day: int,
                 clock: str | None = None, kind: str | None = None,
                 extra_events: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(db_path, period_ns, buffer_kb=ring_kb, clock=clock, kind=kind,
                         extra_events=extra_events)
        self.threshold_ns, self.around_ns = threshold_ns, around_ns
        self.keep_per_day = keep_per_day
        self._pending: list[dict[str, Any]] = []       # windows waiting for their end
        self._kept: list[dict[str, Any]] = []
        self._recent: dict[int, list[bytes]] = {}       # pages read out, still recent
        self._spike_lock = threading.Lock()
        self.meta["recorder"] = {"threshold_ns": threshold_ns, "ring_kb": ring_kb,
                                 "around_ns": around_ns, "keep_per_day": keep_per_day,
                                 "spikes": self._kept, "dropped_over_keep": 0,
                                 "not_cut": 0}

    # -- SpikeListener --------------------------------------------------------------------
    def on_spike(self, spike: dict[str, Any]) -> None:
        """A sample above the threshold (the run flow's thread): its window is cut once
        ``around`` has passed after its entry; one inside a pending window joins it."""
        with self._spike_lock:
            for p in self._pending:
                if spike["deadline_tick"] <= p["due"]:
                    p["spikes"].append(spike)
                    return
            if len(self._pending) >= _MAX_PENDING:
                self.meta["recorder"]["not_cut"] += 1
                return
            self._pending.append({"lo": spike["deadline_tick"] - self.around_ns,
                                  "due": spike["entry_tick"] + self.around_ns,
                                  "spikes": [spike]})

    # -- LiveCapture: nothing to give ---------------------------------------------------
    def keep_live(self) -> bool:
        """False: the ring is read out only around spikes (a live read would empty it of
        the pages a later spike's window needs)."""
        return False

    def live_pages(self) -> None:
        return None

    # -- the ring is read out only around spikes ----------------------------------------
    def _reader(self) -> None:
        rounds = 0
        while not self._stop.wait(_POLL_S):
            try:
                self._cut_due(time.monotonic_ns())
            except Exception as exc:  # noqa: BLE001 - the thread must go on cutting
                # (a window's file not written is one problem, not the recorder's end)
                if len(self.meta["problems"]) < 20:
                    self.meta["problems"].append(f"recorder: {type(exc).__name__}: {exc}")
            rounds += 1
            if rounds % _DEBUGFS_EVERY == 0:
                self._threads_refresh()

    def _cut_due(self, now_ns: int) -> None:
        with self._spike_lock:
            due = [p for p in self._pending if p["due"] <= now_ns]
            self._pending = [p for p in self._pending if p["due"] > now_ns]
        for p in due:
            self._cut(p, now_ns)

    def _collect(self) -> None:
        """The run ended: the windows still waiting are cut now, shorter after."""
        with self._spike_lock:
            pending, self._pending = self._pending, []
        for p in pending:
            self._cut(p, time.monotonic_ns())

    def _cut(self, window: dict[str, Any], now_ns: int) -> None:
        """Read the ring out and keep the window's pages as one capture (``now_ns``: when
        the cut was due; the window ends when the ring is read)."""
        lo = window["lo"]
        worst = max(window["spikes"], key=lambda s: s["latency_ns"])
        with tempfile.TemporaryFile(dir=self._spool_dir()) as spool:
            pages = 0
            with self._lock:
                now_ns = max(now_ns, time.monotonic_ns())
                for cpu, fd in self._fds.items():
                    kept = self._window_pages(cpu, fd, lo, now_ns)
                    for page in kept:
                        spool_chunk(spool, cpu, page)
                    pages += len(kept)
            # The ring overwrote what came before the window by design: no loss inside it.
            stats = {str(cpu): {"overrun": 0} for cpu in self._fds}
            header = self._header(stats, lo, now_ns)
            header["recorder"] = {"spikes": window["spikes"], "window": [lo, now_ns],
                                  "kind": self.meta["kind"]}
            path = spike_file_for(self.db_path, self.run_id, worst["seq"], worst["cpu"])
            size = write_archive(path, header, spool)
        self._kept.append({"file": str(path), "seq": worst["seq"], "cpu": worst["cpu"],
                           "latency_ns": worst["latency_ns"],
                           "samples": [s["seq"] for s in window["spikes"]],
                           "window_ns": [lo, now_ns], "pages": pages, "bytes": size,
                           "day": dt.datetime.now(dt.timezone.utc).date().isoformat()})
        self._limit_day()

    def _window_pages(self, cpu: int, fd: int, lo: int, now_ns: int) -> list[bytes]:
        """The pages of one CPU from ``lo`` on: those read out for an earlier window and
        still recent, then what the ring holds now (a page is kept when the next one
        starts at or after ``lo``). Reading the ring consumes it, so the pages of the
        last RECENT_S (or 2 x around, if longer) stay here, at most a ring's worth, for
        the windows cut next: a spike told late (a loaded host reads samples late, and
        cuts one window after another) has its "before" in them."""
        pages = list(self._recent.get(cpu, [])) + list(ready_pages(fd, self.page_size))
        starts = [_PAGE_TS.unpack_from(p)[0] if len(p) >= 8 else 0 for p in pages]

        def since(t: int) -> list[bytes]:
            return [p for i, p in enumerate(pages)
                    if i + 1 == len(pages) or starts[i + 1] >= t]
        recent = since(now_ns - max(2 * self.around_ns, int(RECENT_S * 1e9)))
        budget = self.buffer_kb * 1024 // max(self.page_size, 1)   # a ring's worth
        self._recent[cpu] = recent[-budget:] if budget else recent
        return since(lo)

    def _limit_day(self) -> None:
        """At most keep_per_day windows a day: the least bad of the day goes."""
        day = self._kept[-1]["day"]
        today = [k for k in self._kept if k["day"] == day]
        if len(today) <= self.keep_per_day:
            return
        least = min(today, key=lambda k: k["latency_ns"])
        Path(least["file"]).unlink(missing_ok=True)
        self._kept.remove(least)
        self.meta["recorder"]["dropped_over_keep"] += 1

    def _keep(self, header: dict[str, Any]) -> None:
        """No whole-run capture: the kept windows are the capture."""
        self.meta["file"] = None
        self.meta["trace_dat"] = ("not written: a flight recorder keeps the windows "
                                  "around its spikes (recorder.spikes); `irqlab explain "
                                  "RUN --spike SEQ` explains one")
        if self._spool is not None:
            self._spool.close()
            self._spool = None
