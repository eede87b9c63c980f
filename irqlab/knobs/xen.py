"""Xen scheduler settings applied through the toolstack in a Linux dom0
(``--target xen --xen-dom0 linux``): RTDS period/budget of the measured domain
(``xl sched-rtds``) and a cpupool holding only it (``xl cpupool-create``).

The Xen target finds these knobs in the run's configuration (duck-typed:
:meth:`XenKnob.dom0_setting`), bakes them into dom0's init or marks them not applicable
with the reason (e.g. the hypervisor lacks the scheduler); the value ``xl`` reports back
is recorded. On other targets they are recorded "not applicable here".
"""

from __future__ import annotations

from typing import Any

from irqlab.knobs.base import Knob
from irqlab.knobs.values import parse_duration
from irqlab.runner.xen import XenGuest
from irqlab.runner.xen_dom0 import InDom0Setting

_NO_DOM0 = "needs a Linux dom0 with xl: --target xen --xen-dom0 linux"


class XenKnob(Knob, InDom0Setting):
    report_key = ""         # dom0's report line that holds the read-back

    def __init__(self, value: str) -> None:
        super().__init__(value)
        self._process: Any = None

    def dom0_setting(self) -> tuple[str, Any]:
        return self.key, self.parsed

    def after_start(self, ctx: Any) -> None:
        self._process = ctx.process
        if not isinstance(ctx.process, XenGuest) or ctx.process.dom0_metadata() is None:
            self.not_applicable(_NO_DOM0)

    def stop(self) -> None:
        if self.status != "requested" or self._process is None:
            return
        meta = self._process.dom0_metadata()
        back = meta.get(self.report_key)
        self.details["xl_reports"] = back
        if back is None:
            self.status = "failed: dom0 did not report it"
        elif str(back).startswith("failed"):
            self.status = f"failed: {back}"
        else:
            self.status = "applied"


class RtdsPeriodKnob(XenKnob):
    key = "rtds_period"
    metavar = "DUR"
    help = "RTDS period of the measured Xen domain (xl sched-rtds -p; Xen default 10ms)"
    report_key = "rtds"

    def parse(self, value: str) -> None:
        self.parsed = parse_duration(value)
        if not 10_000 <= self.parsed <= 10_000_000_000:
            raise ValueError("RTDS period must be 10us..10s")


class RtdsBudgetKnob(RtdsPeriodKnob):
    key = "rtds_budget"
    help = "RTDS budget of the measured Xen domain (xl sched-rtds -b; Xen default 4ms)"


class CpupoolKnob(XenKnob):
    key = "cpupool"
    metavar = "SCHED"
    help = "a Xen cpupool with the last pCPU only, under SCHED, for the measured domain"
    report_key = "cpupool"

    def parse(self, value: str) -> None:
        if value not in ("credit", "credit2", "rtds", "null"):
            raise ValueError("cpupool takes a scheduler: credit, credit2, rtds or null")
        self.parsed = value
