"""CPU lists: the one syntax for every layer (``--cpus``, ``pin=``, a load's ``cpus=``).

A list is comma-separated CPU numbers and ranges, "0,2-3", the syntax of Linux's
/sys/devices/system/cpu/online and of irqlab-native's ``--cpus`` (probes/native/native.c).
Order is kept: irqlab-native writes ring i for the i-th CPU given, and the ``pin`` knob
puts vCPU i on the i-th CPU. A CPU named twice is an error, not silently merged: it
would make a second ring for the same CPU.
"""

from __future__ import annotations

import os
import re
from typing import Iterable

# Linux's largest NR_CPUS; it also bounds what a typo like "0-99999999" may allocate.
MAX_CPUS = 8192

# Compiled at its first use (re's cache), not at import: every command's start imports
# this module (issue 28).
_PART_RE = r"^\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?$"


def parse_cpu_list(text: str) -> list[int]:
    """"0,2-3" -> [0, 2, 3], in the order written. Raises ValueError on an empty list,
    garbage, a backwards range ("3-1") or a CPU named twice."""
    out: list[int] = []
    seen: set[int] = set()
    for part in text.split(","):
        m = re.match(_PART_RE, part)
        if not m:
            raise ValueError(f"{text!r} is not a CPU list: write CPU numbers and ranges "
                             f"separated by commas, e.g. 0,2-3")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        if last < first:
            raise ValueError(f"{text!r}: the range {part.strip()} goes backwards "
                             f"(write {last}-{first})")
        if last >= MAX_CPUS:
            raise ValueError(f"{text!r}: CPU {last} is beyond the largest possible "
                             f"CPU number ({MAX_CPUS - 1})")
        for cpu in range(first, last + 1):
            if cpu in seen:
                raise ValueError(f"{text!r} names CPU {cpu} twice")
            seen.add(cpu)
            out.append(cpu)
    return out


def format_cpu_list(cpus: Iterable[int]) -> str:
    """[0, 2, 3] -> "0,2-3": the inverse of parse_cpu_list (order kept; only ascending
    runs of consecutive CPUs become ranges)."""
    parts: list[str] = []
    run: list[int] = []
    for cpu in cpus:
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            parts.append(_run_text(run))
        run = [cpu]
    if run:
        parts.append(_run_text(run))
    return ",".join(parts)


def _run_text(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def online_cpus() -> list[int]:
    """CPUs this process may run on: the online ones in its affinity mask (a cgroup or
    taskset may narrow it), ascending."""
    return sorted(os.sched_getaffinity(0))


def parse_available_cpus(text: str) -> list[int]:
    """parse_cpu_list, and every CPU must be one this process may run on (host-side
    placement: loads, vCPU pinning). ValueError naming the CPUs that are not."""
    cpus = parse_cpu_list(text)
    allowed = online_cpus()
    allowed_set = set(allowed)
    missing = [c for c in cpus if c not in allowed_set]
    if missing:
        raise ValueError(f"CPU(s) {format_cpu_list(missing)} not available here; this "
                         f"host lets irqlab run on CPUs {format_cpu_list(allowed)}")
    return cpus
