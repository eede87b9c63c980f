"""Allocation storms (seed 000's domain-creation spike).

mode=vm (default): a second QEMU VM with ``size`` of RAM preallocated (-mem-prealloc: QEMU
touches every page before the guest starts), created *while the probe runs* — by default as
soon as it runs, or ``delay`` later. mode=alloc: stress-ng --vm workers mapping, touching
and unmapping ``size`` each, started with the run.
"""

from __future__ import annotations

from irqlab.knobs.values import parse_int, parse_size
from irqlab.loads.base import Load
from irqlab.loads.vm import neighbour_plan, probe_vm_argv, vm_name


class MemoryLoad(Load):
    kind = "memory"
    params = {"mode": "vm (second VM, preallocated) or alloc (stress-ng --vm)",
              "size": "VM RAM or bytes per worker (default 1G)",
              "workers": "alloc mode: stress-ng --vm workers (default 1)",
              "accel": "vm mode: auto, kvm or tcg (default auto)"}

    def configure(self, params: dict[str, str]) -> None:
        self.mode = params.get("mode", "vm")
        if self.mode not in ("vm", "alloc"):
            raise ValueError(f"memory mode {self.mode!r}: use vm or alloc")
        self.size = parse_size(params.get("size", "1G"))
        self.workers = parse_int(params.get("workers", "1"), 1, 64, "workers")
        self.plan = neighbour_plan(params.get("accel", "auto"))
        if self.mode == "vm":
            self.tool = "qemu-system-x86_64"
            self.package = "qemu-system-x86"
            if self.size < 16 << 20:
                raise ValueError("memory size must be at least 16M for a VM")
        else:
            self.tool = self.package = "stress-ng"

    def starts_after_boot(self) -> bool:
        return self.mode == "vm" or self.delay_ns is not None

    def command(self) -> list[str]:
        if self.mode == "alloc":
            return ["stress-ng", "--quiet", "--vm", str(self.workers),
                    "--vm-bytes", str(self.size)]
        self.details["accel"] = self.plan.label
        return probe_vm_argv(vm_name("memvm"), self.plan, self.size >> 20, "hlt",
                             prealloc=True)
