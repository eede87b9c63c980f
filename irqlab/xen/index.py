"""A xentrace file as numpy columns, one row per record (the layout of irqlab.xen.records).

The walk over record headers is sequential (each header gives the next record's offset),
so it is done in C when irqlab/native is built (irq_xen_index, xentrace.c) and by
:func:`irqlab.xen.records.iter_records` otherwise, which stays the reference (the unit
tests compare both). Everything after the walk is whole-array numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irqlab import native
from irqlab.xen.records import TRC_TRACE_CPU_CHANGE, iter_records

HAS_TSC, INHERITED, WINDOW = 1, 2, 4      # flags bits (xentrace.c)


@dataclass
class RecordIndex:
    """Columns of every record: byte offset, CPU, event id, extra words, flags, cycles."""

    data: bytes
    off: np.ndarray         # int64
    cpu: np.ndarray         # int32
    event: np.ndarray       # uint32
    nextra: np.ndarray      # uint8
    flags: np.ndarray       # uint8
    tsc: np.ndarray         # uint64 (0 where no cycle count is known)
    end: int                # where decoding stopped (len(data) unless truncated)

    def __len__(self) -> int:
        return len(self.off)

    @property
    def timed(self) -> np.ndarray:
        """Records with a cycle count, own or inherited (not window headers)."""
        return (self.flags & (HAS_TSC | INHERITED)) != 0

    def extra(self, rows: np.ndarray, k: int) -> np.ndarray:
        """Extra word ``k`` of the records ``rows`` (they must have more than k)."""
        words = np.frombuffer(self.data, dtype="<u4", count=len(self.data) // 4)
        at = (self.off[rows] + 4 + 8 * (self.flags[rows] & HAS_TSC)) // 4 + k
        return words[at].astype(np.uint32)


def index_records(data: bytes) -> RecordIndex:
    """Index ``data`` (a whole xentrace file)."""
    lib = native.lib()
    if lib is not None:
        return _index_native(lib, data)
    return index_records_python(data)


def _index_native(lib, data: bytes) -> RecordIndex:
    buf = np.frombuffer(data, dtype=np.uint8)
    end = np.zeros(1, np.int64)
    # A counting pass first (a tenth of the indexing's time): the columns are then
    # allocated at their size, not at one record per word, and never copied.
    cap = lib.irq_xen_index(native.ptr(buf), len(data), None, None, None, None, None,
                            None, 0, native.ptr(end))
    if cap < 0:
        raise ValueError(f"xentrace index failed ({cap}): a CPU number beyond 4095?")
    off = np.empty(cap, np.int64)
    cpu = np.empty(cap, np.int32)
    event = np.empty(cap, np.uint32)
    nextra = np.empty(cap, np.uint8)
    flags = np.empty(cap, np.uint8)
    tsc = np.empty(cap, np.uint64)
    n = lib.irq_xen_index(native.ptr(buf), len(data), native.ptr(off), native.ptr(cpu),
                          native.ptr(event), native.ptr(nextra), native.ptr(flags),
                          native.ptr(tsc), cap, native.ptr(end))
    if n < 0:
        raise ValueError(f"xentrace index failed ({n}): a CPU number beyond 4095?")
    return RecordIndex(data, off[:n], cpu[:n], event[:n], nextra[:n], flags[:n], tsc[:n],
                       int(end[0]))


def index_records_python(data: bytes) -> RecordIndex:
    """The reference: the same columns from iter_records."""
    rows = []
    end, window_end = 0, -1
    for r in iter_records(data):
        has = r.tsc is not None and not r.tsc_inherited
        # iter_records' own rule for a window header (a look-alike inside a window is
        # data of that window)
        window = (r.event == TRC_TRACE_CPU_CHANGE and not has and len(r.extra) == 2
                  and r.offset >= window_end)
        if window:
            window_end = r.offset + 12 + r.extra[1]
        fl = WINDOW if window else (HAS_TSC if has else (INHERITED if r.tsc_inherited
                                                          else 0))
        rows.append((r.offset, r.cpu, r.event, len(r.extra), fl,
                     0 if (window or r.tsc is None) else r.tsc))
        size = 4 + 8 * has + 4 * len(r.extra)
        end = r.offset + size
    cols = list(zip(*rows)) if rows else [(), (), (), (), (), ()]
    return RecordIndex(data, np.array(cols[0], np.int64), np.array(cols[1], np.int32),
                       np.array(cols[2], np.uint32), np.array(cols[3], np.uint8),
                       np.array(cols[4], np.uint8), np.array(cols[5], np.uint64), end)


# Event classes Xen emits (xen/include/public/trace.h, TRC_GEN .. TRC_GUEST): bits 16-27
# of an event id hold exactly one of them.
XEN_CLASSES = np.array([0x0001, 0x0002, 0x0004, 0x0008, 0x0010, 0x0020, 0x0040, 0x0080,
                        0x0800], np.uint32)
# Share of a CPU's timed records whose cycle count may go back from the one before:
# get_cycles() never goes back on one pCPU, but a capture cut and rejoined by hand, or
# records Xen timestamps late, should not make a real file unreadable.
MAX_BACKWARD_SHARE = 0.01


def check_plausible(idx: RecordIndex) -> None:
    """Raise TraceFormatError unless ``idx`` looks like Xen's records: every event id
    of a Xen trace class and each pCPU's cycle counts in order. Any bytes walk as
    records (each header gives the next offset), so without this random bytes "decode"
    to tens of thousands of records spanning centuries."""
    from irqlab.xen.records import TraceFormatError

    if not len(idx):
        return
    bad = np.flatnonzero(~np.isin(idx.event >> 16, XEN_CLASSES))
    if len(bad):
        row = int(bad[0])
        raise TraceFormatError(
            f"{len(bad):,} of {len(idx):,} records have an event id of no Xen trace class, "
            f"the first {int(idx.event[row]):#09x} at offset {int(idx.off[row])}")
    timed = np.flatnonzero((idx.flags & HAS_TSC) != 0)
    if len(timed) < 2:
        return
    order = timed[np.argsort(idx.cpu[timed], kind="stable")]
    same_cpu = idx.cpu[order][1:] == idx.cpu[order][:-1]
    backwards = int((same_cpu & (idx.tsc[order][1:] < idx.tsc[order][:-1])).sum())
    if backwards > MAX_BACKWARD_SHARE * len(timed):
        raise TraceFormatError(f"cycle counts go back at {backwards:,} of {len(timed):,} "
                               f"timed records of one pCPU")
