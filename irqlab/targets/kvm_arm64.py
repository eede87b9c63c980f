"""``--target kvm-arm64``: the arm64 probe as the KVM guest of an arm64 KVM host that
QEMU emulates with EL2 (irqlab.runner.kvm_arm64; docs/arm64.md, "A nested arm64 KVM
host"). There is no arm64 hardware here, so the host itself runs under TCG: the
figures are functional evidence, always marked emulated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from irqlab.doctor import SETUP, Check
from irqlab.runner.accel import AccelPlan
from irqlab.runner.hostinfo import qemu_version
from irqlab.runner.kvm_arm64 import QEMU, VCPU_CPU, InL1Hog, InL1Trace, KvmArm64Host
from irqlab.runner.machines import machine_for
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.ring import RingReader
from irqlab.samples.source import SampleSource
from irqlab.targets import options as o
from irqlab.targets.base import Target
from irqlab.targets.guest import ProbeOptions, probe_options

# The accelerator as recorded: the probe runs under KVM, whose host QEMU emulates.
NESTED_PLAN = AccelPlan("tcg", "kvm (nested: arm64 KVM host under TCG)", True)
# The L1 kernel boots in ~15 s under TCG here; a loaded machine takes longer.
BOOT_TIMEOUT_S = 180.0


@dataclass
class KvmArm64Options(ProbeOptions):
    def capabilities(self) -> frozenset[str]:
        """"kvm-host-hog": an L1 init that runs a preempter on the vCPU thread's CPU."""
        return frozenset({"kvm-host-hog"})


class KvmArm64Target(Target):
    name = "kvm-arm64"
    help = "the arm64 probe in a KVM guest of an emulated arm64 KVM host (nested, TCG)"
    options = (o.IDLE, o.INJECT_IRQOFF, o.INJECT_EVERY, o.TIMER, o.PROBE)
    why_not = {"accel": "the KVM host is emulated by QEMU TCG; the probe runs under its "
                        "KVM, always",
               "arch": "the probe is the arm64 one",
               "gic": "the KVM guest has an in-kernel GICv3"}

    def doctor(self) -> list[Check]:
        from irqlab.runner.kvm_arm64 import l1_busybox, l1_kernel
        try:
            l1_kernel()
            l1_busybox()
        except FileNotFoundError as exc:
            return [Check("kvm_arm64", False, "arm64 KVM host kernel missing",
                          f"{SETUP} ({exc})")]
        return [Check("kvm_arm64", True, "arm64 KVM host kernel cached")]

    def configure(self, given: dict[str, Any], period_ns: int) -> KvmArm64Options:
        opts = KvmArm64Options(**probe_options(given, period_ns, "arm64"))
        opts.accel = "tcg"
        o.check_machine_values(machine_for("arm64"), opts.idle, opts.timer, "arm64")
        return opts

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        return [NESTED_PLAN]

    def boot_timeout_s(self, cfg: Any, plan: AccelPlan) -> float:
        return max(cfg.boot_timeout_s, BOOT_TIMEOUT_S)

    def stall_timeout_s(self, cfg: Any) -> float:
        # irqvmm copies the ring every 20 ms; the nested guest under TCG is slow.
        return max(10.0, 40 * cfg.period_ns / 1e9)

    def run_metadata(self, cfg: Any) -> dict[str, Any]:
        return {"qemu_version": qemu_version(QEMU),
                "probe_cmdline": cfg.options.guest_config(cfg).cmdline()}

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        gcfg = cfg.options.guest_config(cfg)
        traces = [h for h in cfg.hooks if isinstance(h, InL1Trace)]
        hogs = [h for h in cfg.hooks if isinstance(h, InL1Hog)]
        return KvmArm64Host(plan, gcfg.probe_path, gcfg.cmdline(), name=name,
                            trace_events=traces[0].l1_trace_events() if traces else None,
                            hog_args=hogs[0].l1_hog_args(VCPU_CPU) if hogs else [],
                            extra_qemu_args=list(process_args))

    def trace_capture(self, options: Any, db_path: Any, period_ns: int) -> Any:
        """The L1 kernel's own ftrace (kind "kvm-arm64", irqlab.trace.kvm_host)."""
        from irqlab.trace.kvm_host import KvmHostTraceHook
        return KvmHostTraceHook(db_path, period_ns)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        # irqvmm copies the guest's ring into the ivshmem memfd, ring at offset 0.
        return RingReader(process.mem_path, 0)

    def process_metadata(self, process: MeasuredProcess) -> dict[str, Any]:
        assert isinstance(process, KvmArm64Host)      # spawn() made it
        return {"kvm_host": process.host_metadata()}

    def boot_failure_detail(self, process: MeasuredProcess) -> str:
        return process.stderr()[-600:]
