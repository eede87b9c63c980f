"""The targets irqlab measures, one module each, behind one interface (base.Target).

Adding a target: write irqlab/targets/<name>.py with a Target subclass, then add one line
to TARGETS below. Nothing else in the run flow, the CLI or the suites names a target.
"""

from __future__ import annotations

from irqlab.targets.base import Option, Target, TargetOptions, TargetUsageError
from irqlab.targets.guest import GuestTarget
from irqlab.targets.kvm_arm64 import KvmArm64Target
from irqlab.targets.labgrid import LabgridTarget
from irqlab.targets.linux_guest import LinuxGuestTarget
from irqlab.targets.native import NativeTarget
from irqlab.targets.net import NetTarget
from irqlab.targets.noise import NoiseTarget
from irqlab.targets.serial import SerialTarget
from irqlab.targets.xen import XenTarget

# The registry: name -> target, in the order `--help` lists them.
TARGETS: dict[str, Target] = {t.name: t for t in (
    GuestTarget(),
    NativeTarget(),
    LinuxGuestTarget(),
    XenTarget(),
    SerialTarget(),
    LabgridTarget(),
    NetTarget(),
    KvmArm64Target(),
    NoiseTarget(),
)}

# What gives a capability a hook may require (RunHook.requires), for the error a user
# gets when the chosen target lacks it.
CAPABILITIES: dict[str, str] = {"xen-dom0": "--target xen --xen-dom0 linux",
                                 "guest-net": "--target net --net tap",
                                 "guest-disk": "--target net",
                                 "guest-hog": "--target linux-guest",
                                 "kvm-host-hog": "--target kvm-arm64"}

# Built-in suites: name -> targets in the order they run.
SUITES: dict[str, tuple[str, ...]] = {"all": ("native", "guest", "linux-guest")}

__all__ = ["CAPABILITIES", "Option", "SUITES", "TARGETS", "Target", "TargetOptions", "TargetUsageError",
           "get_target", "parse_targets", "all_options"]


def get_target(name: str) -> Target:
    """The registered target ``name``; KeyError names the choices."""
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown target {name!r}: choose from {', '.join(TARGETS)}") from None


def parse_targets(text: str) -> list[str]:
    """"native,guest" or a suite name -> targets; ValueError naming the choices."""
    if text in SUITES:
        return list(SUITES[text])
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in names if t not in TARGETS]
    if not names or bad:
        raise ValueError(f"unknown target {', '.join(bad) or repr(text)}: choose from "
                         f"{', '.join(TARGETS)}, a comma list of them, or a suite "
                         f"({', '.join(SUITES)})")
    if len(set(names)) != len(names):
        raise ValueError(f"--target {text} names a target twice")
    return names


def all_options() -> dict[str, tuple[Option, list[str]]]:
    """Every target option once: dest -> (option, names of the targets that take it)."""
    out: dict[str, tuple[Option, list[str]]] = {}
    for target in TARGETS.values():
        for opt in target.options:
            if opt.dest in out:
                if out[opt.dest][0] is not opt:
                    raise RuntimeError(f"two targets define {opt.flag} differently: share "
                                       f"one Option (irqlab.targets.options)")
                out[opt.dest][1].append(target.name)
            else:
                out[opt.dest] = (opt, [target.name])
    return out
