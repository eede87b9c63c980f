"""QEMU block I/O knobs (aio mode, iothread): recorded, and why they do not apply.

Both only change how QEMU services a virtual disk's requests (in the main loop or a
dedicated I/O thread; with a thread pool, Linux AIO or io_uring). The probe VM has no disk
and issues no block I/O, so there is nothing for them to change; attaching an unused disk
would only pretend. A Linux guest target with a disk would make them meaningful.
"""

from __future__ import annotations

from typing import Any

from irqlab.knobs.base import Knob
from irqlab.knobs.values import parse_onoff

_REASON = ("the probe VM has no disk and issues no block I/O; {what} only changes how QEMU "
           "services a virtual disk")


class AioKnob(Knob):
    key = "aio"
    metavar = "threads|native|io_uring"
    help = "QEMU block aio mode (recorded; not applicable to the disk-less probe VM)"

    def parse(self, value: str) -> None:
        if value not in ("threads", "native", "io_uring"):
            raise ValueError(f"aio {value!r}: use threads, native or io_uring")

    def after_start(self, ctx: Any) -> None:
        self.not_applicable(_REASON.format(what="aio="))


class IothreadKnob(Knob):
    key = "iothread"
    accepts_off = True
    metavar = "on|off"
    help = "QEMU iothread for the disk (recorded; not applicable to the disk-less probe VM)"

    def parse(self, value: str) -> None:
        self.on = parse_onoff(value)

    def after_start(self, ctx: Any) -> None:
        self.not_applicable(_REASON.format(what="an iothread"))
