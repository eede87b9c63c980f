"""Per-architecture QEMU machines: binary, probe image, firmware and accelerator flags.

A Machine knows only what differs between architectures; irqlab.runner.qemu does the rest
(guest memory, process, output capture) the same way for all of them.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field, replace
from pathlib import Path

from irqlab.paths import built
from irqlab.runner.accel import AccelPlan

PROBE_BUILD = built("probes/guest/build")
QBOOT_PATHS = ("/usr/share/qemu/qboot.rom", "/usr/share/qboot/bios.bin")

# x86: isa-debug-exit makes QEMU exit with (value << 1) | 1; the probe writes these values.
DEBUG_EXIT_PORT = 0xF4
X86_EXIT_DONE = (0x10 << 1) | 1
X86_EXIT_ERROR = (0x11 << 1) | 1

GIC_VERSIONS = (2, 3)

# --icount: 1 instruction = 1 ns of virtual time (shift=0); idle time skipped (sleep=off),
# so a halted guest runs faster than real time. Record mode (its log thrown away) for
# its lock alone: QEMU's replay mutex, real only when recording, keeps the main loop from
# warping the virtual clock between the vCPU thread's halt and its accounting of the
# instructions it ran (QEMU 7.2: softmmu/icount.c icount_start_warp_timer(), accel/tcg/
# tcg-accel-ops-icount.c, util/main-loop.c). Without it a timer IRQ came 32 instructions
# late now and then: twin runs of 800 samples parted in 3 of 100 under SCHED_FIFO bursts,
# in none of 100 recorded (docs/figures.md).
ICOUNT_ARGS = ("-icount", "shift=0,sleep=off,rr=record,rrfile=/dev/null")


def find_qboot() -> str | None:
    """qboot boots a ``-kernel`` in ~0.1 s here against ~1.5 s for SeaBIOS under TCG."""
    for path in QBOOT_PATHS:
        if os.path.exists(path):
            return path
    return None


@dataclass(frozen=True)
class Machine:
    """How to boot the probe of one architecture in QEMU."""

    arch: str
    qemu: str
    probe: Path
    install_hint: str
    done_exit_codes: tuple[int, ...] = ()
    error_exit_codes: tuple[int, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)
    host_arch: str = "x86_64"            # `uname -m` of a host whose KVM runs this guest
    timers: tuple[str, ...] = ("auto", "deadline", "oneshot")   # probe `timer=` values
    idles: tuple[str, ...] = ("hlt", "poll")                    # probe `idle=` values
    sinks: tuple[str, ...] = ("ring",)                          # probe sinks supported

    def argv(self, plan: AccelPlan, icount: bool) -> list[str]:
        """Machine, firmware, exit device, accelerator and CPU options."""
        raise NotImplementedError

    def kvm_possible(self) -> bool:
        """KVM only runs guests of the host's own architecture."""
        return platform.machine() == self.host_arch

    def configured(self, gic: int | None = None) -> "Machine":
        """This machine with per-run options (only arm64 has any: the GIC version)."""
        if gic is not None:
            raise ValueError(f"--gic applies to arm64 guests, not {self.arch}")
        return self


@dataclass(frozen=True)
class X86Machine(Machine):
    def argv(self, plan: AccelPlan, icount: bool) -> list[str]:
        out = ["-M", "pc",
               "-device", f"isa-debug-exit,iobase={DEBUG_EXIT_PORT:#x},iosize=0x04"]
        fw = find_qboot()
        if fw:
            out += ["-bios", fw]
        if plan.accel == "kvm":
            # -arch-capabilities: QEMU 7.2 aborts setting MSR 0x10a on some KVM backends;
            # +invtsc: QEMU then publishes the exact TSC rate in leaf 0x40000010.
            return out + ["-accel", "kvm", "-cpu", "host,-arch-capabilities,+invtsc"]
        out += ["-accel", "tcg", "-cpu", "max"]
        if icount:
            out += ICOUNT_ARGS
        return out


@dataclass(frozen=True)
class Arm64Machine(Machine):
    """QEMU ``virt``: the probe Image gets the device tree in x0 and finds RAM, GIC and
    timer there. It ends with PSCI SYSTEM_OFF, which makes QEMU exit 0 whether the probe
    finished or failed: the ring's ``state`` (done/error) is what tells them apart."""

    gic_version: int = 3

    def configured(self, gic: int | None = None) -> "Machine":
        if gic is None:
            return self
        if gic not in GIC_VERSIONS:
            raise ValueError(f"--gic {gic}: expected one of {GIC_VERSIONS}")
        return replace(self, gic_version=gic)

    def argv(self, plan: AccelPlan, icount: bool) -> list[str]:
        out = ["-M", f"virt,gic-version={self.gic_version}"]
        if plan.accel == "kvm":
            return out + ["-accel", "kvm", "-cpu", "host"]
        # cortex-a57: what Xen and KVM guests commonly see; `max` adds pointer
        # authentication, which makes TCG markedly slower for nothing we measure.
        out += ["-accel", "tcg", "-cpu", "cortex-a57"]
        if icount:
            out += ICOUNT_ARGS
        return out


MACHINES: dict[str, Machine] = {
    "x86_64": X86Machine(
        arch="x86_64", qemu="qemu-system-x86_64",
        probe=PROBE_BUILD / "x86_64" / "irqlab-probe.elf",
        install_hint="install Debian's qemu-system-x86 (the README's set-up command does)",
        done_exit_codes=(X86_EXIT_DONE,), error_exit_codes=(X86_EXIT_ERROR,),
        sinks=("ring", "console")),
    "arm64": Arm64Machine(
        arch="arm64", qemu="qemu-system-aarch64",
        probe=PROBE_BUILD / "arm64" / "irqlab-probe.bin",
        install_hint="install Debian's qemu-system-arm (the README's set-up command does)",
        host_arch="aarch64",
        timers=("auto", "virt", "phys"), idles=("wfi", "hlt", "poll"),
        sinks=("ring", "console")),
}


def machine_for(arch: str) -> Machine:
    try:
        return MACHINES[arch]
    except KeyError:
        raise ValueError(f"no QEMU machine for arch {arch!r}; known: "
                         f"{', '.join(sorted(MACHINES))}") from None
