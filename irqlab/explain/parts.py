"""IRQ latency and thread latency of every sample of a traced native or Linux-guest run
(issue 44), as
rtla timerlat splits its samples: the IRQ part runs from the deadline to the entry of
the timer's hard IRQ on the sample's CPU (the one whose expiry woke the probe thread,
irqlab.explain.timer_irq), the thread part from there to the probe thread running (the
sample's entry). The parts add up to the sample's latency exactly: the split is one
time, the IRQ entry, given in the sample's own ticks.

A sample is left unsplit (and counted by reason) when the capture does not show it:
outside the capture, no wake-up of a probe thread on its CPU in its window (the
deadline passed while the thread was awake: no timer IRQ was waited for), or no timer
IRQ entry before that wake-up. Only a capture on the samples' clock can split them: a
native run's own (CLOCK_MONOTONIC both), a Linux guest's guest-side capture (the guest
kernel's ftrace on the guest's CLOCK_MONOTONIC, the clock its probe reads:
irqlab.trace.guest), read exactly as a native capture is; the guest's host-side capture
(on the host's clock) plays no part.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.explain.load import Trace, decode_capture
from irqlab.explain.native import probe_threads_by_name, probe_threads_named
from irqlab.explain.timer_irq import TimerIrqs
from irqlab.trace.archive import read_archive

# Per capture kind (irqlab.explain.registry's keys), where in its trace hook's metadata
# the capture on the samples' clock is described (its ``file`` and ``clock``): a native
# run's is the hook's own, a Linux guest's the guest-side one (irqlab.trace.guest).
SAMPLES_CLOCK_CAPTURE = {"native": (), "linux-guest": ("guest",)}
OUTSIDE = "outside the capture"
NO_WAKEUP = "no wake-up of the probe thread in the window (it was awake)"
NO_TIMER_IRQ = "no timer IRQ entry before the wake-up"


@dataclass
class SampleParts:
    """The split samples (seq, cpu, the timer IRQ's entry in ticks, with their deadline
    and entry) and why the others are not split."""

    seq: np.ndarray
    cpu: np.ndarray
    irq_tick: np.ndarray
    deadline_tick: np.ndarray
    entry_tick: np.ndarray
    unsplit: Counter = field(default_factory=Counter)

    def __len__(self) -> int:
        return int(self.seq.size)


def _wakeups(trace: Trace, tids: list[int]) -> dict[int, np.ndarray]:
    """Per target CPU, the sorted times the probe's threads were woken."""
    wk = trace.t("sched_waking")
    if not len(wk) or not tids:
        return {}
    sel = np.isin(wk["pid"].astype(np.int64), np.asarray(tids, np.int64))
    ts = wk["ts"][sel].astype(np.int64)
    cpus = (wk["target_cpu"] if "target_cpu" in wk.cols else wk["cpu"])[sel].astype(np.int64)
    return {int(c): np.sort(ts[cpus == c]) for c in np.unique(cpus).tolist()}


def split_samples(trace: Trace, samples: dict[str, np.ndarray]) -> SampleParts:
    """Every sample's timer IRQ entry, where the capture shows it (module doc)."""
    # A guest's capture lists no threads (no VMM pid inside it): the probe's by name.
    known = {int(t): c for t, c in (trace.header.get("vmm_threads")
                                    or probe_threads_named(trace)).items()}
    tids = sorted(set(known) | set(probe_threads_by_name(trace, known)))
    woken_at = _wakeups(trace, tids)
    timer = TimerIrqs(trace)
    lo = int(trace.header.get("mono_start") or 0)
    hi = int(trace.header.get("mono_stop") or np.iinfo(np.int64).max)
    seq = samples["seq"].astype(np.uint64)
    dl = samples["deadline_tick"].astype(np.int64)
    en = samples["entry_tick"].astype(np.int64)
    cpu = samples["cpu"].astype(np.int64)
    keep = np.zeros(seq.size, bool)
    irq = np.zeros(seq.size, np.int64)
    unsplit: Counter = Counter()
    for c in np.unique(cpu).tolist():
        idx = np.flatnonzero(cpu == c)
        wts = woken_at.get(int(c), np.empty(0, np.int64))
        # The first wake-up at or after each deadline, if it came by the entry.
        j = np.searchsorted(wts, dl[idx], "left")
        has = j < wts.size
        woken = np.where(has, wts[np.minimum(j, max(wts.size - 1, 0))] if wts.size
                         else 0, 0)
        has &= woken <= en[idx]
        for k, i in enumerate(idx.tolist()):
            a, b = int(dl[i]), int(en[i])
            if a < lo or b > hi:
                unsplit[OUTSIDE] += 1
                continue
            if not has[k]:
                unsplit[NO_WAKEUP] += 1
                continue
            t, _before = timer.entered(int(c), a, b, int(woken[k]))
            if t is None or t > int(woken[k]):
                unsplit[NO_TIMER_IRQ] += 1
                continue
            keep[i], irq[i] = True, t
    return SampleParts(seq[keep], cpu[keep].astype(np.uint32), irq[keep].astype(np.uint64),
                       dl[keep], en[keep], unsplit)


def capture_parts(capture: Path, samples: dict[str, np.ndarray]) -> SampleParts:
    """The split of ``samples`` from a capture file on their clock (split_capture)."""
    header, per_cpu = read_archive(capture)
    trace = decode_capture(header, per_cpu)
    del per_cpu
    return split_samples(trace, samples)


def split_capture(trace_meta: dict[str, Any]) -> Path | None:
    """The capture a run's trace hook metadata names on its samples' clock, or None when
    it has none (a kind whose captures are on another clock, or none was kept)."""
    path = SAMPLES_CLOCK_CAPTURE.get(trace_meta.get("kind"))
    if path is None:
        return None
    meta: Any = trace_meta
    for key in path:
        meta = meta.get(key) if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not meta.get("file") \
            or meta.get("clock") not in ("mono", "mono_raw"):
        return None
    return Path(meta["file"])
