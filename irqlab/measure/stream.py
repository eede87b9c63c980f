"""The measuring loop: poll the samples, feed statistics and store, decide when to stop."""

from __future__ import annotations

import signal
import time
from typing import Any

import numpy as np

from irqlab.measure.boot import StopFlag
from irqlab.measure.config import Observer, RunConfig
from irqlab.measure.summary import window_dict
from irqlab.runner.process import ProcessTarget
from irqlab.samples.record import FLAG_INJECTED
from irqlab.samples.source import SampleSource
from irqlab.stats import RunStats, WindowStats, format_window_line
from irqlab.stats.percpu import PerCpuStats
from irqlab.store import Store

_POLL_S = 0.02
_FLUSH_RECORDS = 200_000


def emit_window(w: WindowStats, tick_hz: int, store: Store, run_id: int,
                 observer: Observer, windows: list[dict[str, Any]]) -> None:
    wd = window_dict(w, tick_hz)
    windows.append(wd)
    store.add_windows(run_id, [wd])
    observer.on_window(wd, format_window_line(w, tick_hz))


def stream(cfg: RunConfig, guest: ProcessTarget, reader: SampleSource, stats: RunStats,
           store: Store, run_id: int, observer: Observer, windows: list[dict[str, Any]],
           stop: StopFlag, tick_hz: int, stall_s: float,
           per_cpu: PerCpuStats | None = None) -> tuple[str, str | None, int]:
    """Poll the samples until the run ends; returns (status, message, injected count).
    ``stall_s``: the watchdog, no sample for this long fails the run."""
    target = cfg.target_samples()
    wall_end = None
    if target is None and cfg.duration_ns is not None:
        wall_end = time.monotonic() + cfg.duration_ns / 1e9
    wall_start = time.monotonic()
    last_sample_at = time.monotonic()
    pending: list[np.ndarray] = []
    pending_n = 0
    done = 0
    injected = 0
    status, message = "ok", None

    def drain() -> int:
        nonlocal pending_n, done, injected
        batch = reader.poll()
        if len(batch):
            recs = batch.records
            if target is not None and done + len(recs) > target:
                recs = recs[:target - done]
            for w in stats.add(recs["deadline_tick"].astype(np.int64),
                               recs["entry_tick"].astype(np.int64)
                               - recs["deadline_tick"].astype(np.int64)):
                flush()
                emit_window(w, tick_hz, store, run_id, observer, windows)
            if per_cpu is not None:
                per_cpu.add(recs["cpu"], recs["deadline_tick"].astype(np.int64),
                            recs["entry_tick"].astype(np.int64)
                            - recs["deadline_tick"].astype(np.int64))
            injected += int(np.count_nonzero(recs["flags"] & FLAG_INJECTED))
            pending.append(recs)
            pending_n += len(recs)
            done += len(recs)
            if pending_n >= _FLUSH_RECORDS:
                flush()
        return len(batch)

    def flush() -> None:
        nonlocal pending_n
        if pending:
            store.add_samples(run_id, np.concatenate(pending) if len(pending) > 1
                              else pending[0])
            pending.clear()
            pending_n = 0

    try:
        while True:
            got = drain()
            now = time.monotonic()
            if got:
                last_sample_at = now
            if target is not None:
                observer.on_progress(done / target, f"{done}/{target} samples")
                if done >= target:
                    break
            elif wall_end is not None:
                observer.on_progress(min(1.0, (now - wall_start) / (wall_end - wall_start)),
                                     f"{done} samples")
                if now >= wall_end:
                    break
            if stop.signum is not None:
                status = "interrupted"
                message = f"stopped by {signal.Signals(stop.signum).name}; data kept"
                break
            code = guest.exit_code()
            if code is not None:
                drain()
                if (guest.exited_done(code) or reader.state() == "done"
                        or (target is not None and done >= target)):
                    break
                hdr = reader.header()
                status = "failed"
                # arm64 powers off (exit 0) on errors too: the ring state says which.
                detail = (f"probe error {hdr.error}: {hdr.message}"
                          if guest.exited_error(code) or hdr.state == "error"
                          else f"QEMU exited with code {code}")
                message = (f"{detail} after {done} samples; stderr: "
                           f"{guest.stderr().strip()[-300:] or '(empty)'}")
                break
            if reader.state() == "error":
                hdr = reader.header()
                status, message = "failed", f"probe error {hdr.error}: {hdr.message}"
                break
            if now - last_sample_at > stall_s:
                status = "failed"
                message = (f"watchdog: no sample for {now - last_sample_at:.1f} s (guest hang "
                           f"or QEMU stuck) after {done} samples; data kept")
                break
            time.sleep(_POLL_S)
        reader.finish()     # e.g. multi-ring: release what the merge watermark held back
        drain()
    finally:
        flush()
    return status, message, injected
