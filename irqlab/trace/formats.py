"""Event ``format`` files and the ring-buffer page header, as tracefs describes them.

Sources: the ``format`` files themselves (include/trace/trace_events.h generates them) and
``events/header_page`` (kernel/trace/ring_buffer.c, ring_buffer_print_page_header). We
never hard-code a field offset: every field is found by name in this kernel's format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FIELD = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);"
                    r"\s*signed:(?P<signed>\d+);")


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    size: int
    signed: bool
    is_string: bool = False       # char name[N]
    data_loc: bool = False        # __data_loc: u32 = (len << 16) | offset in the record


@dataclass
class EventFormat:
    system: str
    name: str
    id: int
    fields: dict[str, Field] = field(default_factory=dict)
    text: str = ""                # the format file verbatim (kept with the capture)

    def f(self, name: str) -> Field:
        try:
            return self.fields[name]
        except KeyError:
            raise KeyError(f"{self.system}:{self.name} has no field {name!r} on this "
                           f"kernel (fields: {', '.join(self.fields)})") from None


def parse_format(text: str, system: str = "") -> EventFormat:
    """Parse one ``events/<system>/<event>/format`` file."""
    name, ev_id = "", -1
    fields: dict[str, Field] = {}
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("name:"):
            name = s.split(":", 1)[1].strip()
        elif s.startswith("ID:"):
            ev_id = int(s.split(":", 1)[1])
        elif s.startswith("field:"):
            m = _FIELD.search(s)
            if not m:
                continue
            decl = m["decl"].strip()
            data_loc = decl.startswith("__data_loc")
            fname = decl.split()[-1]
            is_string = "[" in fname and decl.startswith("char")
            fname = fname.split("[", 1)[0]
            fields[fname] = Field(fname, int(m["off"]), int(m["size"]), m["signed"] == "1",
                                  is_string, data_loc)
    if not name or ev_id < 0:
        raise ValueError(f"not an event format file: {text[:80]!r}")
    return EventFormat(system, name, ev_id, fields, text)


@dataclass(frozen=True)
class PageHeader:
    """``events/header_page``: where the timestamp, commit and data sit in a page."""

    ts_offset: int = 0
    commit_offset: int = 8
    commit_size: int = 8
    data_offset: int = 16
    data_size: int = 4080

    @property
    def page_size(self) -> int:
        return self.data_offset + self.data_size


def parse_header_page(text: str) -> PageHeader:
    offs: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        m = _FIELD.search(line.replace("field: ", "field:"))
        if m:
            offs[m["decl"].split()[-1]] = (int(m["off"]), int(m["size"]))
    ts, commit, data = offs["timestamp"], offs["commit"], offs["data"]
    return PageHeader(ts[0], commit[0], commit[1], data[0], data[1])
