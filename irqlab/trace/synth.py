"""Assemble ring-buffer pages from events, with the running kernel's own formats.

For tests (traces with known content: KVM stages, lost events) and the benchmark. The
encoding is the one irqlab.trace.ringbuf decodes (kernel/trace/ring_buffer.c layout):
data events with type_len = words (or 0 + length word past 112 bytes), a time extend
before any event whose delta does not fit 27 bits.
"""

from __future__ import annotations

import struct
from typing import Any

from irqlab.trace.formats import EventFormat, PageHeader

_MAX_SMALL = 28 * 4


def encode(fmt: EventFormat, values: dict[str, Any]) -> bytes:
    """One event record: common fields + the given fields (others zero)."""
    size = max(f.offset + f.size for f in fmt.fields.values())
    rec = bytearray(size)
    tail = bytearray()
    values = {"common_type": fmt.id, **values}
    for name, val in values.items():
        f = fmt.f(name)
        if f.data_loc:
            data = str(val).encode() + b"\0"
            struct.pack_into("<I", rec, f.offset, ((len(data)) << 16) | (size + len(tail)))
            tail += data
        elif f.is_string and f.size:
            raw = val if isinstance(val, bytes) else str(val).encode()
            rec[f.offset:f.offset + f.size] = raw[:f.size - 1].ljust(f.size, b"\0")
        elif f.is_string:                      # char buf[]: runs to the record's end
            tail += (val if isinstance(val, bytes) else str(val).encode()) + b"\0"
        else:
            code = {1: "b", 2: "h", 4: "i", 8: "q"}[f.size]
            struct.pack_into("<" + (code if f.signed else code.upper()), rec, f.offset,
                             int(val))
    out = bytes(rec + tail)
    return out + b"\0" * (-len(out) % 4)


def header_page_text(h: PageHeader) -> str:
    """``events/header_page`` text for a page layout (what parse_header_page() reads)."""
    return (f"\tfield: u64 timestamp;\toffset:{h.ts_offset};\tsize:8;\tsigned:0;\n"
            f"\tfield: local_t commit;\toffset:{h.commit_offset};"
            f"\tsize:{h.commit_size};\tsigned:1;\n"
            f"\tfield: char data;\toffset:{h.data_offset};\tsize:{h.data_size};\tsigned:0;\n")


class PageWriter:
    """Events of one CPU, in time order, into whole pages."""

    def __init__(self, hdr: PageHeader | None = None) -> None:
        self.hdr = hdr or PageHeader()
        self.pages: list[bytes] = []
        self._data = bytearray()
        self._page_ts = 0
        self._last = 0
        self._missed_next = False

    def lose_events(self) -> None:
        """Flag the next page as following lost events (RB_MISSED_EVENTS)."""
        self.flush()
        self._missed_next = True

    def add(self, ts: int, payload: bytes) -> None:
        small = len(payload) <= _MAX_SMALL
        need = 4 + len(payload) + (0 if small else 4)
        if self._data and ts - self._last >= (1 << 27):
            need += 8
        if len(self._data) + need > self.hdr.data_size:
            self.flush()
        if not self._data:
            self._page_ts, self._last = ts, ts
        delta = ts - self._last
        if delta >= (1 << 27):                 # time extend: 8 bytes, delta split 27/32
            self._data += struct.pack("<II", 30 | ((delta & ((1 << 27) - 1)) << 5),
                                      delta >> 27)
            delta = 0
        if small:
            self._data += struct.pack("<I", (len(payload) // 4) | (delta << 5)) + payload
        else:
            self._data += struct.pack("<II", delta << 5, len(payload) + 4) + payload
        self._last = ts

    def add_absolute(self, ts: int) -> None:
        """An absolute time stamp (type 31): what a writer that interrupted another
        writer's time update puts before its event (ring_buffer.c, rb_add_time_stamp())."""
        if len(self._data) + 8 > self.hdr.data_size:
            self.flush()
        if not self._data:
            self._page_ts = ts
        self._data += struct.pack("<II", 31 | ((ts & ((1 << 27) - 1)) << 5),
                                  (ts >> 27) & 0xFFFFFFFF)
        self._last = ts

    def add_padding(self, ts: int, length: int) -> None:
        """A discarded event (padding with a non-zero delta): its delta is not counted.

        ``length`` (a multiple of 4, >= 4) is array[0]: the bytes after the header,
        counting the length word itself (rb_event_length() adds only the header)."""
        if len(self._data) + 4 + length > self.hdr.data_size:
            self.flush()
        if not self._data:
            self._page_ts = self._last         # the padding's own delta is not counted
        delta = max(1, ts - self._last)
        self._data += struct.pack("<II", 29 | (delta << 5), length) + b"\0" * (length - 4)

    def flush(self) -> None:
        if not self._data:
            return
        commit = len(self._data) | ((1 << 31) if self._missed_next else 0)
        page = struct.pack("<QQ", self._page_ts, commit) + bytes(self._data)
        self.pages.append(page.ljust(self.hdr.page_size, b"\0"))
        self._data = bytearray()
        self._missed_next = False

    def data(self) -> bytes:
        self.flush()
        return b"".join(self.pages)
