"""Neighbour QEMU VMs used by the memory, console and neighbour loads.

They boot either the probe itself (a guest that is CPU-bound with ``idle=poll``) or a
64 KiB firmware image irqlab writes (console flood): no other guest software is needed.
"""

from __future__ import annotations

import os

from irqlab.runner.accel import AccelPlan, kvm_plan, kvm_usable
from irqlab.runner.machines import machine_for
from irqlab.runner.qemu import base_argv, probe_cmdline

ACCELS = ("auto", "kvm", "tcg")


def neighbour_plan(choice: str) -> AccelPlan:
    """auto: KVM when /dev/kvm is usable (like the guest under test), else TCG."""
    if choice not in ACCELS:
        raise ValueError(f"accel {choice!r}: use auto, kvm or tcg")
    if choice == "kvm" or (choice == "auto" and kvm_usable() is None):
        return kvm_plan()
    return AccelPlan("tcg", "tcg", True)


def probe_vm_argv(name: str, plan: AccelPlan, memory_mib: int, idle: str,
                  prealloc: bool = False) -> list[str]:
    """A VM running the probe until killed (samples=0); nobody reads its ring."""
    machine = machine_for("x86_64")
    if not machine.probe.exists():
        raise FileNotFoundError(f"guest probe {machine.probe} is not built: run "
                                f"`make -C probes/guest`")
    return (base_argv(machine.qemu, name, memory_mib, serial="null")
            + (["-mem-prealloc"] if prealloc else [])
            + machine.argv(plan, False)
            + ["-kernel", str(machine.probe),
               "-append", probe_cmdline(1_000_000, idle, samples=0)])


def flood_rom(spin: int) -> bytes:
    """A 64 KiB x86 firmware that writes 'x' to COM1 forever, spinning ``spin`` loop
    iterations between characters (0 = flat out). Runs at the reset vector, real mode."""
    code = bytes([0xBA, 0xF8, 0x03,          # mov dx, 0x3f8
                  0xB0, 0x78])               # mov al, 'x'
    body = bytes([0xEE])                     # again: out dx, al
    if spin:
        body += bytes([0xB9, spin & 0xFF, spin >> 8,   # mov cx, spin
                       0xE2, 0xFE])                     # loop $
    body += bytes([0xEB, (-(len(body) + 2)) & 0xFF])   # jmp again
    stub = code + body
    assert len(stub) <= 16, "the reset vector has 16 bytes before 4 GiB"
    rom = bytearray([0xF4] * 0x10000)        # hlt everywhere else
    rom[0xFFF0:0xFFF0 + len(stub)] = stub
    return bytes(rom)


def rom_vm_argv(name: str, plan: AccelPlan, rom_path: str, serial: str) -> list[str]:
    accel = (["-accel", "kvm", "-cpu", "host,-arch-capabilities"] if plan.accel == "kvm"
             else ["-accel", "tcg"])
    return (base_argv(machine_for("x86_64").qemu, name, 16, serial=serial)
            + ["-M", "pc", "-bios", rom_path] + accel)


def vm_name(kind: str) -> str:
    return f"irqlab-{kind}-{os.getpid()}"
