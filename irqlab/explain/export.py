"""A stored capture as ftrace text: the lines `trace-cmd report` and the kernel's own
``trace`` file print, which Perfetto's text (systrace) importer, KernelShark users' scripts
and grep all read:

    ``<comm>-<pid> [<cpu>] <secs>.<nsecs>: <event>: <field>=<value> ...``

Every event of the capture with every field of its stored format (explain's own tables
keep only the fields it needs, so the pages are decoded again here). Timestamps are
seconds with nine decimals (``trace-cmd report -t``): nanoseconds, the resolution explain
works in, so no two events of a CPU merge. An ``x86-tsc`` capture's counts become ns at the
run's tick rate (the clock mapping assumes host and guest TSC run at the same rate);
other clocks are ns already. Field values are printed as the kernel's print formats do
for the events Perfetto interprets (``sched_switch``'s task state letters and ``==>``),
as ``name=value`` in format order for the others, kernel addresses in hex.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from irqlab.trace.formats import EventFormat, parse_format, parse_header_page
from irqlab.trace.ringbuf import decode_tables

# sched_switch prev_state letters (include/trace/events/sched.h, TASK_REPORT bits):
# none set = R(unnable); TASK_REPORT_MAX (0x100) set = preempted, shown as a '+'.
_STATE_LETTERS = ((0x01, "S"), (0x02, "D"), (0x04, "T"), (0x08, "t"), (0x10, "X"),
                  (0x20, "Z"), (0x40, "P"), (0x80, "I"))
_STATE_MASK, _PREEMPTED = 0xFF, 0x100
CHUNK = 100_000          # events turned into Python values at a time


def task_state(value: int) -> str:
    """The kernel's text of a sched_switch ``prev_state`` (e.g. ``S``, ``D|Z``, ``R+``)."""
    bits = value & _STATE_MASK
    text = "|".join(ch for bit, ch in _STATE_LETTERS if bits & bit) if bits else "R"
    return text + ("+" if value & _PREEMPTED else "")


@dataclass
class TextEvent:
    """One event as the text line holds it."""

    ts_ns: int
    cpu: int
    pid: int
    comm: str
    name: str
    fields: dict[str, Any]


def event_fields(fmt: EventFormat) -> list[str]:
    """The fields a line shows: the format's own, without the common header."""
    return [n for n in fmt.fields if not n.startswith("common_")]


def decode_all(header: dict[str, Any], per_cpu: dict[int, bytes]
               ) -> tuple[list[tuple[EventFormat, dict[str, np.ndarray]]], list]:
    """Every event type's records with all their fields, and the lost-event marks."""
    formats = [parse_format(text, key.split(":")[0]) for key, text in header["formats"].items()]
    wanted = [(fmt, ["common_pid"] + event_fields(fmt)) for fmt in formats]
    dec = decode_tables(per_cpu, parse_header_page(header["header_page"]), wanted)
    return [(fmt, dec.tables[fmt.id]) for fmt in formats], dec.missed


def _value(v: Any) -> Any:
    """A decoded column value as Python: strings without their NUL padding, ints."""
    if isinstance(v, bytes):
        return v.split(b"\0", 1)[0].decode("utf-8", "replace")
    if isinstance(v, (np.integer, int)):
        return int(v)
    return str(v)


def value_text(v: Any, dtype: np.dtype | None = None) -> str:
    """Kernel addresses (unsigned 64-bit values with the top bit set) in hex, as the kernel
    prints pointers; everything else as is."""
    if isinstance(v, int) and dtype is not None and dtype.kind == "u" and v >= 1 << 63:
        return hex(v)
    return str(v)


def fields_text(name: str, fields: dict[str, Any], dtypes: dict[str, np.dtype]) -> str:
    """The text after ``<event>: ``."""
    if name == "sched_switch" and {"prev_state", "next_comm"} <= set(fields):
        # The kernel's print format (Perfetto's importer reads the state letters).
        parts = []
        for key, val in fields.items():
            text = task_state(val) if key == "prev_state" else value_text(val, dtypes[key])
            parts.append(("==> " if key == "next_comm" else "") + f"{key}={text}")
        return " ".join(parts)
    return " ".join(f"{k}={value_text(v, dtypes[k])}" for k, v in fields.items())


def iter_events(tables: list[tuple[EventFormat, dict[str, np.ndarray]]],
                to_ns: Callable[[np.ndarray], np.ndarray],
                cmdlines: dict[int, str]) -> Iterator[TextEvent]:
    """Every event in time order (ties: CPU, then event type as the capture lists them;
    the kernel's own order of two events with one stamp on one CPU is not kept)."""
    keys = []
    for t, (_fmt, cols) in enumerate(tables):
        n = len(cols["ts"])
        if n:
            keys.append(np.rec.fromarrays(
                [cols["ts"].astype(np.uint64), cols["cpu"].astype(np.int64),
                 np.full(n, t, np.int64), np.arange(n, dtype=np.int64)],
                names="ts,cpu,t,i"))
    if not keys:
        return
    order = np.concatenate(keys)
    order = order[np.argsort(order, order=("ts", "cpu", "t", "i"), kind="stable")]
    names = {t: event_fields(fmt) for t, (fmt, _c) in enumerate(tables)}
    # Python values are made a chunk at a time: a 1 GiB capture holds tens of millions of
    # events, whose fields as Python objects all at once would not fit in memory.
    for lo in range(0, len(order), CHUNK):
        sub = order[lo:lo + CHUNK]
        rows: dict[int, dict[str, list]] = {}
        for t in np.unique(sub["t"]).tolist():
            idx = sub["i"][sub["t"] == t]
            cols = tables[t][1]
            rows[t] = {k: cols[k][idx].tolist() for k in ["cpu", "common_pid", *names[t]]}
            rows[t]["ns"] = to_ns(cols["ts"][idx]).tolist()
        at = dict.fromkeys(rows, 0)
        for t in sub["t"].tolist():
            col, j = rows[t], at[t]
            at[t] = j + 1
            pid = int(col["common_pid"][j])
            yield TextEvent(int(col["ns"][j]), int(col["cpu"][j]), pid,
                            "<idle>" if pid == 0 else cmdlines.get(pid, "<...>"),
                            tables[t][0].name, {k: _value(col[k][j]) for k in names[t]})


def text_events(tables: list[tuple[EventFormat, dict[str, np.ndarray]]],
                to_ns: Callable[[np.ndarray], np.ndarray],
                cmdlines: dict[int, str]) -> Iterator[tuple[TextEvent, str]]:
    """(event, its line) in time order."""
    dtypes = {fmt.name: {k: cols[k].dtype for k in event_fields(fmt)}
              for fmt, cols in tables}
    for ev in iter_events(tables, to_ns, cmdlines):
        yield ev, text_line(ev, fields_text(ev.name, ev.fields, dtypes[ev.name]))


def text_line(ev: TextEvent, fields: str) -> str:
    """``comm-pid [cpu] secs.nsecs: event: fields`` with trace-cmd's column widths."""
    secs, nsecs = divmod(ev.ts_ns, 1_000_000_000)
    return (f"{ev.comm:>16}-{ev.pid:<7} [{ev.cpu:03d}] {secs}.{nsecs:09d}: "
            f"{ev.name}: {fields}".rstrip())


def header_lines(header: dict[str, Any], run_id: int, events: int, cpus: int, tick_hz: int,
                 missed: list) -> list[str]:
    """The ftrace file header: Perfetto recognises a text trace by its first line."""
    clock = header.get("clock")
    how = (f"{clock} counts / {tick_hz} Hz" if clock == "x86-tsc" else f"{clock} ns")
    lines = ["# tracer: nop", "#",
             f"# irqlab run {run_id}: host trace capture, clock {how} (seconds with 9 "
             f"decimals)",
             f"# entries-in-buffer/entries-written: {events}/{events}   #P:{cpus}"]
    lines += [f"# CPU {cpu}: {'some' if count < 0 else count} events lost before "
              f"{page_ts} (ring buffer overrun)" for cpu, page_ts, count in missed]
    lines += ["#", "#           TASK-PID     CPU#     TIMESTAMP  FUNCTION",
              "#              | |         |           |         |"]
    return lines


def to_ns_function(header: dict[str, Any], tick_hz: int) -> Callable[[np.ndarray], np.ndarray]:
    """Capture stamps to ns: x86-tsc counts at the run's tick rate, other clocks as is."""
    if header.get("clock") == "x86-tsc":
        # Exact integer arithmetic (no float rounding of 10^15-sized counts).
        return lambda ts: np.array([t * 1_000_000_000 // tick_hz for t in ts.tolist()],
                                   dtype=np.int64)
    return lambda ts: ts.astype(np.int64)


def write_text(path: Path, header: dict[str, Any], per_cpu: dict[int, bytes], run_id: int,
               tick_hz: int, cmdlines: dict[int, str],
               progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Write the capture as ftrace text; returns ``{file, events, bytes}``."""
    tables, missed = decode_all(header, per_cpu)
    total = sum(len(cols["ts"]) for _f, cols in tables)
    cpus = len({c for _f, cols in tables for c in np.unique(cols["cpu"]).tolist()})
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for line in header_lines(header, run_id, total, cpus, tick_hz, missed):
            f.write(line + "\n")
        for _ev, line in text_events(tables, to_ns_function(header, tick_hz), cmdlines):
            f.write(line + "\n")
            n += 1
            if progress is not None and n % 50_000 == 0:
                progress(n, total)
    if progress is not None:
        progress(n, total)
    return {"file": str(path), "events": n, "bytes": path.stat().st_size}
