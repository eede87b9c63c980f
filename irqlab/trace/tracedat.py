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
from pathlib import Path
from typing import Any, BinaryIO, Union

import numpy as np

from irqlab.trace.formats import parse_header_page

MAGIC = b"\x17\x08\x44tracing"
FILE_VERSION = b"6\0"
OPTION_DONE = 0
OPTION_TRACECLOCK = 4          # TRACECMD_OPTION_TRACECLOCK in trace-cmd's option enum
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
                   long_size: int = 8) -> int:
    """Write a trace.dat; returns the bytes written.

    ``formats`` maps ``"system:event"`` to the format file text (``ftrace:*`` go to the
    ftrace section, as trace-cmd expects for ``print``). ``pages_per_cpu`` holds whole
    ring-buffer pages per CPU number; CPUs missing from it (a cpumask with holes) get an
    empty entry, because trace-cmd numbers CPUs by their position in the file. The file
    is written beside ``path`` and renamed into place, so a failed write leaves no
    half file under the final name."""
    if page_size <= 0 or page_size & (page_size - 1):
        raise ValueError(f"page size {page_size} is not a power of two")
    data = {cpu: _as_bytes(p) for cpu, p in pages_per_cpu.items()}
    for cpu, blob in data.items():
        if cpu < 0 or len(blob) % page_size:
            raise ValueError(f"CPU {cpu}: {len(blob)} bytes are not whole "
                             f"{page_size}-byte pages")
    ncpu = max(data, default=-1) + 1
    head = _header(header_page, header_event or DEFAULT_HEADER_EVENT, formats,
                   kallsyms, printk_formats, cmdlines or {}, ncpu, clock, page_size,
                   long_size)
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
            _write_pages(out, data, layout)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path.stat().st_size


def write_capture_tracedat(path: Path, header: Mapping[str, Any],
                           per_cpu: Mapping[int, PageData],
                           cmdlines: Mapping[int, str] | None = None) -> int:
    """A stored capture (irqlab.trace.archive: its JSON header and pages per CPU) as a
    trace.dat; the page size comes from the capture's own ``header_page``."""
    page_size = parse_header_page(header["header_page"]).page_size
    return write_tracedat(path, header_page=header["header_page"],
                          header_event=header.get("header_event"),
                          formats=header["formats"], pages_per_cpu=per_cpu,
                          page_size=page_size, clock=header.get("clock"),
                          cmdlines=cmdlines)


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
            clock: str | None, page_size: int, long_size: int) -> bytes:
    """Everything before the per-CPU (offset, size) pairs."""
    parts = [MAGIC, FILE_VERSION, bytes([0, long_size]), _U32.pack(page_size),
             b"header_page\0", _sized8(header_page),
             b"header_event\0", _sized8(header_event),
             _event_sections(formats),
             _sized4(kallsyms), _sized4(printk_formats),
             _sized8("".join(f"{pid} {comm}\n" for pid, comm in cmdlines.items())),
             _U32.pack(ncpu), b"options  \0", _options(clock), b"flyrecord\0"]
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


def _options(clock: str | None) -> bytes:
    """The options list: the trace clock (so ``x86-tsc`` stamps are shown as counts, not
    as seconds), then the end marker. trace-cmd parses the bracketed name, as in the
    tracefs ``trace_clock`` file, and needs the NUL it scans up to."""
    out = b""
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
                 layout: list[tuple[int, int]]) -> None:
    for cpu, (offset, size) in enumerate(layout):
        if not size:
            continue
        out.write(b"\0" * (offset - out.tell()))
        blob = data[cpu]
        for i in range(0, size, 1 << 24):
            out.write(blob[i:i + (1 << 24)])
