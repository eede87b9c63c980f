"""The probe's sample ring as the host sees it (docs/formats.md section 2).

The one host-side definition of the ring's offsets, header and names; the guest's is
probes/guest/lib/ring.h. Readers (irqlab.samples.ring, .multiring, .console), the
synthetic writer of the tests and the trace capture's anchors all take it from here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

# The mark that starts every framed line of the probe's console output (docs/formats.md
# section 7; samples/console.py reads them).
FRAME_MARK = b"~IQ"

# Byte offset of the ring in the guest-RAM file, the same on every machine: x86 pc RAM
# starts at GPA 0, so it is GPA 0x400000; arm64 virt RAM (and the file) starts at GPA
# 0x40000000 and the probe puts the ring at RAM base + 4 MiB.
RING_OFFSET = 0x00400000
RING_MAGIC = 0x474E49524C515249
RING_VERSION = 1
HEADER_SIZE = 4096

STATE_BOOTING, STATE_RUNNING, STATE_DONE, STATE_ERROR = 0, 1, 2, 3
STATE_NAMES = {0: "booting", 1: "running", 2: "done", 3: "error"}
ARCH_NAMES = {1: "x86_64", 2: "arm64"}
TICK_METHODS = {
    1: "cpuid-0x15",
    2: "cpuid-0x16",
    3: "hypervisor-leaf-0x40000010",
    4: "calibrated-pit",
    5: "cntfrq",
    6: "clock-monotonic",         # native probe: CLOCK_MONOTONIC ns
    7: "xen-leaf-0x40000x03",     # x86 probe under Xen: guest TSC kHz from Xen's leaf
}
TIMER_MODES = {
    1: "tsc-deadline",
    2: "lapic-oneshot",
    3: "arm64-virtual-timer",
    4: "arm64-physical-timer",
    5: "clock-nanosleep",         # native probe: clock_nanosleep(TIMER_ABSTIME)
    6: "udp-round-trip",          # net sender: a UDP packet per period, its round trip
    7: "busy-loop",               # noise probe: no timer, the clock read in a loop
}
IDLE_NAMES = {1: "hlt", 2: "poll", 3: "sleep"}   # 3: native thread blocks in the kernel
# The header's reference counter (offset 416): a second counter the probe read beside its
# own, the one a host-side trace stamps its records with (docs/formats.md section 2).
REF_COUNTERS = {1: "arm64-cntpct"}    # Xen on Arm: xentrace's get_cycles() is CNTPCT_EL0
REF = struct.Struct("<qII")           # ref_offset_tick, ref_counter, ref_offset_err_tick
REF_OFFSET = 416
# The busy-loop probe's progress and totals (offset 440, docs/formats.md section 2):
# progress_tick, busy_start_tick, noise_tick; 0 from every other probe.
PROGRESS = struct.Struct("<QQQ")
PROGRESS_OFFSET = 440

HEADER = struct.Struct("<QIIIIQIIQIIQQQIIQ64s256s")
CAPACITY_OFFSET = 16
STATE_OFFSET = 48
HEAD_OFFSET = 56
OVERRUNS_OFFSET = 64


class RingError(Exception):
    """The ring is absent, malformed or from an incompatible probe."""


@dataclass(frozen=True)
class RingHeader:
    """Decoded ring header; fields as in docs/formats.md."""

    version: int
    record_size: int
    capacity: int
    arch: str
    tick_hz: int
    tick_method: str
    timer_mode: str
    period_tick: int
    state: str
    error: int
    head: int
    overruns: int
    apic_hz: int
    idle: str
    inject_every: int
    inject_irqoff_tick: int
    build_id: str
    message: str
    # ref counter = probe counter + ref_offset_tick (within ref_offset_err_tick); None
    # when the probe read no reference counter (x86, older probes)
    ref_counter: str | None = None
    ref_offset_tick: int = 0
    ref_offset_err_tick: int = 0
    # The busy-loop probe's (0 from the others): its last clock read, no record yet
    # unwritten starts before it; its first clock read; the sum of its gaps.
    progress_tick: int = 0
    busy_start_tick: int = 0
    noise_tick: int = 0

    def ref_meta(self) -> dict[str, Any] | None:
        """The reference counter as run metadata (``probe.ref_counter``), or None."""
        if self.ref_counter is None:
            return None
        return {"counter": self.ref_counter, "offset_tick": self.ref_offset_tick,
                "error_tick": self.ref_offset_err_tick}


def ref_counter_name(code: int) -> str | None:
    """The header's ref_counter code as its name (0: none)."""
    return None if code == 0 else REF_COUNTERS.get(code, f"unknown({code})")
