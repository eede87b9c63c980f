"""``--target noise``: operating-system noise on this host, rtla osnoise's class (issue
44). irqlab-noise (probes/native/noise.c) busy-loops on each measured CPU reading the
clock and records every gap of at least ``--threshold`` (default 5 us, rtla osnoise's
own default) into one ring per CPU, read as the native probe's rings
(irqlab.samples.multiring).

A sample of a noise run is one gap: ``deadline_tick`` its start (the loop's last clock
read before it), ``entry_tick`` its end, so its "latency" is the gap's length, and every
figure, store, compare, check and report of a latency run applies to the gaps. What a
latency run lacks is the time between them: the summary's ``noise`` object
(irqlab.stats.osnoise) adds the noise per second, the CPU left, and with ``--trace``
each gap's class (irqlab.explain.noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.runconfig import RunEnd
from irqlab.runner.accel import AccelPlan
from irqlab.runner.noise import NoiseProbe
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.multiring import MultiRingReader, layout_bytes
from irqlab.samples.source import SampleSource
from irqlab.targets import options as o
from irqlab.targets.base import Target, TargetOptions, TargetUsageError
from irqlab.targets.native import NativeTarget, host_arch

# The capture kind of a traced noise run (hooks.trace.kind): classified after the run.
CAPTURE_KIND = "noise"


@dataclass
class NoiseOptions(TargetOptions):
    """The noise probe's options."""

    cpus: list[int] | None = None       # None: every online CPU
    priority: int | None = None         # None: SCHED_OTHER, as rtla osnoise without -P
    rt_fallback: bool = False


class NoiseTarget(Target):
    name = "noise"
    help = "this host's OS noise: a busy loop per CPU records every gap (rtla osnoise)"
    options = (o.CPUS, o.PRIORITY, o.RT_FALLBACK)
    # The native probe's reasons (a user-space thread on this host), but for --idle.
    why_not = {**NativeTarget.why_not,
               "idle": "its threads never idle: they read the clock in a loop"}
    default_threshold_ns = 5_000
    boot_estimate_s = 1.0           # a host process, as native (matrix --dry-run's estimate)

    def configure(self, given: dict[str, Any], period_ns: int) -> NoiseOptions:
        priority = given.get("priority")
        if priority is not None and not 1 <= priority <= 99:
            raise TargetUsageError(f"--priority {priority} must be 1-99 (SCHED_FIFO), or "
                                   f"leave it out to run SCHED_OTHER")
        if given.get("rt_fallback") and priority is None:
            raise TargetUsageError("--rt-fallback goes with --priority N: without it the "
                                   "noise probe already runs SCHED_OTHER")
        return NoiseOptions(arch=host_arch(), cpus=given.get("cpus"), priority=priority,
                            rt_fallback=bool(given.get("rt_fallback")))

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        return [AccelPlan("none", "native", False)]    # it runs on the host itself

    def stall_timeout_s(self, cfg: Any) -> float:
        """A quiet CPU records nothing for as long as it stays quiet: the probe's own
        end (its --duration-ns) ends the run, the watchdog only a hung one."""
        return 30.0 + (cfg.duration_ns or 0) / 1e9

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        opts = cfg.options
        return NoiseProbe(cfg.period_ns, cpus=opts.cpus, rt_fallback=opts.rt_fallback,
                          name=name, layout_bytes=layout_bytes,
                          threshold_ns=cfg.threshold_ns, fifo_priority=opts.priority,
                          duration_ns=cfg.duration_ns if cfg.samples is None else 0)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        return MultiRingReader(process.mem_path)

    def trace_capture(self, options: TargetOptions, db_path: Path, period_ns: int) -> Any:
        """The host's tracefs on CLOCK_MONOTONIC, the gaps' clock, with NMIs: every
        interference the kernel can tell of (irqlab.explain.noise)."""
        from irqlab.trace.capture import TraceHook
        return TraceHook(db_path, period_ns, clock="mono", kind=CAPTURE_KIND,
                         extra_events=(("nmi", "nmi_handler"),))

    def summary_extra(self, end: RunEnd) -> dict[str, Any]:
        """The ``noise`` object (irqlab.stats.osnoise), its gaps classified when the run
        was traced; a classification that fails leaves the figures, said aloud."""
        from irqlab.explain.seam import stored_samples
        from irqlab.stats.osnoise import noise_summary
        from irqlab.store import StoreError

        rings = [r for r in end.per_ring if "busy_tick" in r]
        if not rings:
            return {}
        try:
            gaps = stored_samples(end.store, end.run_id)
        except StoreError:        # no gap at all: a quiet run
            gaps = {k: np.empty(0, np.int64) for k in ("cpu", "deadline_tick",
                                                       "entry_tick")}
        gap_tick = gaps["entry_tick"].astype(np.int64) - gaps["deadline_tick"].astype(np.int64)
        classes = _classes(end, gaps) if len(gap_tick) else None
        return {"noise": noise_summary(end.threshold_ns, end.tick_hz, rings, gaps["cpu"],
                                       gap_tick, classes)}


def _classes(end: RunEnd, gaps: dict[str, np.ndarray]
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """Each gap's (kind, name) from the run's capture, or None without one."""
    trace = ((end.metadata.get("hooks") or {}).get("trace") or {})
    if trace.get("kind") != CAPTURE_KIND or not trace.get("file"):
        return None
    from irqlab.explain.load import load_capture
    from irqlab.explain.noise import classify
    try:
        found = classify(load_capture(Path(trace["file"])), gaps["cpu"],
                         gaps["deadline_tick"], gaps["entry_tick"])
    except Exception as exc:  # noqa: BLE001 - a damaged capture, a decoder's error: the
        # run's figures stand without the classes, said aloud and recorded.
        end.metadata["noise_classes"] = {"error": f"{type(exc).__name__}: {exc}"}
        end.notice(f"noise gaps not classified: {exc}")
        return None
    return found.kinds_names()
