"""QEMU block I/O knobs (aio mode, iothread) of the guest's virtual disk.

Both change only how QEMU services a virtual disk's requests: in the main loop or a
dedicated I/O thread (``iothread``), with a thread pool, Linux AIO or io_uring (``aio``).
Seed 003 found QEMU's block workers (aio=threads) behind rare multi-ms spikes of a
network round trip. ``--target net`` gives its guest a virtio-blk disk (its target
applies these knobs to it: interface ``DiskSetting``; the ``guest-disk`` load makes the
guest use it). The probe VMs of the other targets have no disk and issue no block I/O:
there the knobs are recorded "not applicable here", never attached to an unused disk
that would only pretend.
"""

from __future__ import annotations

from typing import Any

from irqlab.knobs.base import Knob
from irqlab.knobs.values import parse_onoff
from irqlab.runner.net import DiskSetting, GuestDisk

_REASON = ("this run's VM has no disk and issues no block I/O; {what} only changes how "
           "QEMU services a virtual disk (--target net gives its guest one)")


class AioKnob(Knob, DiskSetting):
    key = "aio"
    metavar = "threads|native|io_uring"
    help = "QEMU block aio mode of the guest disk (--target net; elsewhere recorded n/a)"

    def parse(self, value: str) -> None:
        if value not in ("threads", "native", "io_uring"):
            raise ValueError(f"aio {value!r}: use threads, native or io_uring")

    def apply_to_disk(self, disk: GuestDisk) -> None:
        disk.aio = self.value
        self.status = "applied"

    def after_start(self, ctx: Any) -> None:
        if self.status == "requested":      # no disk took it
            self.not_applicable(_REASON.format(what="aio="))


class IothreadKnob(Knob, DiskSetting):
    key = "iothread"
    accepts_off = True
    metavar = "on|off"
    help = "a QEMU iothread for the guest disk (--target net; elsewhere recorded n/a)"

    def parse(self, value: str) -> None:
        self.on = parse_onoff(value)

    def apply_to_disk(self, disk: GuestDisk) -> None:
        disk.iothread = self.on
        self.status = "applied"

    def after_start(self, ctx: Any) -> None:
        if self.status == "requested":
            self.not_applicable(_REASON.format(what="an iothread"))
