"""``--target linux-guest``: Debian's kernel in QEMU running the native probe, its rings
in an ivshmem memfd irqlab reads (docs/design.md, "Linux guest")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from irqlab.doctor import Check
from irqlab.runner.accel import AccelPlan
from irqlab.runner.hostinfo import qemu_version
from irqlab.runner.linux_arch import LINUX_ARCHES, linux_arch
from irqlab.runner.linux_guest import InGuestHog, LinuxGuest
from irqlab.runner.machines import machine_for
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.multiring import MultiRingReader, layout_bytes
from irqlab.samples.source import SampleSource
from irqlab.targets import options as o
from irqlab.targets.base import Target
from irqlab.targets.native import NativeOptions, native_options

# A Linux kernel reaches init in ~1-2 s under real KVM; a software KVM backend (e.g.
# kvm_pvm) hangs stock kernels silently, so under --accel auto KVM gets at most this.
_AUTO_KVM_BOOT_S = 10.0


@dataclass
class LinuxGuestOptions(NativeOptions):
    accel: str = "auto"

    def capabilities(self) -> frozenset[str]:
        """"guest-hog": an init that runs a known preempter beside the probe."""
        return frozenset({"guest-hog"})


class LinuxGuestTarget(Target):
    name = "linux-guest"
    boot_estimate_s = 30.0
    help = "Debian's kernel in QEMU running the native probe"
    options = (o.ARCH, o.ACCEL, o.ICOUNT, o.CPUS, o.PRIORITY, o.RT_FALLBACK)
    why_not = {"idle": "the native probe's threads sleep in clock_nanosleep",
               "inject_irqoff": "the native probe runs in user space",
               "inject_every": "the native probe runs in user space"}

    def doctor(self) -> list[Check]:
        out = []
        for arch, guest in LINUX_ARCHES.items():
            name = "linux_guest" + ("" if arch == "x86_64" else f"_{arch}")
            if guest.find_kernel() is None:
                out.append(Check(name, False, f"{arch} Linux guest kernel missing",
                                 f"{guest.fetch} (downloads and unpacks it, installs "
                                 f"nothing)"))
            else:
                out.append(Check(name, True, f"{arch} Linux guest kernel cached"))
        return out

    def configure(self, given: dict[str, Any], period_ns: int) -> LinuxGuestOptions:
        opts = LinuxGuestOptions(arch=o.linux_guest_arch(given),
                                 accel=given.get("accel", "auto"),
                                 icount=bool(given.get("icount")), **native_options(given))
        o.check_icount(opts.accel, opts.icount)
        o.check_kvm_arch(opts.accel, opts.arch)
        return opts

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        return o.arch_plans(cfg.options.accel, cfg.options.icount, cfg.options.arch)

    def boot_timeout_s(self, cfg: Any, plan: AccelPlan) -> float:
        if cfg.options.accel == "auto" and plan.accel == "kvm":
            return min(cfg.boot_timeout_s, _AUTO_KVM_BOOT_S)
        return cfg.boot_timeout_s

    def run_metadata(self, cfg: Any) -> dict[str, Any]:
        return {"qemu_version": qemu_version(machine_for(cfg.options.arch).qemu)}

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        opts = cfg.options
        hogs = [h for h in cfg.hooks if isinstance(h, InGuestHog)]
        return LinuxGuest(cfg.period_ns, plan, cpus=opts.cpus, priority=opts.priority,
                          rt_fallback=opts.rt_fallback, samples=cfg.target_samples() or 0,
                          icount=opts.icount, extra_qemu_args=list(process_args),
                          name=name, layout_bytes=layout_bytes,
                          hog_args=hogs[0].hog_args() if hogs else [], arch=opts.arch)

    def trace_capture(self, options: Any, db_path: Any, period_ns: int) -> Any:
        """The host capture around QEMU and the guest kernel's own (kind
        "linux-guest", irqlab.trace.guest), on the trace clock the guest's counter maps
        onto (x86-tsc; arm64: mono, irqlab.runner.linux_arch)."""
        from irqlab.trace.guest import LinuxGuestTraceHook
        return LinuxGuestTraceHook(db_path, period_ns,
                                   clock=linux_arch(options.arch).host_trace_clock)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        return MultiRingReader(process.mem_path)

