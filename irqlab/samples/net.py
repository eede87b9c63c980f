"""The samples of ``--target net``: UDP round trips the host sender writes into one v1
ring behind a native-probe directory (docs/formats.md sections 6 and 10).

The ring is read like the native probe's (the same reader, the same loss accounting: a
packet without a reply is a gap in the ring, counted lost); what this adds is the
sender's net block (packets sent, replies, timeouts, timestamp source) and the end of a
run: packets still in flight when the run ends are neither samples nor lost yet, so
:meth:`NetSource.finish` asks the sender to stop sending and waits until it has resolved
every one of them (reply or timeout). Then samples + lost = sent.
"""

from __future__ import annotations

import struct
import time
from dataclasses import replace
from typing import Any, Callable

from irqlab.samples.layout import RingHeader
from irqlab.samples.multiring import MultiRingReader

NET_BLOCK_OFFSET = 3072
NET_BLOCK_MAGIC = 0x4254454E4C515249       # "IRQLNETB" read as bytes
NET_BLOCK_VERSION = 1
FLAG_USER_TS = 1 << 2                      # record timed in user space (no kernel stamps)
_BLOCK = struct.Struct("<QII14QII64s")
_BLOCK_FIELDS = ("sent", "replied", "timed_out", "send_errors", "late", "bad", "held",
                 "kernel_ts", "user_ts", "timeout_ns", "payload_bytes", "handshake_ns",
                 "inject_delay_ns", "inject_every")
_B_KERNEL_TS, _B_LOOPBACK, _B_OWN_NETNS, _B_ICMP = 1, 2, 4, 8


class NetSource(MultiRingReader):
    """The sender's ring and net block; ``on_finish`` asks the sender to stop sending,
    ``finish_wait_s`` bounds the wait for the packets in flight; ``guest_arch``: the
    guest's architecture, the header's (and so the run's) ``arch`` — the sender's ring
    says the host's, where it runs."""

    def __init__(self, mem_path: str, on_finish: Callable[[], None] | None = None,
                 finish_wait_s: float = 3.0, guest_arch: str | None = None) -> None:
        super().__init__(mem_path)
        self._on_finish = on_finish
        self._finish_wait_s = finish_wait_s
        self._guest_arch = guest_arch

    def header(self) -> RingHeader:
        hdr = super().header()
        return replace(hdr, arch=self._guest_arch) if self._guest_arch else hdr

    def net_block(self) -> dict[str, Any] | None:
        """The sender's counters and set-up; None before it has written them."""
        raw = _BLOCK.unpack_from(self._map, self._base + NET_BLOCK_OFFSET)
        magic, version, flags, *counters, port, _res, dest = raw
        if magic != NET_BLOCK_MAGIC or version != NET_BLOCK_VERSION:
            return None
        out: dict[str, Any] = dict(zip(_BLOCK_FIELDS, counters))
        out.update(port=port, dest=dest.split(b"\0", 1)[0].decode("utf-8", "replace"),
                   kernel_timestamps=bool(flags & _B_KERNEL_TS),
                   loopback=bool(flags & _B_LOOPBACK),
                   own_netns=bool(flags & _B_OWN_NETNS), icmp=bool(flags & _B_ICMP))
        return out

    def ring_cpus(self) -> list[int]:
        return []           # one stream of packets, not one ring per measured CPU

    def per_ring(self) -> list[dict[str, Any]]:
        return []

    def metadata(self) -> dict[str, Any]:
        """``net``: the net block, with the sender's directory under ``sender``."""
        if not self._open_rings():
            return {}
        return {"net": {**(self.net_block() or {}), "sender": self.directory()}}

    def notices(self) -> list[str]:
        out = super().notices()
        block = self.net_block()
        if block is not None and not block["kernel_timestamps"]:
            out.append("the socket gives no kernel timestamps: round trips are timed in "
                       "user space (they include the sender's wake-ups)")
        return out

    def finish(self) -> None:
        """Stop the sender's schedule and wait (bounded) until it has resolved every
        packet it sent; the next poll releases them."""
        super().finish()
        if self._on_finish is None or not self._open_rings():
            return
        self._on_finish()
        end = time.monotonic() + self._finish_wait_s
        while self.state() not in ("done", "error") and time.monotonic() < end:
            time.sleep(0.01)
