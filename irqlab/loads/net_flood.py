"""Network flood to the measured guest (seed 004's `ping -f`, seed 003's netperf load):
``--load net-flood[:tool=ping|sockperf,rate=N,size=B,limit=DUR]``.

It runs inside the run's own network namespace (``--target net --net tap``: the hook
requires the target capability "guest-net", so anything else exits 2 before the run)
and sends only to the guest's address there. ``ping`` floods ICMP echo requests the
guest's kernel answers (``-f``, or ``rate`` per second); ``sockperf`` streams UDP
datagrams at ``rate`` per second to the guest's discard port, where its kernel drops
them (RX path and softirq, no reply). Either is bounded in time (``limit``, default 60m)
and in count (ping ``-c``, sockperf ``rate × limit``) whatever happens to irqlab, and
stopped with the run. iperf3 is refused: it needs a server in the guest, and irqlab's
initramfs has none.
"""

from __future__ import annotations

from typing import Any, Callable

from irqlab.knobs.values import parse_duration, parse_int
from irqlab.loads.base import Load, LoadError
from irqlab.runner.net import NetGuest

DISCARD_PORT = 9
_PING_FLOOD_MAX_PPS = 100_000     # bound of ping -f's count: more than it can send here


class NetFloodLoad(Load):
    kind = "net-flood"
    requires = "guest-net"
    params = {"tool": "ping (default: ICMP echo, the guest answers) or sockperf (UDP "
                      "stream to the guest's discard port)",
              "rate": "packets per second (ping default: flood, -f; sockperf default "
                      "10000)",
              "size": "payload bytes (default 56 for ping, 64 for sockperf)",
              "limit": "longest the flood runs (default 60m)"}

    def configure(self, params: dict[str, str]) -> None:
        self.which = params.get("tool", "ping")
        if self.which == "iperf3":
            raise ValueError("tool=iperf3 needs an iperf3 server in the guest and irqlab's "
                             "initramfs has none: use tool=ping or tool=sockperf")
        if self.which not in ("ping", "sockperf"):
            raise ValueError(f"tool {self.which!r}: use ping or sockperf")
        self.tool = self.which
        self.package = "iputils-ping" if self.which == "ping" else "sockperf"
        default_rate = None if self.which == "ping" else "10000"
        rate = params.get("rate", default_rate)
        self.rate = None if rate is None else parse_int(rate, 1, 1_000_000, "rate")
        self.size = parse_int(params.get("size", "56" if self.which == "ping" else "64"),
                              16 if self.which == "sockperf" else 0, 1472, "size")
        self.limit_s = max(1, parse_duration(params.get("limit", "60m")) // 1_000_000_000)
        self._enter: Callable[[], None] | None = None
        self._dest = ""

    def starts_after_boot(self) -> bool:
        return True         # the namespace exists once the target's process has started

    def after_start(self, ctx: Any) -> None:
        process = ctx.process
        enter = process.network.enter() if isinstance(process, NetGuest) else None
        if enter is None:
            self.error = "no network of the run's own to flood: needs --target net --net tap"
            raise LoadError(f"load {self.kind}: {self.error}")
        self._enter = enter
        self._dest = process.network.guest_cidr().partition("/")[0]
        self.details["dest"] = self._dest
        super().after_start(ctx)

    def enter(self) -> None:
        assert self._enter is not None
        self._enter()

    def command(self) -> list[str]:
        if self.which == "ping":
            pace = ["-f"] if self.rate is None else ["-i", f"{1 / self.rate:.6f}"]
            count = self.limit_s * (self.rate or _PING_FLOOD_MAX_PPS)
            return ["ping", "-q", "-n", *pace, "-s", str(self.size), "-c", str(count),
                    "-w", str(self.limit_s), self._dest]
        return ["sockperf", "throughput", "-i", self._dest, "-p", str(DISCARD_PORT),
                "-m", str(self.size), f"--mps={self.rate}", "-t", str(self.limit_s)]
