"""Interference loads started with a run and stopped with it (docs/design.md, "Loads,
knobs, matrices"). A spec is ``KIND[:KEY=V,...]``, e.g. ``cpu:cpus=1,workers=1``."""

from __future__ import annotations

from irqlab.loads.base import Load, LoadError, group_cpu_seconds, group_members, parse_params
from irqlab.loads.cache import CacheLoad
from irqlab.loads.console import ConsoleLoad
from irqlab.loads.cpu import CpuLoad
from irqlab.loads.dom0 import Dom0ConsoleLoad, Dom0CpuLoad, DomainCreateLoad, HypercallLoad
from irqlab.loads.guest_disk import GuestDiskLoad
from irqlab.loads.guest_hog import GuestHogLoad
from irqlab.loads.hackbench import HackbenchLoad
from irqlab.loads.io import IoLoad
from irqlab.loads.kvm_host_hog import KvmHostHogLoad
from irqlab.loads.memory import MemoryLoad
from irqlab.loads.neighbour import NeighbourLoad
from irqlab.loads.net_flood import NetFloodLoad
from irqlab.loads.netns_flood import NetnsFloodLoad

LOADS: dict[str, type[Load]] = {c.kind: c for c in (
    CpuLoad, HackbenchLoad, IoLoad, CacheLoad, MemoryLoad, ConsoleLoad, NeighbourLoad,
    Dom0CpuLoad, Dom0ConsoleLoad, DomainCreateLoad, HypercallLoad, NetFloodLoad,
    GuestDiskLoad, NetnsFloodLoad, GuestHogLoad, KvmHostHogLoad)}


def parse_load(spec: str, index: int = 1) -> Load | None:
    """A load from its spec; None for ``none`` (the unloaded baseline)."""
    kind, _, rest = spec.strip().partition(":")
    kind = kind.strip()
    if kind == "none" and not rest:
        return None
    cls = LOADS.get(kind)
    if cls is None:
        raise ValueError(f"unknown load {kind!r}; loads: none, {', '.join(LOADS)}")
    try:
        return cls(parse_params(rest), index)
    except ValueError as exc:
        msg = str(exc)
        raise ValueError(msg if msg.startswith(f"load {kind}") else f"load {kind}: {msg}") \
            from None


def parse_loads(specs: list[str]) -> list[Load]:
    """Several specs (repeated --load); one kind twice gets #2, #3 in its name."""
    out: list[Load] = []
    seen: dict[str, int] = {}
    for spec in specs:
        kind = spec.strip().partition(":")[0].strip()
        seen[kind] = seen.get(kind, 0) + 1
        load = parse_load(spec, seen[kind])
        if load is not None:
            out.append(load)
    return out


__all__ = ["LOADS", "Load", "LoadError", "group_cpu_seconds", "group_members",
           "parse_load", "parse_loads"]
