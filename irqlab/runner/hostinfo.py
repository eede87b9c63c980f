"""Facts about the host recorded with every run (what a reader needs to trust a number)."""

from __future__ import annotations

import glob
import os
import platform
import re
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


# What a fact is when its source does not exist on this host (docs/formats.md, provenance):
# never a guess from another source.
UNKNOWN = "unknown"

_CPU = "/sys/devices/system/cpu"


def _fact(path: str) -> str:
    """A sysfs/procfs file's text, or UNKNOWN when it does not exist or cannot be read."""
    value = _read(path)
    return UNKNOWN if value is None else value


def _per_cpu(name: str) -> str:
    """A per-CPU sysfs value (cpufreq governor...): one value when every CPU has the same,
    else cpuN=value pairs; UNKNOWN when no CPU has the file."""
    values = {}
    for path in sorted(glob.glob(f"{_CPU}/cpu[0-9]*/{name}"),
                       key=lambda p: int(re.search(r"cpu(\d+)/", p).group(1))):
        value = _read(path)
        if value is not None:
            values[re.search(r"/(cpu\d+)/", path).group(1)] = value
    if not values:
        return UNKNOWN
    if len(set(values.values())) == 1:
        return next(iter(values.values()))
    return ",".join(f"{cpu}={v}" for cpu, v in values.items())


def _cstates() -> str:
    """cpu0's idle states as the cpuidle driver lists them, a disabled one marked."""
    states = []
    for path in sorted(glob.glob(f"{_CPU}/cpu0/cpuidle/state[0-9]*"),
                       key=lambda p: int(p.rsplit("state", 1)[1])):
        name = _read(f"{path}/name") or "?"
        states.append(name + (" (disabled)" if _read(f"{path}/disable") == "1" else ""))
    return ",".join(states) if states else UNKNOWN


def _bracketed(path: str) -> str:
    """The selected word of a sysfs choice file ('always [madvise] never' -> madvise)."""
    text = _read(path)
    if text is None:
        return UNKNOWN
    chosen = re.search(r"\[([^\]]+)\]", text)
    return chosen.group(1) if chosen else text


def _microcode() -> str:
    value = _read(f"{_CPU}/cpu0/microcode/version")
    if value is not None:
        return value
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("microcode"):
            return line.split(":", 1)[1].strip()
    return UNKNOWN


def _nohz_full() -> str:
    value = _read(f"{_CPU}/nohz_full")
    # The file exists only with CONFIG_NO_HZ_FULL; "(null)" there means no CPU is nohz_full.
    return UNKNOWN if value is None else ("" if value == "(null)" else value)


def _smt() -> str:
    control, active = _read(f"{_CPU}/smt/control"), _read(f"{_CPU}/smt/active")
    if control is None and active is None:
        return UNKNOWN
    return f"{control or UNKNOWN} (active {active or UNKNOWN})"


def preempt_model() -> str:
    """The preemption model: the debugfs switch of a PREEMPT_DYNAMIC kernel (the mode in
    parentheses is the one in force), /sys/kernel/realtime of an RT kernel, else the tag
    the kernel build puts in `uname -v` (scripts/mkcompile_h: PREEMPT_RT, PREEMPT_DYNAMIC,
    PREEMPT). A kernel without a tag is none or voluntary: /boot/config says which."""
    dynamic = _read("/sys/kernel/debug/sched/preempt")
    if dynamic:
        mode = re.search(r"\((\w+)\)", dynamic)
        return f"dynamic ({mode.group(1)})" if mode else f"dynamic ({dynamic})"
    if _read("/sys/kernel/realtime") == "1":
        return "rt"
    version = platform.uname().version.split()
    if "PREEMPT_RT" in version:
        return "rt"
    if "PREEMPT_DYNAMIC" in version:
        return "dynamic (mode unknown: /sys/kernel/debug/sched/preempt not readable)"
    if "PREEMPT" in version:
        return "full"
    config = _read(f"/boot/config-{platform.uname().release}") or ""
    for option, model in (("CONFIG_PREEMPT_NONE=y", "none"),
                          ("CONFIG_PREEMPT_VOLUNTARY=y", "voluntary")):
        if option in config:
            return model
    return UNKNOWN


def _irqbalance() -> str:
    """'running' when a process named irqbalance is alive (/proc/PID/comm), else
    'not running'; UNKNOWN when /proc cannot be listed."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return UNKNOWN
    return "running" if any(_read(f"/proc/{p}/comm") == "irqbalance" for p in pids) \
        else "not running"


def _memory_kib() -> int | str:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return UNKNOWN


def _numa_nodes() -> int | str:
    nodes = glob.glob("/sys/devices/system/node/node[0-9]*")
    return len(nodes) if nodes else UNKNOWN


def tuning_facts() -> dict[str, Any]:
    """What rteval records about a host's latency tuning, each from its own sysfs/procfs
    file; UNKNOWN where the host has no such file (docs/formats.md, provenance)."""
    return {
        "clocksource": _fact("/sys/devices/system/clocksource/clocksource0/"
                             "current_clocksource"),
        "cpufreq_governor": _per_cpu("cpufreq/scaling_governor"),
        "cpuidle_driver": _fact(f"{_CPU}/cpuidle/current_driver"),
        "cpuidle_governor": _fact(f"{_CPU}/cpuidle/current_governor_ro"),
        "cstates": _cstates(),
        "isolcpus": _fact(f"{_CPU}/isolated"),
        "nohz_full": _nohz_full(),
        "smt": _smt(),
        "microcode": _microcode(),
        "thp": _bracketed("/sys/kernel/mm/transparent_hugepage/enabled"),
        "irqbalance": _irqbalance(),
        "preempt_model": preempt_model(),
        "memory_kib": _memory_kib(),
        "numa_nodes": _numa_nodes(),
    }


def host_info() -> dict[str, Any]:
    """Kernel, command line, CPU and virtualisation facts of this host, and its latency
    tuning (tuning_facts)."""
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
        **tuning_facts(),
    }
