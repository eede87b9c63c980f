"""Facts about the host recorded with every run (what a reader needs to trust a number)."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from functools import lru_cache
from typing import Any


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The first CPU's flags from /proc/cpuinfo."""
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_model() -> str | None:
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


def qemu_version(binary: str) -> str | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             timeout=10, check=False).stdout
    except OSError:
        return None
    return out.splitlines()[0].strip() if out else None


def host_info() -> dict[str, Any]:
    """Kernel, command line, CPU and virtualisation facts of this host."""
    uname = platform.uname()
    flags = cpu_flags()
    return {
        "hostname": socket.gethostname(),
        "kernel": uname.release,
        "kernel_version": uname.version,
        "machine": uname.machine,
        "kernel_cmdline": _read("/proc/cmdline"),
        "cpu_model": cpu_model(),
        "cpus_online": os.cpu_count(),
        "host_is_virtual": "hypervisor" in flags,
        "hw_virt": sorted(flags & {"vmx", "svm"}),
        "kvm_modules": sorted(m for m in ("kvm_intel", "kvm_amd", "kvm_pvm")
                              if os.path.isdir(f"/sys/module/{m}")),
        "kvm_halt_poll_ns": _read("/sys/module/kvm/parameters/halt_poll_ns"),
    }
