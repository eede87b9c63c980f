"""``--target xen``: the probe as a Xen domain under QEMU (docs/xen.md).

arm64: the probe as dom0 or as a dom0less domU, with an optional neighbour domU on the
same pCPU; x86_64: the probe as a PVH dom0. The host cannot map a Xen guest's RAM, so the
probe answers through its console (framed lines, irqlab.samples.console).

``--xen-dom0 linux`` (x86_64, or arm64): Debian's Linux as dom0 with xl, the probe an
xl-created domU (PVH on x86) whose ring dom0 forwards to the host through ivshmem
(irqlab.runner.xen_dom0, xen_dom0_arm64);
dom0-side loads and Xen knobs found among the run's hooks are baked into dom0's init.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irqlab.doctor import SETUP, Check
from irqlab.runner.accel import AccelPlan, plans_for
from irqlab.runner.machines import MACHINES, machine_for
from irqlab.runner.process import MeasuredProcess
from irqlab.runner.xen import (DEB_ARCH, NEIGHBOURS, XEN_DOMAINS, XEN_SCHEDS, XenGuest,
                               XenOptions, binary_from_path, fetch_hint, find_xen,
                               parse_opts)
from irqlab.knobs.vcpu import PinKnob
from irqlab.runner.xen_dom0 import (X86_64_DOM0, XL_SCHED_SETTINGS, Dom0Load,
                                    Dom0Plan, InDom0Load, InDom0Setting, InDom0Trace,
                                    dom0_cache_dir)
from irqlab.runner.xen_dom0_arm64 import ARM64_DOM0
from irqlab.runner.xen_dom0 import fetch_hint as dom0_fetch_hint
from irqlab.samples.console import ConsoleReader
from irqlab.samples.ring import RingReader
from irqlab.samples.source import SampleSource
from irqlab.targets import options as o
from irqlab.targets.base import Option, Target, TargetUsageError
from irqlab.targets.guest import ProbeOptions, probe_options

XEN_DOMAIN = Option("--xen-domain", "xen_domain", dict(
    choices=XEN_DOMAINS,
    help="the probe as dom0, or a domU (default; dom0 on x86_64): dom0less without a "
         "dom0 OS; with --xen-dom0 linux xl-created, or built by Xen at boot with "
         "dom0less (arm64)"))
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
XEN_DOM0 = Option("--xen-dom0", "xen_dom0", dict(
    choices=("none", "linux"),
    help="linux: Debian's Linux as dom0 with xl, the probe an xl-created domU (x86_64 "
         "by default, PVH; or --arch arm64; dom0 loads, --pin, rtds/cpupool knobs); none "
         "(default): no dom0 OS"))
XEN_PCPUS = Option("--xen-pcpus", "xen_pcpus", dict(
    type=int, metavar="N",
    help="physical CPUs of the emulated machine with --xen-dom0 linux (default 1: dom0 "
         "and the probe share it, as in seed 000)"))
NEIGHBOUR = Option("--neighbour", "neighbour", dict(
    choices=NEIGHBOURS,
    help="a second dom0less domU on the same pCPU: cpu (busy), console (console flood), "
         "idle, or none (default); with --xen-dom0 linux, arm64 only"))


@dataclass
class XenProbeOptions(ProbeOptions):
    sink: str = "console"
    xen_domain: str = "domU"
    xen_sched: str = "credit2"
    xen_opts: dict[str, str] = field(default_factory=dict)
    xen_binary: Path | None = None
    neighbour: str = "none"
    xen_dom0: str = "none"
    xen_pcpus: int = 1

    @property
    def dom0_linux(self) -> bool:
        """A Linux dom0 runs the toolstack (dom0-side loads and Xen knobs need it)."""
        return self.xen_dom0 == "linux"

    def capabilities(self) -> frozenset[str]:
        return frozenset({"xen-dom0"}) if self.dom0_linux else frozenset()


# Where each architecture's dom0 pieces are (irqlab.runner.xen_dom0, xen_dom0_arm64).
DOM0_ARCH = {"x86_64": X86_64_DOM0, "arm64": ARM64_DOM0}
# Memory of the emulated machine's parts with a Linux dom0 (MiB).
DOM0_LINUX_MEM_MIB = 384
DOMU_MEM_MIB = 32
XEN_SLACK_MIB = 256
# A Linux dom0 under TCG takes ~20 s to create the probe domU (docs/xen.md).
DOM0_BOOT_TIMEOUT_S = 120.0
# Xen numbers the domains it builds at boot from 1, in /chosen order: the probe first.
DOM0LESS_PROBE_DOMID = 1


class XenTarget(Target):
    name = "xen"
    boot_estimate_s = 30.0
    help = "the probe as a Xen dom0 or dom0less domU in QEMU"
    options = (o.ARCH, o.ACCEL, o.IDLE, o.INJECT_IRQOFF, o.INJECT_EVERY, o.TIMER, o.GIC,
               o.PROBE, XEN_DOMAIN, XEN_SCHED, XEN_OPT, XEN_BINARY, NEIGHBOUR, XEN_DOM0,
               XEN_PCPUS)
    why_not = {"icount": "Xen under QEMU -icount was not verified",
               "sink": "Xen guests always report through the console",
               "memory": "the domain's memory is Xen's to set"}

    def doctor(self) -> list[Check]:
        """Xen for both architectures, and the Linux dom0 of --xen-dom0 linux (toolstack,
        busybox and modules; arm64: its kernel too), each cached by set-up."""
        from irqlab.runner.xen import find_xen
        from irqlab.runner.xen_dom0 import dom0_cache_dir
        xen = [a for a in ("arm64", "amd64") if find_xen("credit2", a) is not None]
        dom0 = [a for a in ("arm64", "amd64") if (dom0_cache_dir(a) / ".complete").exists()]
        ok = len(xen) == 2 and len(dom0) == 2
        detail = (f"Xen: {', '.join(xen) or 'none cached'}; "
                  f"Xen Linux dom0: {', '.join(dom0) or 'none cached'}")
        return [Check("xen", ok, detail,
                      None if ok else f"{SETUP} (downloads and unpacks them, installs "
                                      f"nothing)")]

    def configure(self, given: dict[str, Any], period_ns: int) -> XenProbeOptions:
        dom0 = given.get("xen_dom0", "none")
        # The Linux dom0 came to x86 first: it stays that option's default architecture.
        arch = given.get("arch", "x86_64" if dom0 == "linux" else "arm64")
        base = probe_options(given, period_ns, arch)
        pcpus = given.get("xen_pcpus")
        if pcpus is not None and dom0 != "linux":
            raise TargetUsageError("--xen-pcpus needs --xen-dom0 linux (without a dom0 OS "
                                   "the machine has one pCPU)")
        if pcpus is not None and not 1 <= pcpus <= 8:
            raise TargetUsageError("--xen-pcpus must be 1..8")
        o.check_machine_values(MACHINES[arch], base["idle"], base["timer"],
                               f"the {arch} probe")
        domain = given.get("xen_domain")
        neighbour = given.get("neighbour", "none")
        if dom0 == "linux":
            if domain == "dom0":
                raise TargetUsageError("--xen-dom0 linux measures the probe as a domU: "
                                       "drop --xen-domain dom0 (or use domU: xl-created, "
                                       "or dom0less: built by Xen at boot)")
            if arch != "arm64" and (domain == "dom0less" or neighbour != "none"):
                raise TargetUsageError("--xen-domain dom0less and --neighbour with --xen-dom0"
                                       " linux are arm64 only (x86 Xen has no dom0less "
                                       "here): add --arch arm64, or use --load dom0-cpu "
                                       "etc. for interference")
            if base["accel"] == "kvm":
                raise TargetUsageError("--xen-dom0 linux runs under TCG only here: use "
                                       "--accel tcg or auto")
            deb_arch = DEB_ARCH[arch]
            if not (dom0_cache_dir(deb_arch) / ".complete").exists():
                raise TargetUsageError(f"--xen-dom0 linux --arch {arch}: "
                                       f"{dom0_fetch_hint(deb_arch)}")
        elif arch == "x86_64":
            # docs/xen.md: the x86 probe is a PVH dom0 (no dom0 Linux, so no xl for domUs),
            # and Xen needs VT-x/AMD-V inside its VM, which only TCG gives here.
            if domain in ("domU", "dom0less") or neighbour != "none":
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
        if dom0 == "linux":
            domain = domain or "domU"
        elif domain == "dom0less":
            domain = "domU"          # without a dom0 OS every domU is a dom0less one
        return XenProbeOptions(**base, xen_domain=domain or ("dom0" if arch == "x86_64"
                                                             else "domU"),
                               xen_sched=sched, xen_opts=opts, xen_binary=path,
                               neighbour=neighbour, xen_dom0=dom0, xen_pcpus=pcpus or 1,
                               sink="ring" if dom0 == "linux" else "console")

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        plans = plans_for(cfg.options.accel, False)
        # KVM runs only guests of the host's architecture, and an x86 Xen needs nested
        # VT-x/AMD-V under KVM (docs/xen.md): straight to TCG then.
        if cfg.options.arch == "x86_64" or not machine_for(cfg.options.arch).kvm_possible():
            plans = [p for p in plans if p.accel != "kvm"] or plans
        return plans

    def boot_timeout_s(self, cfg: Any, plan: AccelPlan) -> float:
        if cfg.options.dom0_linux:
            return max(cfg.boot_timeout_s, DOM0_BOOT_TIMEOUT_S)
        return cfg.boot_timeout_s

    def stall_timeout_s(self, cfg: Any) -> float:
        # Console frames come every 16 samples, and Xen under TCG is slow.
        return max(10.0, 40 * cfg.period_ns / 1e9)

    def run_metadata(self, cfg: Any) -> dict[str, Any]:
        return cfg.options.run_metadata(cfg)

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        opts: XenProbeOptions = cfg.options
        gcfg = opts.guest_config(cfg)
        gcfg.extra_qemu_args = list(process_args)
        return XenGuest(gcfg, plan, XenOptions(
            domain=opts.xen_domain, sched=opts.xen_sched, opts=dict(opts.xen_opts),
            binary=opts.xen_binary, neighbour=opts.neighbour), name=name,
            dom0=self.dom0_plan(cfg) if opts.dom0_linux else None,
            pcpus=opts.xen_pcpus)

    def dom0_plan(self, cfg: Any) -> Dom0Plan:
        """What dom0's init does: the probe domU, plus every dom0-side load and Xen knob
        among the run's hooks (found by their interfaces, irqlab.runner.xen_dom0).
        A knob Xen cannot honour here is marked not applicable, with the reason."""
        opts: XenProbeOptions = cfg.options
        plan = Dom0Plan(probe_cmdline=opts.guest_config(cfg).cmdline(),
                        domu_memory_mib=DOMU_MEM_MIB, pcpus=opts.xen_pcpus,
                        arch=DOM0_ARCH[opts.arch],
                        probe_domid=DOM0LESS_PROBE_DOMID if opts.xen_domain == "dom0less"
                        else None)
        built = find_xen(opts.xen_sched, DEB_ARCH[opts.arch])
        scheds = (built.schedulers() if opts.xen_binary is None and built else None)
        for hook in cfg.hooks:
            if isinstance(hook, InDom0Load):
                kind, name, params = hook.dom0_load()
                plan.loads.append(Dom0Load(kind, name, params))
            elif isinstance(hook, InDom0Setting):
                key, value = hook.dom0_setting()
                if key.startswith("rtds_") and opts.xen_sched != "rtds":
                    hook.not_applicable(f"the scheduler is {opts.xen_sched}: RTDS "
                                        f"parameters need --xen-sched rtds (a Xen built by "
                                        f"scripts/build-xen-rtds.sh)")
                elif key == "rtds_period":
                    plan.rtds_period_ns = value
                elif key == "rtds_budget":
                    plan.rtds_budget_ns = value
                elif key in XL_SCHED_SETTINGS:
                    sched, args, readback = XL_SCHED_SETTINGS[key]
                    if sched != opts.xen_sched:
                        hook.not_applicable(f"the scheduler is {opts.xen_sched}: {key} is a "
                                            f"{sched} parameter (--xen-sched {sched})")
                    else:
                        plan.xl_settings.append((key, args.format(domu=plan.domu_ref,
                                                                  value=value),
                                                 readback.format(domu=plan.domu_ref)))
                elif key == "cpupool":
                    if scheds is not None and value not in scheds:
                        hook.not_applicable(f"this Xen has only {', '.join(scheds)} (Debian's"
                                            f" build); scripts/build-xen-rtds.sh adds rtds "
                                            f"and null")
                    elif opts.xen_pcpus < 2:
                        hook.not_applicable("a cpupool of its own needs a pCPU taken from "
                                            "Pool-0: use --xen-pcpus 2 or more")
                    else:
                        plan.cpupool_sched = value
            elif isinstance(hook, InDom0Trace):
                plan.trace = hook.dom0_trace()
            elif isinstance(hook, PinKnob):
                # --pin: the measured domU's vCPU onto these pCPUs (xl cpus=), besides the
                # knob's own pinning of QEMU's vCPU threads on the host.
                plan.pin = hook.value
        return plan

    def trace_capture(self, options: Any, db_path: Path, period_ns: int) -> Any:
        """With a Linux dom0, xentrace in dom0 (irqlab.xen.capture): what delays a domU
        is Xen's scheduling and hypercalls, not the host's kernel. Without one, the host
        capture around QEMU (the default)."""
        if options.dom0_linux:
            from irqlab.xen.capture import XentraceHook
            return XentraceHook(db_path)
        return super().trace_capture(options, db_path, period_ns)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        if cfg.options.dom0_linux:
            # dom0 copies the domU's ring into the ivshmem memfd, ring at offset 0.
            return RingReader(process.mem_path, 0)
        return ConsoleReader(process.serial_read)

    def process_metadata(self, process: MeasuredProcess) -> dict[str, Any]:
        assert isinstance(process, XenGuest)      # spawn() made it
        return {"xen": process.metadata()}        # version, build, full command line

    def boot_failure_detail(self, process: MeasuredProcess) -> str:
        assert isinstance(process, XenGuest)
        return process.console_summary()
