"""``--housekeeping CPUS``: what is not measured runs on CPUS — irqlab's own threads
(the sample reader, the store's writers, a trace capture's reader) and, for a VMM with
named vCPU threads, its other threads (QEMU's main loop, I/O and RCU threads) — as rtla's
``--house-keeping`` keeps its own work off the measured CPUs.

Applied once the probe runs, so the probe and the VMM start with the affinity they were
given (the native probe pins its own threads; vCPU threads keep theirs or the ``pin``
knob's). Threads irqlab starts later inherit the housekeeping CPUs; loads set their own
``cpus=``. irqlab's own affinity is restored at stop (a process's own setting dies with
it: nothing to journal); the VMM's threads end with the VMM.
"""

from __future__ import annotations

import os
from typing import Any

from irqlab.cpus import format_cpu_list, parse_available_cpus
from irqlab.knobs.base import Knob
from irqlab.knobs.vcpu import vcpu_threads


def _tasks(pid: int | str) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


class HousekeepingKnob(Knob):
    key = "housekeeping"
    metavar = "CPUS"
    help = ("irqlab's own threads and the VMM's non-vCPU threads (QEMU's main loop) on "
            "CPUS, e.g. 0 (restored after the run)")

    def parse(self, value: str) -> None:
        self.cpus = set(parse_available_cpus(value))

    def after_start(self, ctx: Any) -> None:
        self._own: dict[int, set[int]] = {}
        for tid in _tasks("self"):
            try:
                self._own[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, self.cpus)
            except OSError:
                continue               # a thread that ended meanwhile
        moved = []
        proc = getattr(ctx.process, "proc", None)
        vcpus = {tid for tid, _comm in vcpu_threads(proc.pid)} if proc is not None else set()
        if vcpus:
            for tid in _tasks(proc.pid):
                if tid in vcpus:
                    continue
                try:
                    os.sched_setaffinity(tid, self.cpus)
                    moved.append(tid)
                except OSError:
                    continue
        self.status = "applied"
        self.details.update({"cpus": format_cpu_list(sorted(self.cpus)),
                             "irqlab_threads": len(self._own), "vmm_threads": moved})

    def stop(self) -> None:
        for tid, old in getattr(self, "_own", {}).items():
            try:
                os.sched_setaffinity(tid, old)
            except OSError:
                continue
        self._own = {}
