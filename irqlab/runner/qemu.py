"""The x86-64 guest probe in a QEMU VM: command line, process and guest memory.

Guest RAM is a memfd we create and hand to QEMU (``memory-backend-file,share=on`` on
``/proc/self/fd/N``): the host maps the same pages and reads the sample ring without the
guest ever exiting, and no file is left on disk whatever happens to either process.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from irqlab.runner.accel import AccelPlan
from irqlab.runner.machines import Machine, machine_for
from irqlab.runner.process import ProcessTarget


@dataclass
class GuestConfig:
    """Everything the probe and its VM are started with."""

    period_ns: int
    idle: str = "hlt"
    inject_irqoff_ns: int = 0
    inject_every: int = 0
    samples: int = 0
    timer: str = "auto"
    memory_mib: int = 64
    arch: str = "x86_64"
    probe: Path | None = None
    extra_args: str = ""
    extra_qemu_args: list[str] = field(default_factory=list)
    gic: int | None = None          # arm64: GIC version (None = the machine's default)
    sink: str = "ring"              # how samples come back: ring (guest RAM) or console

    @property
    def machine(self) -> Machine:
        return machine_for(self.arch).configured(gic=self.gic)

    @property
    def probe_path(self) -> Path:
        return self.probe or self.machine.probe

    def cmdline(self) -> str:
        """The probe's boot parameters (docs/formats.md section 1)."""
        return (f"period_ns={self.period_ns} idle={self.idle} "
                f"inject_irqoff_ns={self.inject_irqoff_ns} inject_every={self.inject_every} "
                f"samples={self.samples} timer={self.timer}"
                + (f" sink={self.sink}" if self.sink != "ring" else "")
                + (f" {self.extra_args}" if self.extra_args else ""))


@dataclass
class QemuGuest(ProcessTarget):
    """A running QEMU process with the probe and its shared guest memory."""

    config: GuestConfig
    plan: AccelPlan
    icount: bool = False
    name: str = "irqlab"

    def build_argv(self) -> list[str]:
        cfg = self.config
        size = f"{cfg.memory_mib}M"
        return ([cfg.machine.qemu, "-name", f"{self.name},debug-threads=on", "-m", size,
                 "-object", f"memory-backend-file,id=irqlab-mem,size={size},"
                            f"mem-path=/proc/self/fd/{self.mem_fd},share=on",
                 "-machine", "memory-backend=irqlab-mem",
                 "-nodefaults", "-display", "none", "-no-reboot",
                 "-serial", "stdio", "-monitor", "none"]
                + cfg.machine.argv(self.plan, self.icount)
                + cfg.extra_qemu_args
                + ["-kernel", str(cfg.probe_path), "-append", cfg.cmdline()])

    def start(self) -> None:
        """Create guest memory and start QEMU; raises OSError with the reason."""
        machine = self.config.machine
        if not self.config.probe_path.exists():
            raise FileNotFoundError(
                f"guest probe {self.config.probe_path} is not built: run `make -C "
                f"probes/guest` (or the README's set-up command)")
        if shutil.which(machine.qemu) is None:
            raise FileNotFoundError(f"{machine.qemu} not found: {machine.install_hint}")
        self._create_memfd("irqlab-guest-ram", self.config.memory_mib << 20)
        self._spawn(self.build_argv())

    def exited_done(self, code: int) -> bool:
        return code in self.config.machine.done_exit_codes

    def exited_error(self, code: int) -> bool:
        return code in self.config.machine.error_exit_codes
