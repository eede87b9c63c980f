"""A known preempter on the nested arm64 KVM host, on the vCPU thread's CPU:
``--load kvm-host-hog[:prio=95,spin=2ms,every=100ms,start=1s]`` (``--target kvm-arm64``).

The host-side twin of ``guest-hog`` (irqlab.loads.guest_hog, whose parameters and
irqlab-hog it reuses): the L1's init starts ``irqlab-hog`` pinned to the L1 CPU the
vCPU thread runs on (irqlab.runner.kvm_arm64.VCPU_CPU) at SCHED_FIFO ``prio``, above the
vCPU thread (an ordinary task, as QEMU's vCPU threads are by default). Each spin's
start and end go to the L1's trace marker, so the L1 capture carries the hog's own
account of when it held the CPU: the truth `irqlab explain` is judged against.
"""

from __future__ import annotations

from typing import Any

from irqlab.loads.guest_hog import GuestHogLoad
from irqlab.runner.kvm_arm64 import InL1Hog, KvmArm64Host


class KvmHostHogLoad(GuestHogLoad, InL1Hog):
    kind = "kvm-host-hog"
    requires = "kvm-host-hog"
    params = {"prio": "SCHED_FIFO priority on the KVM host, 1-99 (default 95, above the "
                      "vCPU thread)",
              "spin": "how long each spin holds the vCPU thread's CPU (default 2ms)",
              "every": "one spin per this period (default 100ms)",
              "start": "first spin this long after the KVM host's init starts it "
                       "(default 1s)"}

    def configure(self, params: dict[str, str]) -> None:
        if "cpu" in params or "cpus" in params:
            raise ValueError("load kvm-host-hog runs on the vCPU thread's CPU of the "
                             "nested KVM host: drop cpu=")
        super().configure(params)

    def l1_hog_args(self, vcpu_cpu: int) -> list[str]:
        self.guest_cpu = vcpu_cpu
        return self.hog_args()

    def stop(self) -> None:
        process = self._process
        if not isinstance(process, KvmArm64Host):
            self.error = "no nested KVM host ran this load"
            return
        self.details["l1_args"] = self.hog_args()
        started = "started" in process.host_metadata().get("hog", {})
        self.details["started_in_l1"] = started
        if not started:
            self.error = "the KVM host never started irqlab-hog (see the serial tail)"

    def metadata(self) -> dict[str, Any]:
        return self.guest_metadata("nested arm64 KVM host", self._process is not None)
