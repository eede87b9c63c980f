"""``irqlab run`` options that several targets take, each defined once.

A target lists the options it takes (``Target.options``); the CLI adds every option once
and tells the user which targets take it. Defaults are None here ("not given"): each
target applies its own in ``configure``, so one option may default differently per target
(``--arch``: x86_64 for the guest probe, arm64 under Xen).
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path
from typing import Any

from irqlab.argtypes import cpu_list, duration
from irqlab.runner.accel import ACCEL_CHOICES, AccelPlan, plans_for
from irqlab.runner.linux_arch import LINUX_ARCHES
from irqlab.runner.machines import MACHINES, Machine, machine_for
from irqlab.targets.base import Option, TargetUsageError

def _bounded(low: int, high: int, unit: str = ""):
    """argparse type: an ASCII integer in [low, high] (bounded up front, exit 2)."""
    def parse(text: str) -> int:
        t = text.strip()
        if not (t.isascii() and t.isdigit()):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number: write "
                                             f"digits 0-9")
        val = int(t) if len(t) <= 19 else high + 1
        if not low <= val <= high:
            raise argparse.ArgumentTypeError(f"{t[:40]} is out of range: use {low}-{high}"
                                             f"{unit}")
        return val
    parse.__name__ = "whole number"
    return parse


# Guest RAM above this is refused up front (QEMU would fail later); configure() also
# compares it with this host's memory.
MAX_MEMORY_MIB = 1 << 20          # 1 TiB
# Every Nth period: beyond a billion periods the self-check never fires in a run.
MAX_INJECT_EVERY = 10**9

ARCH = Option("--arch", "arch", dict(
    choices=sorted(MACHINES),
    help="probe architecture (guest, linux-guest, net: default x86_64; xen: default arm64, "
         "x86_64 runs the probe as a PVH dom0)"))
ACCEL = Option("--accel", "accel", dict(
    choices=list(ACCEL_CHOICES),
    help="auto (default) tries KVM with a real boot and falls back to TCG"))
ICOUNT = Option("--icount", "icount", dict(
    action="store_const", const=True,
    help="TCG with deterministic guest time (exact, repeatable)"))
IDLE = Option("--idle", "idle", dict(
    choices=["hlt", "poll", "wfi"],
    help="how the probe waits: hlt (default; wfi on arm64, either name works there) or "
         "busy poll"))
INJECT_IRQOFF = Option("--inject-irqoff", "inject_irqoff", dict(
    type=duration, metavar="DUR",
    help="self-check: spin with interrupts off for DUR across the deadline"))
INJECT_EVERY = Option("--inject-every", "inject_every", dict(
    type=_bounded(0, MAX_INJECT_EVERY), metavar="N",
    help="self-check: inject in every Nth period"))
TIMER = Option("--timer", "timer", dict(
    choices=["auto", "deadline", "oneshot", "virt", "phys"],
    help="x86: LAPIC timer mode (auto: TSC-deadline when CPUID has it); arm64: EL1 "
         "virtual (auto) or physical generic timer"))
GIC = Option("--gic", "gic", dict(
    type=int, choices=[2, 3], help="arm64: GIC version of the QEMU virt machine (default 3)"))
SINK = Option("--sink", "sink", dict(
    choices=["ring", "console"],
    help="how samples come back: ring (guest RAM read by the host, default) or console "
         "(framed lines on the serial console: COM1 on x86, PL011 on arm64)"))
MEMORY = Option("--memory", "memory", dict(
    type=_bounded(0, MAX_MEMORY_MIB, " MiB"), metavar="MIB",
    help="guest memory in MiB (default 64)"))
PROBE = Option("--probe", "probe", dict(type=Path, help="probe image to boot"))
CPUS = Option("--cpus", "cpus", dict(
    type=cpu_list, metavar="LIST",
    help="CPUs to measure, e.g. 0,2-3 (native: host CPUs, default all online; "
         "linux-guest: guest CPUs, default 0)"))
PRIORITY = Option("--priority", "priority", dict(
    type=_bounded(0, 10**6), metavar="N", help="SCHED_FIFO priority 1-99 (default 90)"))
RT_FALLBACK = Option("--rt-fallback", "rt_fallback", dict(
    action="store_const", const=True,
    help="run SCHED_OTHER (recorded) when RT priority cannot be set, instead of failing"))


def check_inject(given: dict[str, Any], period_ns: int) -> tuple[int, int]:
    """(inject_irqoff_ns, inject_every) of the probe's self-check, checked."""
    irqoff, every = given.get("inject_irqoff") or 0, given.get("inject_every") or 0
    if (irqoff > 0) != (every > 0):
        raise TargetUsageError("--inject-irqoff and --inject-every go together, e.g. "
                               "--inject-irqoff 2ms --inject-every 100")
    if irqoff >= period_ns * max(every, 1):
        raise TargetUsageError("--inject-irqoff must be shorter than --inject-every "
                               "periods, or every injected delay would swallow the next "
                               "injection")
    return irqoff, every


def check_rt(given: dict[str, Any]) -> tuple[int, bool]:
    """(priority, rt_fallback) of the native probe, checked."""
    priority = given.get("priority", 90)
    if not 1 <= priority <= 99:
        raise TargetUsageError(f"--priority {priority} must be 1-99 (SCHED_FIFO)")
    return priority, bool(given.get("rt_fallback"))


def check_icount(accel: str, icount: bool) -> None:
    if icount and accel == "kvm":
        raise TargetUsageError("--icount needs TCG: drop --accel kvm or use --accel tcg")


def check_kvm_arch(accel: str, arch: str) -> None:
    """--accel kvm only for a guest of this host's own architecture."""
    if accel == "kvm" and not machine_for(arch).kvm_possible():
        raise TargetUsageError(f"--accel kvm cannot run an {arch} guest on this "
                               f"{platform.machine()} host: use --accel tcg (or auto)")


def arch_plans(accel: str, icount: bool, arch: str) -> list[AccelPlan]:
    """The accelerators to try for an ``arch`` guest: KVM only runs guests of the host's
    architecture (arm64 on x86: straight to TCG)."""
    plans = plans_for(accel, icount)
    if not machine_for(arch).kvm_possible():
        plans = [p for p in plans if p.accel != "kvm"] or plans
    return plans


def linux_guest_arch(given: dict[str, Any]) -> str:
    """``--arch`` of a Linux guest (linux-guest, net; default x86_64); exit 2 on one
    without a Linux guest."""
    arch = given.get("arch") or "x86_64"
    if arch not in LINUX_ARCHES:
        raise TargetUsageError(f"--arch {arch} has no Linux guest: use one of "
                               f"{', '.join(sorted(LINUX_ARCHES))}")
    return arch


def check_probe(probe: Path | None) -> None:
    if probe is not None and not probe.is_file():
        raise TargetUsageError(f"--probe {probe} is not a file: build it with "
                               f"`make -C probes/guest` or give the right path")


def check_machine_values(m: Machine, idle: str, timer: str, what: str) -> None:
    """--idle and --timer values the probe of machine ``m`` has."""
    for opt, val, allowed in (("--idle", idle, m.idles), ("--timer", timer, m.timers)):
        if val not in allowed:
            raise TargetUsageError(f"{opt} {val} does not exist on {what}: use one of "
                                   f"{', '.join(allowed)}")
