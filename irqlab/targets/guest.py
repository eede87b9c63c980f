"""``--target guest``: the freestanding probe (x86-64 PVH ELF or arm64 Image) in QEMU.

Samples come back through the ring in guest RAM (a memfd QEMU and irqlab share) or, with
``--sink console``, as framed lines on the serial console.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irqlab.runner.accel import AccelPlan
from irqlab.runner.hostinfo import qemu_version
from irqlab.runner.machines import machine_for
from irqlab.runner.process import MeasuredProcess
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.console import ConsoleReader
from irqlab.samples.layout import RING_OFFSET
from irqlab.samples.ring import RingReader
from irqlab.samples.source import SampleSource
from irqlab.targets import options as o
from irqlab.targets.base import Target, TargetOptions, TargetUsageError


@dataclass
class ProbeOptions(TargetOptions):
    """The freestanding probe's options (also what a Xen domain runs)."""

    accel: str = "auto"
    idle: str = "hlt"
    timer: str = "auto"
    gic: int | None = None
    sink: str = "ring"
    memory_mib: int = 64
    probe: Path | None = None
    inject_irqoff_ns: int = 0
    inject_every: int = 0

    def guest_config(self, cfg: Any) -> GuestConfig:
        """What the probe and its VM are started with, for run config ``cfg``."""
        return GuestConfig(period_ns=cfg.period_ns, idle=self.idle,
                           inject_irqoff_ns=self.inject_irqoff_ns,
                           inject_every=self.inject_every,
                           samples=cfg.target_samples() or 0, timer=self.timer,
                           memory_mib=self.memory_mib, arch=self.arch, probe=self.probe,
                           gic=self.gic, sink=self.sink)

    def run_metadata(self, cfg: Any) -> dict[str, Any]:
        """What the run records before it starts: QEMU's version, the probe's boot line."""
        gcfg = self.guest_config(cfg)
        return {"qemu_version": qemu_version(gcfg.machine.qemu),
                "probe_cmdline": gcfg.cmdline()}


def probe_options(given: dict[str, Any], period_ns: int, arch: str) -> dict[str, Any]:
    """The fields of ProbeOptions common to the guest and Xen targets, checked."""
    irqoff, every = o.check_inject(given, period_ns)
    probe = given.get("probe")
    o.check_probe(probe)
    return dict(arch=arch, accel=given.get("accel", "auto"),
                idle=given.get("idle", "hlt"), timer=given.get("timer", "auto"),
                gic=given.get("gic"), probe=probe, inject_irqoff_ns=irqoff,
                inject_every=every)


class GuestTarget(Target):
    name = "guest"
    boot_estimate_s = 5.0
    noise_bench = True
    help = "the probe in a QEMU VM"
    options = (o.ARCH, o.ACCEL, o.ICOUNT, o.IDLE, o.INJECT_IRQOFF, o.INJECT_EVERY, o.TIMER,
               o.GIC, o.SINK, o.MEMORY, o.PROBE)

    def configure(self, given: dict[str, Any], period_ns: int) -> ProbeOptions:
        arch = given.get("arch", "x86_64")
        opts = ProbeOptions(**probe_options(given, period_ns, arch),
                            icount=bool(given.get("icount")),
                            sink=given.get("sink", "ring"),
                            memory_mib=given.get("memory", 64))
        o.check_icount(opts.accel, opts.icount)
        if opts.memory_mib < 8:
            raise TargetUsageError("--memory must be at least 8 (MiB): the ring sits at "
                                   "4 MiB")
        host_mib = _host_memory_mib()
        if host_mib is not None and opts.memory_mib > host_mib:
            raise TargetUsageError(f"--memory {opts.memory_mib} is more than this host's "
                                   f"{host_mib} MiB: use --memory {min(64, host_mib)} (the "
                                   f"probe needs 8)")
        m = machine_for(arch)
        o.check_machine_values(m, opts.idle, opts.timer, arch)
        if opts.sink not in m.sinks:
            raise TargetUsageError(f"--sink {opts.sink} is not supported by the {arch} "
                                   f"probe (it has: {', '.join(m.sinks)})")
        if opts.gic is not None:
            try:
                m.configured(gic=opts.gic)
            except ValueError as exc:
                raise TargetUsageError(str(exc)) from None
        o.check_kvm_arch(opts.accel, arch)
        return opts

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        return o.arch_plans(cfg.options.accel, cfg.options.icount, cfg.options.arch)

    def run_metadata(self, cfg: Any) -> dict[str, Any]:
        return cfg.options.run_metadata(cfg)

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        gcfg = cfg.options.guest_config(cfg)
        gcfg.extra_qemu_args = list(process_args)
        return QemuGuest(gcfg, plan, icount=cfg.options.icount, name=name)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        if cfg.options.sink == "console":
            return ConsoleReader(process.serial_read)
        return RingReader(process.mem_path, RING_OFFSET)


def _host_memory_mib() -> int | None:
    """MemTotal of this host in MiB (None when /proc/meminfo cannot tell)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
