"""A second VM running a CPU-bound guest (the probe with idle=poll) on the given CPUs:
two vCPUs on one pCPU, the case seed 000's authors cared about. Pin the guest under test to
the same CPU (``pin=1``) to share it."""

from __future__ import annotations

from irqlab.knobs.values import parse_int
from irqlab.loads.base import Load
from irqlab.loads.vm import neighbour_plan, probe_vm_argv, vm_name


class NeighbourLoad(Load):
    kind = "neighbour"
    tool = "qemu-system-x86_64"
    package = "qemu-system-x86"
    params = {"accel": "auto, kvm or tcg (default auto)",
              "memory": "neighbour RAM in MiB (default 32)",
              "idle": "poll (default: CPU-bound) or hlt (a mostly idle neighbour)"}

    def configure(self, params: dict[str, str]) -> None:
        self.plan = neighbour_plan(params.get("accel", "auto"))
        self.memory = parse_int(params.get("memory", "32"), 16, 1 << 20, "memory (MiB)")
        self.idle = params.get("idle", "poll")
        if self.idle not in ("poll", "hlt"):
            raise ValueError(f"neighbour idle {self.idle!r}: use poll or hlt")

    def command(self) -> list[str]:
        self.details["accel"] = self.plan.label
        return probe_vm_argv(vm_name("neighbour"), self.plan, self.memory, self.idle)
