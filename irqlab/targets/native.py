"""``--target native``: the cyclictest-class probe on this host, one RT thread per CPU,
each writing its own ring in a memfd irqlab reads (irqlab.samples.multiring)."""

from __future__ import annotations

import platform
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from irqlab.runner.accel import AccelPlan
from irqlab.runner.native import NativeProbe
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.multiring import MultiRingReader, layout_bytes
from irqlab.samples.source import SampleSource
from irqlab.targets import options as o
from irqlab.targets.base import Target, TargetOptions

_HOST_ARCH = {"aarch64": "arm64", "arm64": "arm64"}


@dataclass
class NativeOptions(TargetOptions):
    """The native probe's options (on the host, or inside a Linux guest)."""

    cpus: list[int] | None = None       # None: the target's default CPUs
    priority: int = 90
    rt_fallback: bool = False


def host_arch() -> str:
    """This host's architecture as the probes name it (x86_64, arm64)."""
    return _HOST_ARCH.get(platform.machine(), platform.machine())


def native_options(given: dict[str, Any]) -> dict[str, Any]:
    """The fields of NativeOptions common to the native and Linux-guest targets."""
    priority, rt_fallback = o.check_rt(given)
    return dict(cpus=given.get("cpus"), priority=priority, rt_fallback=rt_fallback)


class NativeTarget(Target):
    name = "native"
    boot_estimate_s = 1.0
    noise_bench = True
    help = "this host, one RT thread per CPU"
    options = (o.CPUS, o.PRIORITY, o.RT_FALLBACK)
    why_not = {"idle": "its threads sleep in clock_nanosleep, they have no idle mode",
               "inject_irqoff": "a user-space thread cannot keep interrupts off",
               "inject_every": "a user-space thread cannot keep interrupts off",
               "accel": "it runs on the host itself, no VM",
               "icount": "it runs on the host itself, no VM"}

    def configure(self, given: dict[str, Any], period_ns: int) -> NativeOptions:
        return NativeOptions(arch=host_arch(), **native_options(given))

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        return [AccelPlan("none", "native", False)]    # it runs on the host itself

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        opts = cfg.options
        return NativeProbe(cfg.period_ns, cpus=opts.cpus, priority=opts.priority,
                           rt_fallback=opts.rt_fallback, samples=cfg.target_samples() or 0,
                           name=name, layout_bytes=layout_bytes)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        return MultiRingReader(process.mem_path)

    def trace_capture(self, options: TargetOptions, db_path: Path, period_ns: int) -> Any:
        """The host's tracefs around the probe's threads on CLOCK_MONOTONIC, the clock its
        samples are read on, so `irqlab explain` maps them exactly (irqlab.explain.native)."""
        from irqlab.trace.capture import TraceHook
        return TraceHook(db_path, period_ns, clock="mono", kind="native")
