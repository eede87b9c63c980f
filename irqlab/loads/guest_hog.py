"""A known preempter inside the Linux guest (issue 29's cross-layer truth):
``--load guest-hog[:prio=95,spin=2ms,every=100ms,delay=1s,cpu=0]``.

Not a host process: the linux-guest target finds this hook among the run's (interface
``InGuestHog``) and has its init start ``/irqlab-hog`` (probes/native/hog.c) before the
probe: pinned to guest CPU ``cpu`` at SCHED_FIFO ``prio`` (above the probe's 90 by
default), it spins ``spin`` every ``every`` after ``delay``, and writes each spin's
CLOCK_MONOTONIC start and end to the guest's trace marker (seen in the guest capture of
``--trace``). It lives as long as the guest. It requires the capability "guest-hog"
(``--target linux-guest``); any other target refuses it before the run (exit 2).
"""

from __future__ import annotations

from typing import Any

from irqlab.knobs.values import parse_duration, parse_int
from irqlab.loads.base import Load
from irqlab.runner.linux_guest import InGuestHog, LinuxGuest


class GuestHogLoad(Load, InGuestHog):
    kind = "guest-hog"
    requires = "guest-hog"
    params = {"prio": "SCHED_FIFO priority in the guest, 1-99 (default 95)",
              "spin": "how long each spin holds the CPU (default 2ms)",
              "every": "one spin per this period (default 100ms)",
              "start": "first spin this long after the guest's init starts it "
                       "(default 1s)",
              "cpu": "guest CPU (default 0, the probe's first)"}

    def configure(self, params: dict[str, str]) -> None:
        if "cpus" in params:
            raise ValueError("load guest-hog runs inside the guest: use cpu= (a guest CPU)")
        self.prio = parse_int(params.get("prio", "95"), 1, 99, "prio")
        self.spin_ns = parse_duration(params.get("spin", "2ms"))
        self.every_ns = parse_duration(params.get("every", "100ms"))
        self.start_ns = parse_duration(params.get("start", "1s"))
        self.guest_cpu = parse_int(params.get("cpu", "0"), 0, 63, "cpu")
        if not 0 < self.spin_ns < self.every_ns:
            raise ValueError(f"spin {params.get('spin', '2ms')} must be shorter than every "
                             f"{params.get('every', '100ms')}")
        self._process: Any = None

    def hog_args(self) -> list[str]:
        return [str(self.guest_cpu), str(self.prio), str(self.spin_ns), str(self.every_ns),
                str(self.start_ns)]

    # -- RunHook: nothing runs on the host -----------------------------------------------
    def before_start(self) -> None:
        pass

    def after_start(self, ctx: Any) -> None:
        self._process = ctx.process

    def stop(self) -> None:
        process = self._process
        if not isinstance(process, LinuxGuest):
            self.error = "no Linux guest ran this load"
            return
        self.details["guest_args"] = self.hog_args()
        started = "irqlab-init: guest hog started" in process.serial()
        self.details["started_in_guest"] = started
        if not started:
            self.error = "the guest never started irqlab-hog (see the serial tail)"

    def metadata(self) -> dict[str, Any]:
        return self.guest_metadata("linux guest", self._process is not None)
