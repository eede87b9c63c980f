"""vCPU thread placement and priority, and the vCPU count.

QEMU runs with ``-name irqlab-<run>,debug-threads=on``, which names each vCPU thread
``CPU <n>/KVM`` or ``CPU <n>/TCG`` (``ALL CPUs/TCG`` when TCG runs all vCPUs in one thread,
as with -icount). The knobs act on those threads once the probe runs; the first window
therefore still holds a few unpinned periods (the --warmup window).
"""

from __future__ import annotations

import os
import re
from typing import Any

from irqlab.cpus import format_cpu_list, online_cpus, parse_available_cpus
from irqlab.knobs.base import Knob
from irqlab.journal import journal, proc_starttime, undo_kind
from irqlab.knobs.values import parse_int

_VCPU_RE = re.compile(r"^(?:CPU (\d+)|ALL CPUs)/(KVM|TCG|HVF|WHPX)$")


def vcpu_threads(pid: int) -> list[tuple[int, str]]:
    """(tid, thread name) of a QEMU process's vCPU threads, in vCPU order."""
    found = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        m = _VCPU_RE.match(comm)
        if m:
            found.append((int(m.group(1) or 0), int(tid), comm))
    return [(tid, comm) for _idx, tid, comm in sorted(found)]


class _ThreadKnob(Knob):
    """Changes vCPU threads; journals each thread's old policy/affinity and restores it."""

    def __init__(self, value: str) -> None:
        super().__init__(value)
        self._changed: list[tuple[int, int, int, dict[str, Any]]] = []  # pid, tid, entry, old

    def after_start(self, ctx: Any) -> None:
        proc = ctx.process.proc
        if proc is None:
            self.not_applicable(f"target {type(ctx.process).__name__} has no process")
            return
        threads = vcpu_threads(proc.pid)
        if not threads:
            self.not_applicable("no vCPU thread found (QEMU without debug-threads=on?)")
            return
        done = []
        for index, (tid, comm) in enumerate(threads):
            old = {"policy": os.sched_getscheduler(tid),
                   "priority": os.sched_getparam(tid).sched_priority,
                   "affinity": sorted(os.sched_getaffinity(tid))}
            entry = journal().add("sched", pid=proc.pid, tid=tid,
                                  starttime=proc_starttime(proc.pid, tid), **old)
            try:
                done.append(self.apply(tid, comm, index))
            except OSError as exc:
                journal().done(entry)
                self.status = f"failed: {comm}: {exc.strerror}"
                if exc.errno == 1:  # EPERM: the host does not let us
                    self.not_applicable(f"{exc.strerror} changing {comm} (needs "
                                        f"CAP_SYS_NICE / root)")
                return
            self._changed.append((proc.pid, tid, entry, old))
        self.status = "applied"
        self.details["threads"] = done

    def apply(self, tid: int, comm: str, index: int) -> dict[str, Any]:
        raise NotImplementedError

    def stop(self) -> None:
        restored = True
        for pid, tid, entry, old in reversed(self._changed):
            if proc_starttime(pid, tid) is not None:
                try:
                    os.sched_setscheduler(tid, old["policy"], os.sched_param(old["priority"]))
                    os.sched_setaffinity(tid, old["affinity"])
                except OSError:
                    restored = proc_starttime(pid, tid) is None  # died meanwhile: fine
            journal().done(entry)
        if self._changed:
            self.details["restored"] = restored
        self._changed.clear()


class PinKnob(_ThreadKnob):
    key = "pin"
    metavar = "CPUS"
    help = "pin vCPU threads to host CPUS (vCPU i -> i-th CPU of the list, round robin)"

    def parse(self, value: str) -> None:
        self.cpus = parse_available_cpus(value)

    def apply(self, tid: int, comm: str, index: int) -> dict[str, Any]:
        cpu = self.cpus[index % len(self.cpus)]
        os.sched_setaffinity(tid, {cpu})
        return {"thread": comm, "tid": tid, "cpu": cpu}


class PrioKnob(_ThreadKnob):
    key = "prio"
    metavar = "N"
    help = "give vCPU threads SCHED_FIFO priority N (1-99)"

    def parse(self, value: str) -> None:
        self.prio = parse_int(value, 1, 99, "SCHED_FIFO priority")

    def apply(self, tid: int, comm: str, index: int) -> dict[str, Any]:
        os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(self.prio))
        return {"thread": comm, "tid": tid, "policy": "SCHED_FIFO", "priority": self.prio}


class VcpusKnob(Knob):
    key = "vcpus"
    metavar = "N"
    help = "number of vCPUs (-smp N); the probe measures on vCPU 0, the others stay parked"

    def parse(self, value: str) -> None:
        self.count = parse_int(value, 1, 64, "vCPU count")

    def qemu_args(self) -> list[str]:
        return ["-smp", str(self.count)] if self.count > 1 else []

    def after_start(self, ctx: Any) -> None:
        self.status = "applied"
        if self.count > 1:
            # Why not "more load": the probe never starts the APs, so they sit in
            # wait-for-SIPI; the knob shows what extra vCPU threads alone cost.
            self.details["note"] = (f"-smp {self.count}: the probe runs on vCPU 0 only; "
                                    f"vCPUs 1..{self.count - 1} stay parked in wait-for-SIPI")
        self.details["host_cpus"] = format_cpu_list(online_cpus())


@undo_kind("sched")
def undo_sched(entry: dict[str, Any]) -> str:
    """The journal's undo of op ``sched``: policy, priority and affinity, if the thread is
    still the same one (its start time matches)."""
    pid, tid = int(entry["pid"]), int(entry["tid"])
    if proc_starttime(pid, tid) != entry.get("starttime"):
        return f"thread {tid} already gone"
    os.sched_setscheduler(tid, entry["policy"], os.sched_param(entry["priority"]))
    os.sched_setaffinity(tid, entry["affinity"])
    return f"restored scheduling of thread {tid}"
