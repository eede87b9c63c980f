"""Which process hosts the probe, which accelerators to try, and how samples come back.

One place per question, so a new target (native, linux-guest, xen, ...) is added here and
nowhere else in the run flow.
"""

from __future__ import annotations

from irqlab.measure.config import RunConfig
from irqlab.runner.accel import AccelPlan, plans_for
from irqlab.runner.machines import machine_for
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.multiring import layout_bytes
from irqlab.samples.ring import RingReader


def make_target(cfg: RunConfig, plan: AccelPlan, guest_cfg: GuestConfig,
                 name: str) -> QemuGuest:
    """The process that hosts the probe, by ``--target`` (one place to add targets)."""
    if cfg.target == "native":
        from irqlab.runner.native import NativeProbe
        return NativeProbe(cfg.period_ns, cpus=cfg.cpus, priority=cfg.priority,
                           rt_fallback=cfg.rt_fallback, samples=cfg.target_samples() or 0,
                           name=name, layout_bytes=layout_bytes)
    if cfg.target == "linux-guest":
        from irqlab.runner.linux_guest import LinuxGuest
        return LinuxGuest(cfg.period_ns, plan, cpus=cfg.cpus, priority=cfg.priority,
                          rt_fallback=cfg.rt_fallback, samples=cfg.target_samples() or 0,
                          icount=cfg.icount, extra_qemu_args=guest_cfg.extra_qemu_args,
                          name=name, layout_bytes=layout_bytes)
    if cfg.target == "xen":
        from irqlab.runner.xen import XenGuest, XenOptions
        return XenGuest(guest_cfg, plan, XenOptions(
            domain=cfg.xen_domain, sched=cfg.xen_sched, opts=dict(cfg.xen_opts),
            binary=cfg.xen_binary, neighbour=cfg.neighbour), name=name)
    return QemuGuest(guest_cfg, plan, icount=cfg.icount, name=name)


def accel_plans(cfg: RunConfig) -> list[AccelPlan]:
    """Accelerators to try for the target (the native probe runs on the host itself)."""
    if cfg.target == "native":
        return [AccelPlan("none", "native", False)]
    plans = plans_for(cfg.accel, cfg.icount)
    kvm_ok = machine_for(cfg.arch).kvm_possible()
    if cfg.target == "xen" and cfg.arch == "x86_64":
        kvm_ok = False      # Xen needs nested VT-x/AMD-V under KVM (docs/xen.md)
    if cfg.target in ("guest", "xen") and not kvm_ok:
        # KVM only runs guests of the host's architecture (arm64 on x86): straight to TCG.
        plans = [p for p in plans if p.accel != "kvm"] or plans
    return plans


def boot_timeout_s(cfg: RunConfig, plan: AccelPlan) -> float:
    """A Linux kernel reaches init in ~1-2 s under real KVM; a software KVM backend
    (e.g. kvm_pvm) hangs stock kernels, so auto gives KVM at most 10 s, then TCG."""
    if cfg.target == "linux-guest" and cfg.accel == "auto" and plan.accel == "kvm":
        return min(cfg.boot_timeout_s, 10.0)
    return cfg.boot_timeout_s


def open_source(cfg: RunConfig, guest: QemuGuest) -> RingReader:
    """The reader of the target's samples (one place to add sample sinks)."""
    if cfg.target in ("native", "linux-guest"):
        from irqlab.samples.multiring import MultiRingReader
        return MultiRingReader(guest.mem_path)
    if cfg.sink == "console":
        from irqlab.samples.console import ConsoleReader
        return ConsoleReader(guest.serial_read)
    return RingReader(guest.mem_path, guest.config.machine.ring_offset)
