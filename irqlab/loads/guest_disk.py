"""Block I/O inside the measured guest, on its virtio-blk disk (seed 003):
``--load guest-disk[:mode=randrw|read|write,block=4096,rate=N]``.

Not a host process: the net target finds this hook among the run's (interface
``InGuestDiskLoad``), gives the guest a disk and has its init start irqlab-diskio on it
beside the responder (probes/native/diskio.c: random O_DIRECT requests, flat out or at
``rate`` per second, SCHED_OTHER). Every request is served by QEMU with the run's
``aio`` mode and ``iothread`` knobs. It requires the capability "guest-disk" (``--target
net``); any other target refuses it before the run (exit 2). What QEMU read and wrote
for the disk during the run is recorded as proof it loaded the path.
"""

from __future__ import annotations

from typing import Any

from irqlab.knobs.values import parse_int
from irqlab.loads.base import Load
from irqlab.runner.net import InGuestDiskLoad, NetGuest

MODES = ("randrw", "read", "write")


class GuestDiskLoad(Load, InGuestDiskLoad):
    kind = "guest-disk"
    requires = "guest-disk"
    params = {"mode": "randrw (default), read or write",
              "block": "bytes per request, a multiple of 512 (default 4096)",
              "rate": "requests per second, 0 = flat out (default 0)"}

    def configure(self, params: dict[str, str]) -> None:
        if "cpus" in params:
            raise ValueError("load guest-disk runs on the guest's vCPU: cpus= does not "
                             "apply")
        self.mode = params.get("mode", "randrw")
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r}: use {', '.join(MODES)}")
        self.block = parse_int(params.get("block", "4096"), 512, 1 << 20, "block")
        if self.block % 512:
            raise ValueError(f"block {self.block} must be a multiple of 512")
        self.rate = parse_int(params.get("rate", "0"), 0, 1_000_000, "rate")
        self._process: Any = None

    def diskio_args(self) -> list[str]:
        return ["--mode", self.mode, "--block", str(self.block), "--rate", str(self.rate)]

    # -- RunHook: nothing runs on the host -----------------------------------------------
    def before_start(self) -> None:
        pass

    def after_start(self, ctx: Any) -> None:
        self._process = ctx.process

    def stop(self) -> None:
        process = self._process
        if not isinstance(process, NetGuest) or process.disk is None:
            self.error = "no guest disk ran this load"
            return
        self.details["guest_args"] = self.diskio_args()
        self.details["qemu_disk_io"] = process.disk_io
        started = "irqlab-diskio: /dev/vda" in process.serial()
        self.details["started_in_guest"] = started
        if not started:
            self.error = "the guest never started irqlab-diskio (see the serial tail)"

    def metadata(self) -> dict[str, Any]:
        return self.guest_metadata("net guest", self._process is not None)
