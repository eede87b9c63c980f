"""xentrace's binary file: records as Xen writes them, split per physical CPU.

Format (Xen 4.17, ``xen/include/public/trace.h`` and ``tools/xentrace/xentrace.c``):

* a record (``struct t_rec``) is one 32-bit header word — bits 0-27 the event id
  (``TRC_HD_TO_EVENT``), bits 28-30 the number of extra 32-bit words
  (``TRC_HD_EXTRA``, at most ``TRACE_EXTRA_MAX`` = 7), bit 31 ``cycles_included``
  (``TRC_HD_CYCLE_FLAG``) — then, if that bit is set, the 64-bit cycle counter as
  ``cycles_lo``, ``cycles_hi`` (the TSC on x86, CNTPCT_EL0 on Arm: ``get_cycles()``), then
  the extra words. Size = 4 + 8·cycles + 4·extra bytes; little-endian on both targets.
* Xen keeps one buffer per physical CPU. xentrace copies each buffer's new bytes as a
  *window* preceded by a ``TRC_TRACE_CPU_CHANGE`` record whose two extra words are the CPU
  number and the window's size in bytes (``struct cpu_change_record``); records between
  two such headers all come from that CPU.
* ``TRC_LOST_RECORDS`` (extra: lost count, then domid:16 | vcpu:16, then the first lost
  record's TSC) says the buffer overflowed; ``TRC_TRACE_WRAP_BUFFER`` is padding.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

# xen/include/public/trace.h
TRACE_EXTRA_MAX = 7
TRACE_EXTRA_SHIFT = 28
TRC_HD_CYCLE_FLAG = 1 << 31
TRC_EVENT_MASK = 0x0FFFFFFF

TRC_GEN = 0x0001F000
TRC_SCHED = 0x0002F000
TRC_DOM0OP = 0x0004F000
TRC_HVM = 0x0008F000
TRC_MEM = 0x0010F000
TRC_PV = 0x0020F000
TRC_SHADOW = 0x0040F000
TRC_HW = 0x0080F000
TRC_SCHED_MIN = 0x00021000        # runstate changes
TRC_SCHED_CLASS = 0x00022000      # scheduler-specific (credit, credit2, rtds, null)
TRC_SCHED_VERBOSE = 0x00028000

TRC_LOST_RECORDS = TRC_GEN + 1
TRC_TRACE_WRAP_BUFFER = TRC_GEN + 2
TRC_TRACE_CPU_CHANGE = TRC_GEN + 3

TRC_SCHED_RUNSTATE_CHANGE = TRC_SCHED_MIN + 1   # old state << 8 | new state << 4 in the id
TRC_SCHED_CONTINUE_RUNNING = TRC_SCHED_MIN + 2
TRC_SCHED_DOM_ADD = TRC_SCHED_VERBOSE + 1
TRC_SCHED_DOM_REM = TRC_SCHED_VERBOSE + 2
TRC_SCHED_SLEEP = TRC_SCHED_VERBOSE + 3
TRC_SCHED_WAKE = TRC_SCHED_VERBOSE + 4
TRC_SCHED_YIELD = TRC_SCHED_VERBOSE + 5
TRC_SCHED_BLOCK = TRC_SCHED_VERBOSE + 6
TRC_SCHED_SHUTDOWN = TRC_SCHED_VERBOSE + 7
TRC_SCHED_SWITCH = TRC_SCHED_VERBOSE + 10
TRC_SCHED_SWITCH_INFPREV = TRC_SCHED_VERBOSE + 14
TRC_SCHED_SWITCH_INFNEXT = TRC_SCHED_VERBOSE + 15
TRC_SCHED_SWITCH_INFCONT = TRC_SCHED_VERBOSE + 17

# xen/include/public/vcpu.h runstates; xen/include/public/xen.h DOMID_IDLE.
RUNSTATES = ("running", "runnable", "blocked", "offline")
DOMID_IDLE = 0x7FFF

EVENT_NAMES = {
    TRC_LOST_RECORDS: "lost_records", TRC_TRACE_WRAP_BUFFER: "wrap_buffer",
    TRC_TRACE_CPU_CHANGE: "cpu_change", TRC_SCHED_CONTINUE_RUNNING: "continue_running",
    TRC_SCHED_DOM_ADD: "dom_add", TRC_SCHED_DOM_REM: "dom_rem", TRC_SCHED_SLEEP: "sleep",
    TRC_SCHED_WAKE: "wake", TRC_SCHED_YIELD: "yield", TRC_SCHED_BLOCK: "block",
    TRC_SCHED_SHUTDOWN: "shutdown", TRC_SCHED_SWITCH: "switch",
    TRC_SCHED_SWITCH_INFPREV: "switch_infprev", TRC_SCHED_SWITCH_INFNEXT: "switch_infnext",
    TRC_SCHED_SWITCH_INFCONT: "switch_infcont",
}


class TraceFormatError(ValueError):
    """The bytes are not a xentrace file (the message gives the offset)."""


@dataclass(frozen=True)
class TraceRecord:
    """One decoded record. ``tsc`` is the record's own cycle count, or the last one seen
    on the same CPU for records without (``tsc_inherited``)."""

    offset: int
    cpu: int
    event: int
    tsc: int | None
    extra: tuple[int, ...]
    tsc_inherited: bool = False

    @property
    def name(self) -> str:
        if is_runstate_change(self.event):
            return "runstate_change"
        return EVENT_NAMES.get(self.event, f"{self.event:#09x}")


def is_runstate_change(event: int) -> bool:
    """RUNSTATE_CHANGE carries old/new state in bits 8-9 and 4-5 of the event id."""
    return event & ~0x330 == TRC_SCHED_RUNSTATE_CHANGE


def runstate_transition(event: int) -> tuple[str, str]:
    return RUNSTATES[(event >> 8) & 3], RUNSTATES[(event >> 4) & 3]


def encode_record(event: int, extra: tuple[int, ...] | list[int] = (),
                  tsc: int | None = None) -> bytes:
    """A record as Xen writes it (for tests and synthetic traces)."""
    if len(extra) > TRACE_EXTRA_MAX:
        raise ValueError(f"at most {TRACE_EXTRA_MAX} extra words")
    header = (event & TRC_EVENT_MASK) | (len(extra) << TRACE_EXTRA_SHIFT)
    out = b""
    if tsc is not None:
        header |= TRC_HD_CYCLE_FLAG
        out = struct.pack("<II", tsc & 0xFFFFFFFF, tsc >> 32)
    return struct.pack("<I", header) + out + struct.pack(f"<{len(extra)}I", *extra)


def encode_window(cpu: int, records: bytes) -> bytes:
    """xentrace's per-CPU window: a CPU_CHANGE record (cpu, size), then the bytes."""
    return encode_record(TRC_TRACE_CPU_CHANGE, (cpu, len(records))) + records


def iter_records(data: bytes, strict: bool = False) -> Iterator[TraceRecord]:
    """Decode a xentrace file. Records before the first CPU_CHANGE are taken as CPU 0
    (a file cut from a buffer dump); a truncated last record ends the iteration (or
    raises with ``strict``)."""
    pos, cpu, end_of_window = 0, 0, None
    last_tsc: dict[int, int] = {}
    n = len(data)
    while pos + 4 <= n:
        (header,) = struct.unpack_from("<I", data, pos)
        event = header & TRC_EVENT_MASK
        nextra = (header >> TRACE_EXTRA_SHIFT) & TRACE_EXTRA_MAX
        has_tsc = bool(header & TRC_HD_CYCLE_FLAG)
        size = 4 + 8 * has_tsc + 4 * nextra
        if pos + size > n:
            if strict:
                raise TraceFormatError(f"record at offset {pos} runs past the end")
            return
        body = pos + 4
        tsc = None
        if has_tsc:
            lo, hi = struct.unpack_from("<II", data, body)
            tsc = lo | hi << 32
            body += 8
        extra = struct.unpack_from(f"<{nextra}I", data, body)
        if event == TRC_TRACE_CPU_CHANGE and not has_tsc and nextra == 2 and \
                (end_of_window is None or pos >= end_of_window):
            cpu = extra[0]
            end_of_window = pos + size + extra[1]
            if end_of_window > n and strict:
                raise TraceFormatError(f"window at offset {pos} (cpu {cpu}) runs past "
                                       f"the end")
            yield TraceRecord(pos, cpu, event, None, extra)
            pos += size
            continue
        inherited = False
        if tsc is None and cpu in last_tsc:
            tsc, inherited = last_tsc[cpu], True
        elif tsc is not None:
            last_tsc[cpu] = tsc
        yield TraceRecord(pos, cpu, event, tsc, extra, inherited)
        pos += size
    if strict and pos != n:
        raise TraceFormatError(f"{n - pos} trailing bytes at offset {pos}")
