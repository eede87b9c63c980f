"""Softirq load on the host (issue 29's native interference truth):
``--load netns-flood[:rate=N,size=B,limit=DUR,cpus=LIST,rps=LIST]``.

A ping flood across a veth pair between two network namespaces irqlab creates for the
run (``irqlab-<pid>-f<n>a`` sends, ``...b`` answers, addresses 10.78.0.1/2 that exist
only there): nothing touches the host's own network. A veth without XDP or GRO hands each
packet to ``netif_rx`` on the CPU that sent it (drivers/net/veth.c, veth_xmit ->
veth_forward_skb -> __netif_rx; net/core/dev.c, enqueue_to_backlog), so the NET_RX softirq
— reassembly, the echo reply and its receive — runs on ``ping``'s CPU: give the load the
probe's CPU (``cpus=``) and its softirqs land there, run at the end of ping's
``local_bh_enable`` or in ksoftirqd. Large payloads (``size``, default 60000 bytes: ~41
IPv4 fragments each way) make each softirq run long enough to delay a wake-up by tens of
µs.

``rps=LIST`` steers the receive side to other CPUs instead, as a NIC whose interrupts are
given to the measured CPU would: Receive Packet Steering on both veth ends
(``queues/rx-0/rps_cpus``, Documentation/networking/scaling.rst) queues each packet to
the backlog of a CPU of the list and kicks that CPU with an IPI (net/core/dev.c,
enqueue_to_backlog -> rps_ipi_queued, net_rps_send_ipi), so the interrupts and the NET_RX
softirq (run at that interrupt's exit) land there while ping itself runs on ``cpus=``.
The setting lives in the load's own namespaces and goes with them: nothing of the
host's to restore.

Bounded: ping's ``-c`` (``rate × limit``, or 100,000/s for ``-f``) and ``-w limit``
(default 60m) whatever happens to irqlab, stopped with the run. Both namespaces are
journalled (op ``flood_netns``) before they are made, so after a ``kill -9`` the next
irqlab command kills what is left in them and deletes them; the veth pair goes with
them.
"""

from __future__ import annotations

import ctypes
import itertools
import os
from pathlib import Path
from typing import Any

from irqlab.cpus import format_cpu_list, parse_available_cpus
from irqlab.journal import journal, undo_kind
from irqlab.knobs.netns import NETNS_DIR, _ip, remove_netns
from irqlab.knobs.values import parse_duration, parse_int
from irqlab.loads.base import Load, LoadError

SENDER_ADDR, ECHO_ADDR, PREFIX = "10.78.0.1", "10.78.0.2", 30
VETH_A, VETH_B = "irqfl0", "irqfl1"
_PING_FLOOD_MAX_PPS = 100_000     # bound of ping -f's count: more than it can send here
_CLONE_NEWNET = 0x40000000
_counter = itertools.count(1)


@undo_kind("flood_netns")
def undo_flood_netns(entry: dict[str, Any]) -> str:
    """The journal's undo of op ``flood_netns`` (one line for the user)."""
    name = str(entry["name"])
    if not (NETNS_DIR / name).exists():
        return f"network namespace {name} already gone"
    killed = remove_netns(name)
    what = f"; killed {len(killed)} process(es) still in it" if killed else ""
    return (f"removed network namespace {name} (a netns-flood load's veth end) left by "
            f"irqlab pid {entry.get('pid')}{what}")


class NetnsFloodLoad(Load):
    kind = "netns-flood"
    tool = "ping"
    package = "iputils-ping"
    params = {"rate": "echo requests per second (default: flood, ping -f)",
              "size": "payload bytes, 0-65000 (default 60000: fragmented, long softirqs)",
              "limit": "longest the flood runs (default 60m)",
              "rps": "CPUs that receive the packets (Receive Packet Steering: an IPI and "
                     "the NET_RX softirq there; default: the sender's CPU)"}

    def configure(self, params: dict[str, str]) -> None:
        rate = params.get("rate")
        self.rate = None if rate is None else parse_int(rate, 1, 100_000, "rate")
        self.size = parse_int(params.get("size", "60000"), 0, 65_000, "size")
        self.limit_s = max(1, parse_duration(params.get("limit", "60m")) // 1_000_000_000)
        self.rps_cpus = parse_available_cpus(params["rps"]) if "rps" in params else []
        self._names: list[str] = []
        self._entries: list[int] = []
        self._fd = -1

    def prepare(self) -> None:
        """Journal, then create: two namespaces joined by a veth pair, one address each."""
        n = next(_counter)
        base = f"irqlab-{os.getpid()}-f{n}"
        try:
            for name in (f"{base}a", f"{base}b"):
                self._entries.append(journal().add("flood_netns", name=name,
                                                   pid=os.getpid()))
                self._names.append(name)
                _ip("netns", "add", name)
                _ip("-n", name, "link", "set", "lo", "up")
            a, b = self._names
            _ip("-n", a, "link", "add", VETH_A, "type", "veth", "peer", "name", VETH_B,
                "netns", b)
            for ns, dev, addr in ((a, VETH_A, SENDER_ADDR), (b, VETH_B, ECHO_ADDR)):
                _ip("-n", ns, "addr", "add", f"{addr}/{PREFIX}", "dev", dev)
                _ip("-n", ns, "link", "set", dev, "up")
            if self.rps_cpus:
                mask = f"{sum(1 << c for c in self.rps_cpus):x}"
                for ns, dev in ((a, VETH_A), (b, VETH_B)):
                    # `ip netns exec` mounts the namespace's own /sys/class/net
                    _ip("netns", "exec", ns, "sh", "-c",
                        f"echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus")
            self._fd = os.open(NETNS_DIR / a, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self.cleanup()
            raise LoadError(f"load {self.kind}: could not make its network namespaces: "
                            f"{exc}") from None
        self.details.update({"namespaces": list(self._names), "veth": [VETH_A, VETH_B],
                             "dest": ECHO_ADDR,
                             "rps_cpus": format_cpu_list(self.rps_cpus)
                             if self.rps_cpus else None})

    def enter(self) -> None:
        """Join the sending namespace (in the child, before exec)."""
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(self._fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into the flood's namespace: {os.strerror(err)}")

    def command(self) -> list[str]:
        pace = ["-f"] if self.rate is None else ["-i", f"{1 / self.rate:.6f}"]
        count = self.limit_s * (self.rate or _PING_FLOOD_MAX_PPS)
        return ["ping", "-q", "-n", *pace, "-s", str(self.size), "-c", str(count),
                "-w", str(self.limit_s), ECHO_ADDR]

    def cleanup(self) -> None:
        """Delete both namespaces (the load's group is stopped: nothing is left in them)
        and close their journal entries; one that cannot be removed stays journalled."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        errors = []
        for name, entry in zip(self._names, self._entries):
            try:
                if Path(NETNS_DIR / name).exists():
                    remove_netns(name)
            except OSError as exc:
                errors.append(f"could not remove network namespace {name}: {exc}")
                continue
            journal().done(entry)
        self._names, self._entries = [], []
        if errors:
            self.error = (self.error + "; " if self.error else "") + "; ".join(errors)
