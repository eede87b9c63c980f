"""Per-architecture QEMU machines: binary, probe image, firmware and accelerator flags.

A Machine knows only what differs between architectures; irqlab.runner.qemu does the rest
(guest memory, process, output capture) the same way for all of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from irqlab.runner.accel import AccelPlan

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBE_BUILD = REPO_ROOT / "probes" / "guest" / "build"
QBOOT_PATHS = ("/usr/share/qemu/qboot.rom", "/usr/share/qboot/bios.bin")

# x86: isa-debug-exit makes QEMU exit with (value << 1) | 1; the probe writes these values.
DEBUG_EXIT_PORT = 0xF4
X86_EXIT_DONE = (0x10 << 1) | 1
X86_EXIT_ERROR = (0x11 << 1) | 1


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

    def argv(self, plan: AccelPlan, icount: bool) -> list[str]:
        """Machine, firmware, exit device, accelerator and CPU options."""
        raise NotImplementedError


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
            # shift=0: 1 instruction = 1 ns of virtual time; sleep=off: idle time is
            # skipped, so a halted guest runs faster than real time and deterministically.
            out += ["-icount", "shift=0,sleep=off"]
        return out


MACHINES: dict[str, Machine] = {
    "x86_64": X86Machine(
        arch="x86_64", qemu="qemu-system-x86_64",
        probe=PROBE_BUILD / "x86_64" / "irqlab-probe.elf",
        install_hint="install Debian's qemu-system-x86 (the README's set-up command does)",
        done_exit_codes=(X86_EXIT_DONE,), error_exit_codes=(X86_EXIT_ERROR,)),
}


def machine_for(arch: str) -> Machine:
    try:
        return MACHINES[arch]
    except KeyError:
        raise ValueError(f"no QEMU machine for arch {arch!r}; known: "
                         f"{', '.join(sorted(MACHINES))}") from None
