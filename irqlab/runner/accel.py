"""Accelerator facts: what KVM on this host really is.

/dev/kvm existing proves little: here it can be a software backend (kvm_pvm) that runs
guest ring-0 code through KVM's instruction emulator. We call KVM "hardware" only when the
CPU advertises VMX or SVM and no software backend module is loaded, and the runner still
*tries* a boot before trusting it (see irqlab.measure).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from irqlab.runner.hostinfo import cpu_flags

ACCEL_CHOICES = ("auto", "kvm", "tcg")


@dataclass(frozen=True)
class AccelPlan:
    """One accelerator to try and how to describe it."""

    accel: str          # "kvm" or "tcg"
    label: str          # as recorded: "kvm", "kvm (software backend)", "tcg", "tcg+icount"
    emulated: bool      # figures not representative of hardware


def kvm_usable() -> str | None:
    """None when /dev/kvm can be opened read-write, else the reason it cannot."""
    if not os.path.exists("/dev/kvm"):
        return "/dev/kvm does not exist (no KVM module loaded, or not exposed to this host)"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "/dev/kvm is not readable and writable by this user (add it to group kvm)"
    return None


def kvm_is_software() -> bool:
    """True when KVM here emulates instead of using VMX/SVM."""
    flags = cpu_flags()
    return os.path.isdir("/sys/module/kvm_pvm") or not (flags & {"vmx", "svm"})


def kvm_plan() -> AccelPlan:
    if kvm_is_software():
        return AccelPlan("kvm", "kvm (software backend)", True)
    return AccelPlan("kvm", "kvm", False)


def plans_for(choice: str, icount: bool) -> list[AccelPlan]:
    """The accelerators to try, in order, for ``--accel`` and ``--icount``."""
    tcg = AccelPlan("tcg", "tcg+icount" if icount else "tcg", True)
    if icount or choice == "tcg":
        return [tcg]
    if choice == "kvm":
        return [kvm_plan()]
    if kvm_usable() is None:
        return [kvm_plan(), tcg]
    return [tcg]
