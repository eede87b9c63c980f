"""``--target xen``: the probe as a Xen domain under QEMU (docs/xen.md).

arm64: the probe as dom0 or as a dom0less domU, with an optional neighbour domU on the
same pCPU; x86_64: the probe as a PVH dom0. The host cannot map a Xen guest's RAM, so the
probe answers through its console (framed lines, irqlab.samples.console).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irqlab.runner.accel import AccelPlan, plans_for
from irqlab.runner.hostinfo import qemu_version
from irqlab.runner.machines import MACHINES, machine_for
from irqlab.runner.process import ProcessTarget
from irqlab.runner.xen import (DEB_ARCH, NEIGHBOURS, XEN_DOMAINS, XEN_SCHEDS, XenGuest,
                               XenOptions, binary_from_path, fetch_hint, find_xen,
                               parse_opts)
from irqlab.samples.console import ConsoleReader
from irqlab.samples.source import SampleSource
from irqlab.targets import options as o
from irqlab.targets.base import Option, Target, TargetUsageError
from irqlab.targets.guest import ProbeOptions, probe_options

XEN_DOMAIN = Option("--xen-domain", "xen_domain", dict(
    choices=XEN_DOMAINS,
    help="the probe as dom0 or as a dom0less domU (default domU; dom0 on x86_64)"))
XEN_SCHED = Option("--xen-sched", "xen_sched", dict(
    choices=XEN_SCHEDS,
    help="Xen's scheduler, sched= (default credit2; rtds and null need a Xen built with "
         "them: scripts/build-xen-rtds.sh)"))
XEN_OPT = Option("--xen-opt", "xen_opt", dict(
    action="append", metavar="K=V",
    help="extra hypervisor option, repeatable (e.g. vwfi=native)"))
XEN_BINARY = Option("--xen-binary", "xen_binary", dict(
    type=Path, metavar="PATH",
    help="hypervisor image to boot (default: Debian's, cached by setup.sh; $IRQLAB_XEN "
         "also sets it)"))
NEIGHBOUR = Option("--neighbour", "neighbour", dict(
    choices=NEIGHBOURS,
    help="a second dom0less domU on the same pCPU: cpu (busy), console (console flood), "
         "idle, or none (default)"))


@dataclass
class XenProbeOptions(ProbeOptions):
    sink: str = "console"
    xen_domain: str = "domU"
    xen_sched: str = "credit2"
    xen_opts: dict[str, str] = field(default_factory=dict)
    xen_binary: Path | None = None
    neighbour: str = "none"


class XenTarget(Target):
    name = "xen"
    help = "the probe as a Xen dom0 or dom0less domU in QEMU"
    options = (o.ARCH, o.ACCEL, o.IDLE, o.INJECT_IRQOFF, o.INJECT_EVERY, o.TIMER, o.GIC,
               o.PROBE, XEN_DOMAIN, XEN_SCHED, XEN_OPT, XEN_BINARY, NEIGHBOUR)
    why_not = {"icount": "Xen under QEMU -icount was not verified",
               "sink": "Xen guests always report through the console",
               "memory": "the domain's memory is Xen's to set"}

    def configure(self, given: dict[str, Any], period_ns: int) -> XenProbeOptions:
        arch = given.get("arch", "arm64")
        base = probe_options(given, period_ns, arch)
        o.check_machine_values(MACHINES[arch], base["idle"], base["timer"],
                               f"the {arch} probe")
        domain = given.get("xen_domain")
        neighbour = given.get("neighbour", "none")
        if arch == "x86_64":
            # docs/xen.md: the x86 probe is a PVH dom0 (no dom0 Linux, so no xl for domUs),
            # and Xen needs VT-x/AMD-V inside its VM, which only TCG gives here.
            if domain == "domU" or neighbour != "none":
                raise TargetUsageError("--target xen --arch x86_64 runs the probe as a PVH "
                                       "dom0 only: drop --xen-domain domU and --neighbour")
            if base["accel"] == "kvm":
                raise TargetUsageError("--target xen --arch x86_64 runs under TCG only (Xen "
                                       "needs nested VT-x/AMD-V under KVM): use --accel tcg "
                                       "or auto")
        try:
            opts = parse_opts(given.get("xen_opt") or [])
        except ValueError as exc:
            raise TargetUsageError(str(exc)) from None
        if "sched" in opts:
            raise TargetUsageError("set the scheduler with --xen-sched, not --xen-opt sched=")
        sched = given.get("xen_sched", "credit2")
        path = given.get("xen_binary")
        if path is not None and not path.is_file():
            raise TargetUsageError(f"--xen-binary {path} is not a file")
        deb_arch = DEB_ARCH[arch]
        binary = binary_from_path(path) if path is not None else find_xen(sched, deb_arch)
        if binary is None:
            raise TargetUsageError(f"no Xen hypervisor found: {fetch_hint(deb_arch)}")
        built = binary.schedulers()
        if built is not None and sched not in built:
            raise TargetUsageError(f"--xen-sched {sched}: {binary.path} has only "
                                   f"{', '.join(built)} (from {binary.config}); build a Xen "
                                   f"with RTDS and null with scripts/build-xen-rtds.sh, or "
                                   f"pass --xen-binary")
        return XenProbeOptions(**base, xen_domain=domain or ("dom0" if arch == "x86_64"
                                                             else "domU"),
                               xen_sched=sched, xen_opts=opts, xen_binary=path,
                               neighbour=neighbour)

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        plans = plans_for(cfg.options.accel, False)
        # KVM runs only guests of the host's architecture, and an x86 Xen needs nested
        # VT-x/AMD-V under KVM (docs/xen.md): straight to TCG then.
        if cfg.options.arch == "x86_64" or not machine_for(cfg.options.arch).kvm_possible():
            plans = [p for p in plans if p.accel != "kvm"] or plans
        return plans

    def stall_timeout_s(self, cfg: Any) -> float:
        # Console frames come every 16 samples, and Xen under TCG is slow.
        return max(10.0, 40 * cfg.period_ns / 1e9)

    def run_metadata(self, cfg: Any) -> dict[str, Any]:
        gcfg = cfg.options.guest_config(cfg)
        return {"qemu_version": qemu_version(gcfg.machine.qemu),
                "probe_cmdline": gcfg.cmdline()}

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              extra_qemu_args: list[str]) -> ProcessTarget:
        opts: XenProbeOptions = cfg.options
        gcfg = opts.guest_config(cfg)
        gcfg.extra_qemu_args = list(extra_qemu_args)
        return XenGuest(gcfg, plan, XenOptions(
            domain=opts.xen_domain, sched=opts.xen_sched, opts=dict(opts.xen_opts),
            binary=opts.xen_binary, neighbour=opts.neighbour), name=name)

    def open_source(self, cfg: Any, process: ProcessTarget) -> SampleSource:
        return ConsoleReader(process.serial_read)

    def process_metadata(self, process: ProcessTarget) -> dict[str, Any]:
        assert isinstance(process, XenGuest)      # spawn() made it
        return {"xen": process.metadata()}        # version, build, full command line

    def boot_failure_detail(self, process: ProcessTarget) -> str:
        assert isinstance(process, XenGuest)
        return process.console_summary()
