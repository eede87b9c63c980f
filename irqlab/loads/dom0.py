"""Loads that run inside a Xen Linux dom0 (``--target xen --xen-dom0 linux``).

Not host processes: dom0 runs them. The Xen target finds these hooks in the run's
configuration (they are :class:`irqlab.runner.xen_dom0.InDom0Load`) and bakes them into
dom0's init; dom0 reports what it did on its console and the hook's metadata is taken
from that report (``XenGuest.dom0_metadata()``). They require the target capability
``xen-dom0`` (``RunHook.requires``): any other target refuses them before anything starts
(exit 2).
"""

from __future__ import annotations

from typing import Any

from irqlab.knobs.values import parse_duration, parse_int, parse_size
from irqlab.loads.base import Load
from irqlab.runner.xen import XenGuest
from irqlab.runner.xen_dom0 import HYPERCALL_KINDS, HYPERCALL_LOOPS, InDom0Load


class Dom0LoadHook(Load, InDom0Load):
    """Base: parameters checked here, the work done by dom0's init."""

    requires = "xen-dom0"

    def configure(self, params: dict[str, str]) -> None:
        if "cpus" in params:
            raise ValueError(f"load {self.kind} runs on dom0's vCPU: cpus= does not apply")
        self.configure_dom0(params)
        self._process: Any = None
        self.details = {}

    def configure_dom0(self, params: dict[str, str]) -> None:
        pass

    def dom0_params(self) -> dict[str, int]:
        """What dom0's init needs (integers: ns, bytes, counts)."""
        return {"delay_ns": self.delay_ns or 0}

    def dom0_load(self) -> tuple[str, str, dict[str, int]]:
        """(kind, hook name, parameters): what the Xen target bakes into dom0."""
        return self.kind, self.name, self.dom0_params()

    # -- RunHook: nothing runs on the host -----------------------------------------------
    def before_start(self) -> None:
        pass

    def after_start(self, ctx: Any) -> None:
        self._process = ctx.process

    def stop(self) -> None:
        meta = (self._process.dom0_metadata() if isinstance(self._process, XenGuest)
                else None)
        if meta is None:
            self.error = "no Linux dom0 ran this load"
            return
        mine = [r for r in meta.get("reports", []) if r.startswith(self.name + " ")]
        self.details["dom0_reports"] = mine
        self.details.update(self.summarise(mine, meta))
        if not mine:
            self.error = "dom0 never started this load (the run ended first?)"

    def summarise(self, mine: list[str], meta: dict[str, Any]) -> dict[str, Any]:
        return {}

    def metadata(self) -> dict[str, Any]:
        out = {"kind": self.kind, "params": self.raw, "where": "xen dom0",
               **self.details}
        if self.error:
            out["error"] = self.error
        return out


class Dom0CpuLoad(Dom0LoadHook):
    kind = "dom0-cpu"
    tool = "sh"
    params = {"workers": "busy shell loops in dom0 (default 1)"}

    def configure_dom0(self, params: dict[str, str]) -> None:
        self.workers = parse_int(params.get("workers", "1"), 1, 64, "workers")

    def dom0_params(self) -> dict[str, int]:
        return {**super().dom0_params(), "workers": self.workers}

    def summarise(self, mine: list[str], meta: dict[str, Any]) -> dict[str, Any]:
        # dom0 sums the CPU time of every load process (1/100 s ticks, from /proc).
        ticks = int(meta.get("loads", {}).get("cpu_ticks", 0) or 0)
        return {"dom0_cpu_s": ticks / 100}


class Dom0ConsoleLoad(Dom0LoadHook):
    kind = "dom0-console"
    tool = "sh"
    params = {"bytes_per_s": "bytes dom0 writes to its console (Xen's) per second "
                             "(default 10000)"}

    def configure_dom0(self, params: dict[str, str]) -> None:
        self.bytes_per_s = parse_int(params.get("bytes_per_s", "10000"), 10, 10_000_000,
                                     "bytes_per_s")

    def dom0_params(self) -> dict[str, int]:
        return {**super().dom0_params(), "bytes_per_s": self.bytes_per_s}

    def summarise(self, mine: list[str], meta: dict[str, Any]) -> dict[str, Any]:
        return {"bytes_written": int(meta.get("loads", {}).get("console_bytes", 0) or 0)}


class HypercallLoad(Dom0LoadHook):
    kind = "hypercall"
    tool = "xl"
    params = {"kind": f"what dom0's toolstack loops on: {', '.join(HYPERCALL_LOOPS)} "
                      f"(default sysctl; irqlab.runner.xen_dom0.HYPERCALL_LOOPS)"}

    def configure_dom0(self, params: dict[str, str]) -> None:
        self.hypercall = params.get("kind", "sysctl")
        if self.hypercall not in HYPERCALL_LOOPS:
            raise ValueError(f"kind={self.hypercall} is not one of "
                             f"{', '.join(HYPERCALL_LOOPS)}")

    def dom0_params(self) -> dict[str, int]:
        return {**super().dom0_params(), "kind": HYPERCALL_KINDS.index(self.hypercall)}

    def summarise(self, mine: list[str], meta: dict[str, Any]) -> dict[str, Any]:
        loops = int(meta.get("loads", {}).get("hypercall_loops", 0) or 0)
        return {"hypercall_kind": self.hypercall, "command": HYPERCALL_LOOPS[self.hypercall],
                "loops": loops}


class DomainCreateLoad(Dom0LoadHook):
    kind = "domain-create"
    tool = "xl"
    params = {"size": "memory of the created domain, e.g. 2G (required)",
              "every": "create it again every DUR (default: once)"}

    def configure_dom0(self, params: dict[str, str]) -> None:
        if "size" not in params:
            raise ValueError("load domain-create needs size=, e.g. domain-create:size=2G")
        self.size = parse_size(params["size"])
        if self.size < 16 << 20:
            raise ValueError("size must be at least 16M")
        self.every_ns = parse_duration(params["every"]) if "every" in params else None

    def dom0_params(self) -> dict[str, int]:
        out = {**super().dom0_params(), "size_bytes": self.size}
        if self.every_ns:
            out["every_ns"] = self.every_ns
        return out

    def summarise(self, mine: list[str], meta: dict[str, Any]) -> dict[str, Any]:
        creates = []
        for rep in mine:
            words = dict(w.split("=", 1) for w in rep.split() if "=" in w)
            if "create_cs" in words:
                creates.append({"n": int(words["n"]), "rc": int(words["rc"]),
                                "create_s": int(words["create_cs"]) / 100,
                                "destroy_s": int(words["destroy_cs"]) / 100,
                                "dom0_uptime_s": int(words["at_cs"]) / 100})
        return {"created": creates, "created_ok": sum(c["rc"] == 0 for c in creates)}
