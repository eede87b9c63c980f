"""``irqlab run --target kvm-arm64 --trace``: the nested arm64 KVM host's own ftrace.

The L1 kernel is the KVM host of the measured guest, so its events are the host side
of every spike: the arch timer's host IRQ, KVM's timer and vGIC injection, the vCPU
thread's wake-up and switch-in, guest entry (docs/arm64.md). irqlab-gtrace
(probes/native/gtrace.c, built for arm64) records them in the L1 on its
CLOCK_MONOTONIC with the extra events irqlab.runner.kvm_arm64.KVM_EVENTS, and streams
the ring pages into a second ivshmem device, as a Linux guest's trace is streamed
(irqlab.trace.guest); the L1's counter is read beside its clock at every drain. After
the run the region becomes the run's capture (``run-N.irqtrace.gz``, kind
``kvm-arm64``, layer ``kvm-host``), its header holding the vCPU thread's tid and the
guest counter's offset irqvmm reported (irqlab.explain.kvm_arm64 maps samples with them).
The outer host (this machine, where QEMU emulates everything) is not traced: its
events say nothing about KVM on Arm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from irqlab.runner.kvm_arm64 import KVM_EVENTS, TRACE_BYTES, InL1Trace, KvmArm64Host
from irqlab.runner.scratch import ScratchDir
from irqlab.trace.archive import trace_file_for
from irqlab.trace.guest import keep_region, region_qemu_args
from irqlab.trace.hook import CaptureHook

KIND = "kvm-arm64"


def host_header(reports: dict[str, Any]) -> dict[str, Any]:
    """The capture header's keys from the L1's reports: the vCPU thread (tid, CPU) and
    the guest counter's offset from the L1's (guest = L1 - voffset_tick)."""
    vcpu = reports.get("vcpu") or {}
    clock = reports.get("clock") or {}
    tid = int(vcpu["tid"]) if vcpu.get("tid", "").isdigit() else None
    out: dict[str, Any] = {"layer": "kvm-host", "vcpu_tids": [tid] if tid else [],
                           "vmm_threads": {str(tid): "irqvmm-vcpu0"} if tid else {},
                           "vcpu_cpu": int(vcpu["cpu"]) if vcpu.get("cpu", "").lstrip(
                               "-").isdigit() else None}
    if clock.get("voffset_tick", "").lstrip("-").isdigit():
        out["guest_voffset_tick"] = int(clock["voffset_tick"])
        out["guest_voffset_bound_tick"] = int(clock.get("bound_tick", "0") or 0)
    return out


class KvmHostTraceHook(CaptureHook, InL1Trace):
    """RunHook (``--trace`` of ``--target kvm-arm64``): the L1's ftrace region."""

    name = "trace"
    requires = None

    def __init__(self, db_path: Path, period_ns: int = 1_000_000) -> None:
        self.db_path = Path(db_path)
        self.period_ns = period_ns
        self.meta: dict[str, Any] = {"kind": KIND, "layer": "kvm-host", "clock": "mono",
                                     "problems": [], "status": "not started"}
        self._scratch: ScratchDir | None = None
        self._region: Path | None = None
        self._process: Any = None
        self.run_id: int | None = None

    def l1_trace_events(self) -> tuple[str, ...]:
        return KVM_EVENTS

    def qemu_args(self) -> list[str]:
        if self._region is None:
            self._scratch = ScratchDir("irqlab-ktrace-")
            self._region = Path(self._scratch.name) / "region"
            with open(self._region, "wb") as f:
                f.truncate(TRACE_BYTES)           # sparse: only written pages take room
        return region_qemu_args(self._region, "irqlab-ktrace", size=TRACE_BYTES)

    def before_start(self) -> None:
        pass

    def after_start(self, ctx: Any) -> None:
        self.run_id = ctx.run_id
        self._process = ctx.process

    def _finish(self) -> None:
        if self._region is None or self.run_id is None:
            return
        reports = (self._process.host_metadata()
                   if isinstance(self._process, KvmArm64Host) else {})
        header = host_header(reports)
        if not header["vcpu_tids"]:
            self.meta["problems"].append("the L1 reported no vCPU thread")
        try:
            self.meta.update(keep_region(self._region, trace_file_for(self.db_path,
                                                                      self.run_id),
                                         self.run_id, header))
        except (OSError, ValueError) as exc:
            self.meta.update({"status": "none", "why": str(exc)})
            self.meta["problems"].append(f"L1 trace: {exc}")
            return
        self.meta.update({k: header[k] for k in header if k != "layer"})
        if self.meta.get("error"):
            self.meta["problems"].append(f"L1 trace: {self.meta['error']}")

    def _teardown(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
