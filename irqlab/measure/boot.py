"""Start a target and wait until its probe runs; stop cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import time
from typing import Any

from irqlab.measure.config import RunConfig
from irqlab.runner.accel import AccelPlan
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.source import SampleSource
from irqlab.targets import Target


class StopFlag:
    """SIGINT/SIGTERM set a flag; the run loop stops cleanly and stores everything."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> "StopFlag":
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signum = signum

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
            # A flag around this one (a suite's, a matrix's) learns of the signal too:
            # a run that ended normally although it was asked to stop (its last sample
            # came first) must not swallow the stop, or a matrix of short runs would
            # go on through every SIGTERM.
            outer = getattr(old, "__self__", None)
            if self.signum is not None and isinstance(outer, StopFlag) \
                    and outer.signum is None:
                outer.signum = self.signum


def boot(target: Target, cfg: RunConfig, plan: AccelPlan, name: str,
         process_args: list[str], stop: StopFlag
         ) -> tuple[MeasuredProcess, SampleSource | None, str | None]:
    """Start the target and wait for the probe to run; returns (process, source, error)."""
    process = target.spawn(cfg, plan, name, process_args)
    try:
        process.start()
    except OSError as exc:
        return process, None, str(exc)
    source = None
    timeout_s = target.boot_timeout_s(cfg, plan)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and stop.signum is None:
        if source is None:
            source = target.open_source(cfg, process)
        if source.magic_ok():
            state = source.state()
            if state in ("running", "done"):
                return process, source, None
            if state == "error":
                hdr = source.header()
                return process, source, f"probe error {hdr.error}: {hdr.message}"
        code = process.exit_code()
        if code is not None and source is not None and source.magic_ok() and \
                source.state() in ("running", "done", "error"):
            continue    # it ran (and maybe ended: arm64 powers off) before we looked
        if code is not None:
            return process, source, (f"{process.exit_description(code)} before the probe ran; "
                                     f"stderr: {process.stderr().strip()[-500:] or '(empty)'}")
        time.sleep(0.01)
    if stop.signum is not None:
        return process, source, "interrupted during boot"
    return process, source, (f"the probe did not start within {timeout_s:g} s under "
                             f"{plan.label}; {target.boot_failure_detail(process)}")
