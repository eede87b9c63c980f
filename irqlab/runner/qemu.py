"""The guest probe in a QEMU VM (x86-64 or arm64): command line, process, guest memory.

Guest RAM is a memfd we create and hand to QEMU (``memory-backend-file,share=on`` on
``/proc/self/fd/N``): the host maps the same pages and reads the sample ring without the
guest ever exiting, and no file is left on disk whatever happens to either process.
What differs between architectures is in irqlab.runner.machines.

:func:`base_argv` and :func:`probe_cmdline` are the one place that writes QEMU's common
options and the probe's boot line: the other VMs irqlab starts (Linux guest, Xen, the
neighbour VMs of irqlab.loads.vm) build on them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from irqlab.runner.accel import AccelPlan
from irqlab.runner.machines import Machine, machine_for
from irqlab.runner.process import MeasuredProcess

RAM_ID = "irqlab-mem"           # QEMU object id of the guest RAM when it is our memfd


def memfd_backend(obj_id: str, size: str, fd: int) -> list[str]:
    """A QEMU memory backend on our memfd ``fd`` (inherited by QEMU), shared so the
    host sees the guest's writes; ``size`` in QEMU's syntax ("64M", "1048576")."""
    return ["-object", f"memory-backend-file,id={obj_id},size={size},"
                       f"mem-path=/proc/self/fd/{fd},share=on"]


def base_argv(qemu: str, name: str, memory_mib: int, serial: str = "stdio",
              ram_fd: int | None = None, smp: int | None = None) -> list[str]:
    """QEMU's options common to every VM irqlab starts; the machine's own come after.

    ``debug-threads=on`` names the vCPU threads (the vCPU knobs find them by name);
    ``ram_fd``: guest RAM is that memfd, so the host can read it; no default devices,
    display, reboot or monitor; the first serial port goes to ``serial``.
    """
    size = f"{memory_mib}M"
    argv = [qemu, "-name", f"{name},debug-threads=on", "-m", size]
    if ram_fd is not None:
        argv += memfd_backend(RAM_ID, size, ram_fd)
        argv += ["-machine", f"memory-backend={RAM_ID}"]
    if smp is not None:
        argv += ["-smp", str(smp)]
    return argv + ["-nodefaults", "-display", "none", "-no-reboot",
                   "-serial", serial, "-monitor", "none"]


def probe_cmdline(period_ns: int, idle: str, samples: int = 0, *,
                  inject_irqoff_ns: int | None = None, inject_every: int | None = None,
                  timer: str | None = None, sink: str = "ring", extra: str = "") -> str:
    """The probe's boot parameters (docs/formats.md section 1), in that section's order.
    A parameter left None is not written (the probe's default applies); ``extra`` is
    appended as is."""
    words = [f"period_ns={period_ns}", f"idle={idle}"]
    if inject_irqoff_ns is not None:
        words.append(f"inject_irqoff_ns={inject_irqoff_ns}")
    if inject_every is not None:
        words.append(f"inject_every={inject_every}")
    words.append(f"samples={samples}")
    if timer is not None:
        words.append(f"timer={timer}")
    if sink != "ring":
        words.append(f"sink={sink}")
    if extra:
        words.append(extra)
    return " ".join(words)


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
        """The probe's boot parameters (docs/formats.md section 1), all written out: the
        run's metadata then shows every setting."""
        return probe_cmdline(self.period_ns, self.idle, self.samples,
                             inject_irqoff_ns=self.inject_irqoff_ns,
                             inject_every=self.inject_every, timer=self.timer,
                             sink=self.sink, extra=self.extra_args)


@dataclass
class QemuGuest(MeasuredProcess):
    """A running QEMU process with the probe and its shared guest memory."""

    config: GuestConfig
    plan: AccelPlan
    icount: bool = False
    name: str = "irqlab"
    def build_argv(self) -> list[str]:
        cfg = self.config
        return (base_argv(cfg.machine.qemu, self.name, cfg.memory_mib, ram_fd=self.mem_fd)
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
