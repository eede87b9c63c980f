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
from irqlab.knobs.values import parse_duration_in, parse_int
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
    what = "RTDS period"

    def parse(self, value: str) -> None:
        # ns here; dom0's init writes xl's µs. Xen refuses periods and budgets under
        # 10 us (RTDS_MIN_PERIOD/RTDS_MIN_BUDGET, xen/common/sched/rt.c).
        self.parsed = parse_duration_in(value, 10_000, 10_000_000_000, self.what, 1000)
        self.parsed *= 1000


class RtdsBudgetKnob(RtdsPeriodKnob):
    key = "rtds_budget"
    help = "RTDS budget of the measured Xen domain (xl sched-rtds -b; Xen default 4ms)"
    what = "RTDS budget"


class CpupoolKnob(XenKnob):
    key = "cpupool"
    metavar = "SCHED"
    help = "a Xen cpupool with the last pCPU only, under SCHED, for the measured domain"
    report_key = "cpupool"

    def parse(self, value: str) -> None:
        if value not in ("credit", "credit2", "rtds", "null"):
            raise ValueError("cpupool takes a scheduler: credit, credit2, rtds or null")
        self.parsed = value


class XenSchedKnob(XenKnob):
    """A credit/credit2 parameter set with xl once the domU exists (XL_SCHED_SETTINGS);
    ``parsed`` is the value in xl's own unit: an integer within ``bounds``, or, when
    ``unit_ns`` is set, a duration within ``bounds`` (ns) written in that unit."""
    bounds: tuple[int, int] = (0, 0)
    unit_ns: int | None = None

    def __init__(self, value: str) -> None:
        super().__init__(value)
        self.report_key = self.key

    def parse(self, value: str) -> None:
        lo, hi = self.bounds
        if self.unit_ns is None:
            self.parsed = parse_int(value, lo, hi, self.key)
        else:
            self.parsed = parse_duration_in(value, lo, hi, self.key, self.unit_ns)


class Credit2WeightKnob(XenSchedKnob):
    key = "credit2_weight"
    metavar = "N"
    help = "credit2 weight of the measured Xen domain (xl sched-credit2 -w; default 256)"
    bounds = (1, 65535)


class Credit2CapKnob(XenSchedKnob):
    key = "credit2_cap"
    metavar = "PCT"
    help = "credit2 cap of the measured Xen domain, in %% of one pCPU (xl sched-credit2 -c; 0: none)"
    bounds = (0, 6400)


class Credit2RatelimitKnob(XenSchedKnob):
    key = "credit2_ratelimit"
    metavar = "DUR"
    help = "credit2 context-switch rate limit of the pool (xl sched-credit2 -s -r; µs)"
    bounds = (0, 500_000_000)
    unit_ns = 1000                                    # xl takes µs


class CreditTsliceKnob(XenSchedKnob):
    key = "credit_tslice"
    metavar = "DUR"
    help = "credit timeslice of the pool (xl sched-credit -s -t; ms, 1ms..1s)"
    bounds = (1_000_000, 1_000_000_000)
    unit_ns = 1_000_000                               # xl takes ms


class CreditRatelimitKnob(Credit2RatelimitKnob):
    key = "credit_ratelimit"
    help = "credit context-switch rate limit of the pool (xl sched-credit -s -r; µs)"
