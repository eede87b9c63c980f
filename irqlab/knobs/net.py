"""Knobs of the guest's network back end (``--target net``): vhost-net, queue pairs.

``vhost=on`` moves virtio-net's data path from QEMU's main loop into the kernel's vhost
worker thread (``-netdev tap,vhost=on``): the path seed 003 measured. It needs a tap
back end and the host's ``/dev/vhost-net`` (CONFIG_VHOST_NET); where either is missing
the knob is recorded "not applicable here" with the reason and the run goes on without
it, never silently. ``queues=N`` gives the tap and the guest's virtio-net N queue pairs
(``-netdev tap,queues=N`` and ``mq=on,vectors=2N+2``); QEMU's user network has one.
"""

from __future__ import annotations

import os
from typing import Any

from irqlab.knobs.base import Knob
from irqlab.knobs.values import parse_int, parse_onoff
from irqlab.runner.net import NetdevSetting

VHOST_NET_DEV = "/dev/vhost-net"


def vhost_net_missing() -> str | None:
    """None when /dev/vhost-net can be opened, else why not."""
    if not os.path.exists(VHOST_NET_DEV):
        return (f"{VHOST_NET_DEV} does not exist: this host's kernel has no vhost-net "
                f"(CONFIG_VHOST_NET is not set, or the vhost_net module is not loaded)")
    if not os.access(VHOST_NET_DEV, os.R_OK | os.W_OK):
        return f"{VHOST_NET_DEV} is not readable and writable by this user"
    return None


class VhostKnob(Knob, NetdevSetting):
    key = "vhost"
    accepts_off = True
    metavar = "on|off"
    help = ("vhost-net for the guest's tap (--target net --net tap); needs "
            "/dev/vhost-net")

    def parse(self, value: str) -> None:
        self.on = parse_onoff(value)

    def netdev_options(self) -> dict[str, str]:
        if not self.on:
            self.status = "applied"
            return {"vhost": "off"}
        missing = vhost_net_missing()
        if missing:
            self.not_applicable(missing)
            return {}
        self.status = "applied"
        return {"vhost": "on"}

    def not_applicable_to(self, what: str) -> None:
        self.not_applicable(f"vhost-net serves a tap back end; {what} has none "
                            f"(use --net tap)")

    def after_start(self, ctx: Any) -> None:
        if self.status == "requested":   # no network asked: not a net target's tap
            self.not_applicable("only --target net --net tap has a network back end "
                                "vhost can serve")


class QueuesKnob(Knob, NetdevSetting):
    key = "queues"
    metavar = "N"
    help = "virtio-net queue pairs of the guest's tap (--target net --net tap)"

    def parse(self, value: str) -> None:
        self.queues = parse_int(value, 1, 16, "queues")

    def netdev_options(self) -> dict[str, str]:
        self.status = "applied"
        return {"queues": str(self.queues)}

    def device_options(self) -> dict[str, str]:
        if self.queues == 1:
            return {}
        # one vector per queue, plus config and control (virtio-net's rule)
        return {"mq": "on", "vectors": str(2 * self.queues + 2)}

    def not_applicable_to(self, what: str) -> None:
        self.not_applicable(f"QEMU's user network has one queue; {what} has no tap "
                            f"(use --net tap)")

    def after_start(self, ctx: Any) -> None:
        if self.status == "requested":
            self.not_applicable("only --target net --net tap has a tap whose queues "
                                "this sets")
