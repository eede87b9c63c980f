"""Scheduler timelines from xentrace records: per vCPU, per physical CPU.

What the explain step needs to attribute a late tick in a domU: when was the probe's vCPU
*runnable but not running*, and who ran on its physical CPU meanwhile (the neighbour,
dom0, Xen's idle vCPU)? Built from (``xen/common/sched/core.c``, Xen 4.17):

* ``TRC_SCHED_RUNSTATE_CHANGE``: extra word 0 = vcpu:16 | domain:16, the old and new
  runstate in bits 8-9 and 4-5 of the event id (``trace_runstate_change``);
* ``TRC_SCHED_SWITCH``: prev domain, prev unit, next domain, next unit (``schedule``);
* ``TRC_SCHED_WAKE`` / ``TRC_SCHED_BLOCK``: domain, vcpu.

Times stay in cycles (the records' ``get_cycles()``); ``to_ns`` converts with the rate
the caller knows (x86: the TSC rate Xen printed; Arm: CNTFRQ, 62.5 MHz on QEMU virt).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from irqlab.xen.records import (DOMID_IDLE, TRC_LOST_RECORDS, TRC_SCHED_BLOCK,
                                TRC_SCHED_SWITCH, TRC_SCHED_WAKE, TRC_TRACE_CPU_CHANGE,
                                TraceRecord, is_runstate_change, iter_records,
                                runstate_transition)

Vcpu = tuple[int, int]      # (domain id, vcpu id)


def vcpu_name(v: Vcpu) -> str:
    dom = "idle" if v[0] == DOMID_IDLE else f"d{v[0]}"
    return f"{dom}v{v[1]}"


@dataclass(frozen=True)
class Interval:
    """A vCPU in one runstate from ``start`` to ``end`` (cycles), seen on ``cpu``."""

    vcpu: Vcpu
    state: str
    start: int
    end: int
    cpu: int


@dataclass(frozen=True)
class Switch:
    """A context switch on physical CPU ``cpu`` at ``tsc``: ``prev`` -> ``next``."""

    cpu: int
    tsc: int
    prev: Vcpu
    next: Vcpu


@dataclass
class Timeline:
    intervals: dict[Vcpu, list[Interval]] = field(default_factory=lambda: defaultdict(list))
    switches: list[Switch] = field(default_factory=list)
    wakes: list[tuple[int, Vcpu]] = field(default_factory=list)
    blocks: list[tuple[int, Vcpu]] = field(default_factory=list)
    events: Counter = field(default_factory=Counter)
    lost_records: int = 0
    cpus: set[int] = field(default_factory=set)
    first_tsc: int | None = None
    last_tsc: int | None = None

    # -- queries ---------------------------------------------------------------------

    def time_in_state(self, vcpu: Vcpu) -> dict[str, int]:
        out: Counter = Counter()
        for iv in self.intervals.get(vcpu, []):
            out[iv.state] += iv.end - iv.start
        return dict(out)

    def running_on(self, cpu: int, start: int, end: int) -> dict[Vcpu, int]:
        """Cycles each vCPU ran on physical CPU ``cpu`` within [start, end)."""
        out: Counter = Counter()
        for vcpu, ivs in self.intervals.items():
            for iv in ivs:
                if iv.state == "running" and iv.cpu == cpu:
                    lo, hi = max(start, iv.start), min(end, iv.end)
                    if hi > lo:
                        out[vcpu] += hi - lo
        return dict(out)

    def waits(self, vcpu: Vcpu) -> list[dict[str, Any]]:
        """Each runnable-but-not-running stretch of ``vcpu`` and who ran instead."""
        out = []
        for iv in self.intervals.get(vcpu, []):
            if iv.state != "runnable":
                continue
            others = self.running_on(iv.cpu, iv.start, iv.end)
            out.append({"start": iv.start, "cycles": iv.end - iv.start, "cpu": iv.cpu,
                        "ran_instead": {vcpu_name(v): c for v, c in
                                        sorted(others.items(), key=lambda kv: -kv[1])}})
        return out

    def summary(self, hz: int | None = None) -> dict[str, Any]:
        """Per vCPU: time in each runstate, switches in/out, worst wait; JSON-ready."""
        def t(c: int) -> float | int:
            return round(c * 1e9 / hz) if hz else c
        switched_in: Counter = Counter(s.next for s in self.switches)
        vcpus = {}
        for vcpu in sorted(self.intervals):
            waits = self.waits(vcpu)
            worst = max(waits, key=lambda w: w["cycles"]) if waits else None
            vcpus[vcpu_name(vcpu)] = {
                "time": {k: t(v) for k, v in self.time_in_state(vcpu).items()},
                "switched_in": switched_in[vcpu],
                "waits": len(waits),
                "worst_wait": None if worst is None else {
                    "at": t(worst["start"] - (self.first_tsc or 0)),
                    "length": t(worst["cycles"]), "cpu": worst["cpu"],
                    "ran_instead": {k: t(v) for k, v in worst["ran_instead"].items()}},
            }
        return {"unit": "ns" if hz else "cycles", "cpus": sorted(self.cpus),
                "span": t((self.last_tsc or 0) - (self.first_tsc or 0)),
                "lost_records": self.lost_records, "switches": len(self.switches),
                "events": {f"{k:#x}": v for k, v in sorted(self.events.items())},
                "vcpus": vcpus}


def build_timeline(records: Iterable[TraceRecord]) -> Timeline:
    """Fold records (any CPU order within a file) into a Timeline."""
    tl = Timeline()
    # vCPU -> (state, since, cpu) while open; closed into intervals at the next change.
    open_state: dict[Vcpu, tuple[str, int, int]] = {}
    ordered = sorted((r for r in records if r.tsc is not None or
                      r.event == TRC_TRACE_CPU_CHANGE),
                     key=lambda r: (r.tsc if r.tsc is not None else -1, r.offset))
    for rec in ordered:
        if rec.event == TRC_TRACE_CPU_CHANGE:
            continue
        tl.cpus.add(rec.cpu)
        tl.events[rec.event] += 1
        tsc = rec.tsc
        tl.first_tsc = tsc if tl.first_tsc is None else min(tl.first_tsc, tsc)
        tl.last_tsc = tsc if tl.last_tsc is None else max(tl.last_tsc, tsc)
        if rec.event == TRC_LOST_RECORDS and rec.extra:
            tl.lost_records += rec.extra[0]
        elif is_runstate_change(rec.event) and rec.extra:
            vcpu = (rec.extra[0] >> 16, rec.extra[0] & 0xFFFF)
            old, new = runstate_transition(rec.event)
            prev = open_state.get(vcpu)
            if prev is not None:
                tl.intervals[vcpu].append(Interval(vcpu, prev[0], prev[1], tsc, prev[2]))
            elif tl.first_tsc is not None and tsc > tl.first_tsc:
                # The state before the first change is known from the record itself.
                tl.intervals[vcpu].append(Interval(vcpu, old, tl.first_tsc, tsc, rec.cpu))
            open_state[vcpu] = (new, tsc, rec.cpu)
        elif rec.event == TRC_SCHED_SWITCH and len(rec.extra) >= 4:
            tl.switches.append(Switch(rec.cpu, tsc, (rec.extra[0], rec.extra[1]),
                                      (rec.extra[2], rec.extra[3])))
        elif rec.event in (TRC_SCHED_WAKE, TRC_SCHED_BLOCK) and len(rec.extra) >= 2:
            (tl.wakes if rec.event == TRC_SCHED_WAKE else tl.blocks).append(
                (tsc, (rec.extra[0], rec.extra[1])))
    for vcpu, (state, since, cpu) in open_state.items():
        if tl.last_tsc is not None and tl.last_tsc > since:
            tl.intervals[vcpu].append(Interval(vcpu, state, since, tl.last_tsc, cpu))
    return tl


def load(path: str | Path) -> Timeline:
    return build_timeline(iter_records(Path(path).read_bytes()))


def xenalyze_summary(path: str | Path, cpu_hz: int | None = None,
                     timeout_s: float = 120.0) -> str | None:
    """``xenalyze --summary`` of a capture when the tool is found (irqlab.xen.xenalyze),
    to keep beside our own summary; None when it is not available."""
    from irqlab.xen.xenalyze import find_xenalyze

    tool = find_xenalyze()
    if tool is None:
        return None
    proc = tool.summary(Path(path), cpu_hz, timeout_s=timeout_s)
    return proc.stdout if proc.returncode == 0 else proc.stdout + proc.stderr


def _main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m irqlab.xen.timeline",
                                 description="Per-vCPU scheduler timeline of a xentrace "
                                             "capture (xentrace -D -e 0x0002f000 FILE).")
    ap.add_argument("trace", type=Path)
    ap.add_argument("--hz", type=int, default=None,
                    help="cycle counter rate (x86: TSC Hz; QEMU arm64: 62500000)")
    ap.add_argument("--xenalyze", action="store_true",
                    help="also print xenalyze --summary when installed")
    args = ap.parse_args(argv)
    print(json.dumps(load(args.trace).summary(args.hz), indent=1))
    if args.xenalyze:
        print(xenalyze_summary(args.trace, args.hz) or "xenalyze: not installed")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
