"""A capture as a trace-cmd ``trace.dat`` (file format version 6), for KernelShark and
``trace-cmd report`` users.

The layout follows trace-cmd's own description of the format,
Documentation/trace-cmd/trace-cmd.dat.v6.5.txt, and what its reader
(lib/trace-cmd/trace-input.c) expects; all numbers little endian:

- ``\\x17\\x08\\x44tracing``, ``"6\\0"``, endianness byte (0), user-space long size byte,
  u32 page size;
- ``"header_page\\0"`` + u64 size + ``events/header_page``; ``"header_event\\0"`` + u64
  size + ``events/header_event``;
- u32 count of ftrace-system formats, each u64 size + format text;
- u32 count of the other event systems, each: system name NUL-terminated, u32 count of
  its events, each u64 size + format text;
- u32 size + kallsyms text; u32 size + printk_formats text; u64 size + saved_cmdlines text
  (``pid comm`` lines);
- u32 CPU count; ``"options  \\0"``, options as (u16 id, u32 size, data), ending with id 0;
- with a counter clock (x86-tsc) and its rate, the stamps are shown in seconds the way
  ``trace-cmd record --tsc2nsec`` files are: option TSC2NSEC (mult, shift; trace-cmd's
  timestamp_calc() takes ``ts * mult >> shift``), option OFFSET (ns added after it) and
  the clock named ``tsc2nsec`` (extract_trace_clock() keeps such stamps in seconds). A
  32-bit mult is exact to ~2e-10 of the converted value, i.e. microseconds after hours of
  uptime, so each page's base stamp is rebased to the capture's first (a few seconds of
  counts to convert) and OFFSET adds that first stamp's exact ns back: every stamp then
  prints within tens of ns of irqlab's ftrace text (``count * 1e9 // rate``);
- ``"flyrecord\\0"``, one (u64 offset, u64 size) pair per CPU; when the trace-clock option
  is present, u64 size + ``[clock]`` (trace-cmd's reader then reads the clock there,
  init_data_v6()); then each CPU's ring-buffer pages, starting page aligned.

Version 6 rather than 7: v7 adds sections and compression that buy nothing here, and every
trace-cmd since 2.x (and KernelShark) reads v6. The pages are stored untouched: a
``trace_pipe_raw`` page (u64 timestamp, commit word, events) is exactly what trace.dat keeps
per CPU, so trace-cmd decodes the same records irqlab's decoder does.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Union

import numpy as np

from irqlab.trace.formats import parse_header_page

MAGIC = b"\x17\x08\x44tracing"
FILE_VERSION = b"6\0"
OPTION_DONE = 0
OPTION_TRACECLOCK = 4          # TRACECMD_OPTION_TRACECLOCK in trace-cmd's option enum
OPTION_OFFSET = 7              # TRACECMD_OPTION_OFFSET: ns added to every stamp (ASCII)
OPTION_TSC2NSEC = 14           # TRACECMD_OPTION_TSC2NSEC: u32 mult, u32 shift, u64 offset
TSC2NSEC_CLOCK = "tsc2nsec"    # trace-cmd's name (TSCNSEC_CLOCK) of a converted counter
FTRACE_SYSTEM = "ftrace"

# The kernel's events/header_event (ring_buffer_print_entry_header()) for the
# type_len:5/time_delta:27 layout irqlab's decoder also assumes; used when a capture did
# not keep the file. trace-cmd reads but does not interpret it.
DEFAULT_HEADER_EVENT = ("# compressed entry header\n\ttype_len    :    5 bits\n"
                        "\ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n"
                        "\tpadding     : type == 29\n\ttime_extend : type == 30\n"
                        "\ttime_stamp : type == 31\n\tdata max type_len  == 28\n")

PageData = Union[bytes, bytearray, memoryview, np.ndarray]
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


def write_tracedat(path: Path, *, header_page: str, header_event: str | None,
                   formats: Mapping[str, str], pages_per_cpu: Mapping[int, PageData],
                   page_size: int, clock: str | None,
                   cmdlines: Mapping[int, str] | None = None,
                   kallsyms: str = "", printk_formats: str = "",
                   long_size: int = 8, tick_hz: int | None = None) -> int:
    """Write a trace.dat; returns the bytes written.

    ``formats`` maps ``"system:event"`` to the format file text (``ftrace:*`` go to the
    ftrace section, as trace-cmd expects for ``print``). ``pages_per_cpu`` holds whole
    ring-buffer pages per CPU number; CPUs missing from it (a cpumask with holes) get an
    empty entry, because trace-cmd numbers CPUs by their position in the file. The file
    is written beside ``path`` and renamed into place, so a failed write leaves no
    half file under the final name. ``tick_hz``: the rate of an ``x86-tsc`` clock, to
    show its stamps in seconds (module doc); without it they stay raw counts."""
    if page_size <= 0 or page_size & (page_size - 1):
        raise ValueError(f"page size {page_size} is not a power of two")
    data = {cpu: _as_bytes(p) for cpu, p in pages_per_cpu.items()}
    for cpu, blob in data.items():
        if cpu < 0 or len(blob) % page_size:
            raise ValueError(f"CPU {cpu}: {len(blob)} bytes are not whole "
                             f"{page_size}-byte pages")
    ncpu = max(data, default=-1) + 1
    time_base = _time_base(data, page_size, clock, tick_hz)
    if time_base is not None:
        clock = TSC2NSEC_CLOCK
    head = _header(header_page, header_event or DEFAULT_HEADER_EVENT, formats,
                   kallsyms, printk_formats, cmdlines or {}, ncpu, clock, page_size,
                   long_size, time_base)
    trailer = _clock_trailer(clock)
    layout = _layout(len(head) + 16 * ncpu + len(trailer), data, ncpu, page_size)
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    try:
        with open(tmp, "wb") as out:
            out.write(head)
            for offset, size in layout:
                out.write(_U64.pack(offset) + _U64.pack(size))
            out.write(trailer)
            _write_pages(out, data, layout, page_size,
                         time_base.base_tick if time_base else 0)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path.stat().st_size


def write_capture_tracedat(path: Path, header: Mapping[str, Any],
                           per_cpu: Mapping[int, PageData],
                           cmdlines: Mapping[int, str] | None = None,
                           tick_hz: int | None = None) -> int:
    """A stored capture (irqlab.trace.archive: its JSON header and pages per CPU) as a
    trace.dat; the page size comes from the capture's own ``header_page``; ``tick_hz``:
    the run's tick rate, to show x86-tsc stamps in seconds."""
    page_size = parse_header_page(header["header_page"]).page_size
    return write_tracedat(path, header_page=header["header_page"],
                          header_event=header.get("header_event"),
                          formats=header["formats"], pages_per_cpu=per_cpu,
                          page_size=page_size, clock=header.get("clock"),
                          cmdlines=cmdlines, tick_hz=tick_hz)


def cmdlines_from_switches(switches: Mapping[str, np.ndarray],
                           known: Mapping[Any, str] | None = None) -> dict[int, str]:
    """``{pid: comm}`` from ``sched_switch`` columns (prev/next pid and comm, time
    ordered): the trace itself names every task that ran, unlike the host's
    ``saved_cmdlines``, which irqlab does not record. A thread renamed during the run
    (QEMU names its vCPU threads after starting them) keeps its last name. ``known``
    (e.g. the capture's ``vmm_threads``) fills in tasks that never switched. PID 0 is left
    out: trace-cmd names it ``<idle>`` itself."""
    out = {int(k): str(v) for k, v in (known or {}).items()}
    if not all(k in switches for k in ("prev_pid", "prev_comm", "next_pid", "next_comm")):
        return _without_idle(out)
    # Per switch, prev then next: the last occurrence of a pid is its latest name.
    pids = np.column_stack([switches["prev_pid"], switches["next_pid"]]).ravel()
    comms = np.column_stack([switches["prev_comm"], switches["next_comm"]]).ravel()
    uniq, first_rev = np.unique(pids[::-1], return_index=True)
    for pid, comm in zip(uniq.tolist(), comms[::-1][first_rev].tolist()):
        out[int(pid)] = _comm(comm)
    return _without_idle(out)


def _without_idle(cmdlines: dict[int, str]) -> dict[int, str]:
    """Sorted, PID 0 and empty names dropped, one line each (a newline in a name would
    split its ``pid comm`` line)."""
    return {pid: comm.replace("\n", " ") for pid, comm in sorted(cmdlines.items())
            if pid > 0 and comm}


def _comm(value: Any) -> str:
    if isinstance(value, bytes):
        value = value.split(b"\0", 1)[0].decode("utf-8", "replace")
    return str(value)


def _as_bytes(blob: PageData) -> memoryview:
    """A flat byte view, without copying numpy arrays or memoryviews."""
    if isinstance(blob, np.ndarray):
        blob = np.ascontiguousarray(blob)
    view = memoryview(blob)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _sized8(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return _U64.pack(len(raw)) + raw


def _sized4(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return _U32.pack(len(raw)) + raw


def _header(header_page: str, header_event: str, formats: Mapping[str, str],
            kallsyms: str, printk_formats: str, cmdlines: Mapping[int, str], ncpu: int,
            clock: str | None, page_size: int, long_size: int,
            time_base: TimeBase | None) -> bytes:
    """Everything before the per-CPU (offset, size) pairs."""
    parts = [MAGIC, FILE_VERSION, bytes([0, long_size]), _U32.pack(page_size),
             b"header_page\0", _sized8(header_page),
             b"header_event\0", _sized8(header_event),
             _event_sections(formats),
             _sized4(kallsyms), _sized4(printk_formats),
             _sized8("".join(f"{pid} {comm}\n" for pid, comm in cmdlines.items())),
             _U32.pack(ncpu), b"options  \0", _options(clock, time_base), b"flyrecord\0"]
    return b"".join(parts)


def _event_sections(formats: Mapping[str, str]) -> bytes:
    """The ftrace formats, then the other systems, each with its events' formats."""
    systems: dict[str, list[str]] = {}
    for key, text in formats.items():
        system, sep, _event = key.partition(":")
        if not sep:
            raise ValueError(f"format key {key!r} is not 'system:event'")
        systems.setdefault(system, []).append(text)
    ftrace = systems.pop(FTRACE_SYSTEM, [])
    out = [_U32.pack(len(ftrace))] + [_sized8(t) for t in ftrace]
    out.append(_U32.pack(len(systems)))
    for system, texts in systems.items():
        out += [system.encode() + b"\0", _U32.pack(len(texts))]
        out += [_sized8(t) for t in texts]
    return b"".join(out)


def _options(clock: str | None, time_base: TimeBase | None = None) -> bytes:
    """The options list: the conversion of counter stamps to ns (module doc), the trace
    clock (so unconverted ``x86-tsc`` stamps are shown as counts, not as seconds), then
    the end marker. trace-cmd parses the bracketed name, as in the tracefs
    ``trace_clock`` file, and needs the NUL it scans up to."""
    out = b""
    if time_base is not None:
        out += struct.pack("<HIIIQ", OPTION_TSC2NSEC, 16, time_base.mult, time_base.shift, 0)
        text = f"{time_base.base_ns}".encode() + b"\0"
        out += struct.pack("<HI", OPTION_OFFSET, len(text)) + text
    if clock:
        text = f"[{clock}]".encode() + b"\0"
        out += struct.pack("<HI", OPTION_TRACECLOCK, len(text)) + text
    return out + struct.pack("<H", OPTION_DONE)


def _clock_trailer(clock: str | None) -> bytes:
    """v6 keeps the clock again right after the CPU pairs (trace-output.c save_clock())."""
    return _sized8(f"[{clock}]") if clock else b""


def _layout(start: int, data: Mapping[int, memoryview], ncpu: int,
            page_size: int) -> list[tuple[int, int]]:
    """(offset, size) per CPU: each CPU's pages start page aligned, as trace-cmd mmaps
    them page by page; an absent or empty CPU gets (0, 0)."""
    out, at = [], start
    for cpu in range(ncpu):
        size = len(data[cpu]) if cpu in data else 0
        if not size:
            out.append((0, 0))
            continue
        at = -(-at // page_size) * page_size
        out.append((at, size))
        at += size
    return out


def _write_pages(out: BinaryIO, data: Mapping[int, memoryview],
                 layout: list[tuple[int, int]], page_size: int, base_tick: int) -> None:
    """Each CPU's pages; with ``base_tick``, every page's u64 base stamp (its first 8
    bytes) less that (the events' deltas are relative to it and stay as they are)."""
    chunk = max(page_size, (1 << 24) // page_size * page_size)
    for cpu, (offset, size) in enumerate(layout):
        if not size:
            continue
        out.write(b"\0" * (offset - out.tell()))
        blob = data[cpu]
        for i in range(0, size, chunk):
            part = blob[i:i + chunk]
            if base_tick:
                pages = np.frombuffer(part, np.uint8).copy()
                stamps = pages.view("<u8")[::page_size // 8]
                stamps[stamps >= base_tick] -= np.uint64(base_tick)
                part = pages.data
            out.write(part)


@dataclass(frozen=True)
class TimeBase:
    """Counter stamps as ns in trace-cmd: ``base_ns + ((count - base_tick) * mult >>
    shift)``."""

    base_tick: int
    base_ns: int
    mult: int
    shift: int


def _time_base(data: Mapping[int, memoryview], page_size: int, clock: str | None,
               tick_hz: int | None) -> TimeBase | None:
    """The conversion of x86-tsc stamps at ``tick_hz`` (module doc), None when the clock
    is not a counter, the rate is unknown or there are no pages."""
    if clock != "x86-tsc" or not tick_hz or tick_hz <= 0:
        return None
    firsts = []
    for blob in data.values():
        stamps = np.frombuffer(blob, "<u8")[::page_size // 8]
        stamps = stamps[stamps > 0]          # an unused page has none
        if len(stamps):
            firsts.append(int(stamps.min()))
    if not firsts:
        return None
    base = min(firsts)
    # The largest shift whose mult fits trace-cmd's (signed) int: the finest step.
    shift = 0
    while shift < 63 and round((1 << (shift + 1)) * 1_000_000_000 / tick_hz) < 1 << 31:
        shift += 1
    mult = round((1 << shift) * 1_000_000_000 / tick_hz)
    return TimeBase(base, base * 1_000_000_000 // tick_hz, mult, shift)
