"""Start a target and wait until its probe runs; stop cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import time
from typing import Any

from irqlab.measure.config import RunConfig
from irqlab.measure.targets import boot_timeout_s, make_target, open_source
from irqlab.runner.accel import AccelPlan
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.ring import RingReader


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


def boot(cfg: RunConfig, plan: AccelPlan, guest_cfg: GuestConfig, name: str,
          stop: StopFlag) -> tuple[QemuGuest, RingReader | None, str | None]:
    """Start the target and wait for the probe to run; returns (guest, reader, error)."""
    guest = make_target(cfg, plan, guest_cfg, name)
    try:
        guest.start()
    except OSError as exc:
        return guest, None, str(exc)
    reader = None
    deadline = time.monotonic() + boot_timeout_s(cfg, plan)
    while time.monotonic() < deadline and stop.signum is None:
        if reader is None:
            reader = open_source(cfg, guest)
        if reader.magic_ok():
            state = reader.state()
            if state in ("running", "done"):
                return guest, reader, None
            if state == "error":
                hdr = reader.header()
                return guest, reader, f"probe error {hdr.error}: {hdr.message}"
        code = guest.exit_code()
        if code is not None and reader is not None and reader.magic_ok() and \
                reader.state() in ("running", "done", "error"):
            continue    # it ran (and maybe ended: arm64 powers off) before we looked
        if code is not None:
            return guest, reader, (f"QEMU exited with code {code} before the probe ran; "
                                   f"stderr: {guest.stderr().strip()[-500:] or '(empty)'}")
        time.sleep(0.01)
    if stop.signum is not None:
        return guest, reader, "interrupted during boot"
    return guest, reader, (f"the probe did not start within {boot_timeout_s(cfg, plan):g} s "
                           f"under {plan.label}; "
                           + (guest.console_summary() if hasattr(guest, "console_summary")
                              else f"serial: {guest.serial().strip()[-300:]!r}"))
