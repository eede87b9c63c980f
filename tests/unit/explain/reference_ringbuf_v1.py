"""Frozen copy of irqlab/trace/ringbuf.py (and explain/load.py's
tables_from_events) as of commit 3986262, before the speed-ups: the
reference the fast paths must match element by element
(test_fast_paths_match_reference.py). Never edit it to follow the module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from irqlab.explain.load import Table
from irqlab.trace.formats import EventFormat, Field, PageHeader

TYPE_PADDING, TYPE_TIME_EXTEND, TYPE_TIME_STAMP = 29, 30, 31
RB_MISSED_EVENTS = 1 << 31
RB_MISSED_STORED = 1 << 30
_COMMIT_MASK = RB_MISSED_STORED - 1
_TS_SHIFT = 27
_ABS_TS_MASK = (1 << 59) - 1

_CHUNK_PAGES = 16384         # 64 MiB of 4 KiB pages per vectorised pass


@dataclass
class Events:
    """Decoded events of one or more CPUs: columns, plus the bytes their payloads sit in."""

    buf: np.ndarray                         # uint8, all pages
    ts: np.ndarray                          # uint64 trace-clock time
    cpu: np.ndarray                         # uint16
    etype: np.ndarray                       # uint16 common_type (event id)
    off: np.ndarray                         # int64 payload offset in buf
    missed: list[tuple[int, int, int]] = field(default_factory=list)  # (cpu, page ts, n|-1)
    pages: int = 0

    def __len__(self) -> int:
        return len(self.ts)

    def select(self, fmt: EventFormat) -> np.ndarray:
        """Indices of the events of one type, in time order."""
        return np.flatnonzero(self.etype == fmt.id)

    def by_type(self) -> dict[int, np.ndarray]:
        """{event id: indices of its events, in time order}: one stable sort of the 16-bit
        types (a radix sort in numpy) instead of a full scan per event type."""
        order = np.argsort(self.etype, kind="stable")
        kinds = self.etype[order]
        starts = np.flatnonzero(np.r_[True, kinds[1:] != kinds[:-1]]) if len(kinds) else \
            np.empty(0, np.int64)
        kinds = kinds[starts]
        ends = np.append(starts[1:], len(order))
        return {int(k): order[a:b]
                for k, a, b in zip(kinds.tolist(), starts.tolist(), ends.tolist())}

    def column(self, fmt: EventFormat, name: str, idx: np.ndarray) -> np.ndarray:
        """One field of the events ``idx`` (ints as their signed/unsigned width; char[]
        as fixed-width bytes ``S<n>``; __data_loc strings as unicode ``U<n>``)."""
        return read_field(self.buf, self.off[idx], fmt.f(name))


def read_field(buf: np.ndarray, off: np.ndarray, f: Field) -> np.ndarray:
    if f.data_loc:
        # __data_loc: u32 (length << 16 | offset in the record); the string runs to its NUL.
        loc = _gather(buf, off + f.offset, 4).view("<u4").ravel()
        starts, lens = off + (loc & 0xFFFF), (loc >> 16).astype(np.int64)
        return _strings(buf, starts, lens)
    if f.is_string and f.size == 0:
        # char buf[] (ftrace:print): runs to its NUL; markers are short, 256 B bound.
        raw = _gather(buf, np.minimum(off + f.offset, len(buf) - 256), 256)
        return np.array([bytes(r).split(b"\0", 1)[0].rstrip(b"\n") for r in raw],
                        dtype=object)
    raw = _gather(buf, off + f.offset, f.size)
    if f.is_string:
        return raw.view(f"S{f.size}").ravel()
    if f.size in (1, 2, 4, 8):
        kind = "i" if f.signed else "u"
        return raw.view(f"<{kind}{f.size}").ravel()
    return raw


def _strings(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """buf[start:start+len] up to a NUL, as a numpy unicode array (elements are str): the
    distinct values are few (irq handler names), so gather fixed-width bytes and decode
    each distinct one once; a fixed-width array also sorts and compares vectorised."""
    if not len(starts):
        return np.empty(0, dtype="U1")
    width = int(min(max(1, lens.max()), 4096))
    raw = _gather(buf, np.minimum(starts, len(buf) - width), width)
    raw[np.arange(width) >= lens[:, None]] = 0
    fixed = raw.view(f"S{width}").ravel()
    uniq, inv = np.unique(fixed, return_inverse=True)
    text = np.array([u.split(b"\0", 1)[0].decode("utf-8", "replace") for u in uniq.tolist()])
    return text[inv.ravel()]


def _gather(buf: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """(n, size) uint8 array of buf[start:start+size] for each start."""
    starts = starts.astype(np.int64)
    if size % 4 == 0 and len(buf) % 4 == 0 and not np.any(starts & 3):
        # Whole aligned words (ring-buffer payloads and most fields are 4-byte aligned):
        # a quarter of the index operations of a byte gather.
        words = buf.view("<u4")
        idx = (starts >> 2)[:, None] + np.arange(size // 4, dtype=np.int64)
        return np.ascontiguousarray(words[idx]).view(np.uint8).reshape(len(starts), size)
    idx = starts[:, None] + np.arange(size, dtype=np.int64)
    return np.ascontiguousarray(buf[idx])


def parse_pages(data: bytes | np.ndarray, cpu: int, hdr: PageHeader,
                base: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                        list[tuple[int, int, int]], int]:
    """Decode whole pages of one CPU.

    Returns (ts, etype, payload offsets + base, missed list, page count); offsets index
    ``data`` (shifted by ``base`` so several CPUs can share one buffer).
    """
    buf = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data
    psz = hdr.page_size
    npages = len(buf) // psz
    out_ts, out_ty, out_off = [], [], []
    missed: list[tuple[int, int, int]] = []
    for first in range(0, npages, _CHUNK_PAGES):
        n = min(_CHUNK_PAGES, npages - first)
        pages = buf[first * psz:(first + n) * psz].reshape(n, psz)
        ts, ty, off, miss = _parse_chunk(pages, hdr)
        out_ts.append(ts)
        out_ty.append(ty)
        out_off.append(off + (first * psz + base))
        missed += [(cpu, t, c) for t, c in miss]
    if not out_ts:
        e = np.empty(0, np.uint64)
        return e, np.empty(0, np.uint16), np.empty(0, np.int64), missed, 0
    return (np.concatenate(out_ts), np.concatenate(out_ty), np.concatenate(out_off),
            missed, npages)


def _parse_chunk(pages: np.ndarray, hdr: PageHeader
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Decode ``n`` whole pages: (ts, event type, payload offset in ``pages``, missed)."""
    n, psz = pages.shape
    page_ts = np.ascontiguousarray(pages[:, hdr.ts_offset:hdr.ts_offset + 8]).view("<u8").ravel()
    commit = np.ascontiguousarray(
        pages[:, hdr.commit_offset:hdr.commit_offset + 8]).view("<u8").ravel()
    # ``commit`` counts the bytes of event data the reader handed out: the whole page when
    # ring_buffer_read_page() swapped it out (real_end when the writer padded the end), or
    # only the events copied out of a page the writer was still filling (a partial read;
    # the next read copies the following events into a new page whose stamp is the
    # reader's read_stamp, so nothing is read twice). Bits 30/31 are the missed-events
    # flags (kernel/trace/ring_buffer.c, ring_buffer_read_page()).
    used = (commit & _COMMIT_MASK).astype(np.int64)
    used = np.minimum(used, hdr.data_size)
    miss = []
    for p in np.flatnonzero(commit & RB_MISSED_EVENTS).tolist():
        count = -1
        if commit[p] & RB_MISSED_STORED and used[p] + 8 <= hdr.data_size:
            at = hdr.data_offset + int(used[p])
            count = int(pages[p, at:at + 8].view("<u8")[0])
        miss.append((int(page_ts[p]), count))
    nwords = hdr.data_size // 4
    if hdr.data_offset % 4 == 0 and psz % 4 == 0:
        # A view, no copy: the data words of every page (events are 4-byte aligned).
        words = pages.view("<u4")[:, hdr.data_offset // 4:hdr.data_offset // 4 + nwords]
    else:
        words = np.ascontiguousarray(
            pages[:, hdr.data_offset:hdr.data_offset + nwords * 4]).view("<u4")
    limit = (used // 4).astype(np.int32)
    # Follow every page's event chain in lock-step: step k reads the k-th record header
    # of all pages that still have one, so the work is per record, not per word.
    step_pages, step_words, step_hdr, step_a0 = [], [], [], []
    cur = np.zeros(n, np.int32)
    live = np.flatnonzero(limit > 0).astype(np.int32)
    last = nwords - 1
    while len(live):
        c = cur[live]
        w = words[live, c]
        a0 = words[live, np.minimum(c + 1, last)]    # array[0] (length, extend, stamp)
        tl = w & 31
        length = tl + 1                                  # 1..28: header + tl data words
        var = (tl == 0) | ((tl == TYPE_PADDING) & (w > 31))
        # type_len 0 and discarded events: array[0] bytes follow the header
        # (rb_event_length(): array[0] + RB_EVNT_HDR_SIZE; for data it counts itself).
        length = np.where(var, 1 + (np.minimum(a0, 4 * nwords) + 3) // 4, length)
        length = np.where(tl >= TYPE_TIME_EXTEND, 2, length)
        # Padding with a zero delta is the null event: the rest of the page is empty.
        end = (tl == TYPE_PADDING) & (w <= 31)
        step_pages.append(live)
        step_words.append(c)
        step_hdr.append(w)
        step_a0.append(a0)
        nxt = c + length.astype(np.int32)
        nxt[end] = nwords
        cur[live] = nxt
        live = live[nxt < limit[live]]
    if not step_pages:
        return (np.empty(0, np.uint64), np.empty(0, np.uint16), np.empty(0, np.int64), miss)
    # Records in file order (page, then position): step k of page p goes to slot
    # first[p] + k; pages appear in every step up to their last record, in page order.
    per_page = np.zeros(n, np.int64)
    for live in step_pages:
        per_page[live] += 1
    first = np.concatenate(([0], np.cumsum(per_page)[:-1]))
    total = int(per_page.sum())
    pp = np.empty(total, np.int64)
    pw = np.empty(total, np.int64)
    hw = np.empty(total, np.uint32)
    a0 = np.empty(total, np.uint32)
    for k, live in enumerate(step_pages):
        at = first[live] + k
        pp[at] = live
        pw[at] = step_words[k]
        hw[at] = step_hdr[k]
        a0[at] = step_a0[k]
    etl = (hw & 31).astype(np.int64)
    edelta = (hw >> 5).astype(np.int64)
    ea0 = a0.astype(np.int64)
    ts = _timestamps(page_ts, first, per_page, pp, etl, edelta, ea0)
    is_data = etl <= 28
    payload = pp * psz + hdr.data_offset + 4 * (pw + 1) + np.where(etl == 0, 4, 0)
    payload = payload[is_data]
    flat = pages.reshape(-1)
    ety = flat[payload].astype(np.uint16) | (flat[payload + 1].astype(np.uint16) << 8)
    return ts[is_data].astype(np.uint64), ety, payload.astype(np.int64), miss


def _timestamps(page_ts: np.ndarray, first: np.ndarray, per_page: np.ndarray,
                pp: np.ndarray, etl: np.ndarray, edelta: np.ndarray,
                ea0: np.ndarray) -> np.ndarray:
    """Time of every record, as the kernel's reader computes it (rb_update_read_stamp()).

    The running stamp starts at the page stamp; data records add their delta, a time
    extend adds ``array[0] << 27 | delta``, padding adds nothing, and an absolute stamp
    (type 31) replaces the running stamp: its 59 bits, the upper bits kept from the
    running stamp (rb_fix_abs_ts()). Vectorised: every record belongs to the group of the
    last "base" at or before it (its page start, or an absolute stamp); its time is the
    base value plus the deltas summed since the base.
    """
    contrib = np.where(etl <= 28, edelta, 0)
    contrib = np.where(etl == TYPE_TIME_EXTEND, (ea0 << _TS_SHIFT) + edelta, contrib)
    csum = np.cumsum(contrib)
    before = csum - contrib                       # sum of the records before each one
    idx = np.arange(len(etl), dtype=np.int64)
    is_abs = etl == TYPE_TIME_STAMP
    is_first = np.zeros(len(etl), bool)
    is_first[first[per_page > 0]] = True
    base_at = np.maximum.accumulate(np.where(is_first | is_abs, idx, 0))
    base_val = page_ts[pp].astype(np.int64)
    if is_abs.any():
        stamp = (ea0 << _TS_SHIFT) | edelta
        if np.any(page_ts.astype(np.uint64) >= np.uint64(1 << 59)):
            return _timestamps_slow(page_ts, first, per_page, pp, etl, contrib, stamp)
        base_val = np.where(is_abs, stamp & _ABS_TS_MASK, base_val)
    return base_val[base_at] + before - before[base_at] + np.where(is_abs, 0, contrib)


def _timestamps_slow(page_ts: np.ndarray, first: np.ndarray, per_page: np.ndarray,
                     pp: np.ndarray, etl: np.ndarray, contrib: np.ndarray,
                     stamp: np.ndarray) -> np.ndarray:
    """Record by record, for stamps using the top 5 bits (never seen on x86-tsc/mono)."""
    ts = np.empty(len(etl), np.int64)
    for page in np.flatnonzero(per_page).tolist():
        lo, hi = int(first[page]), int(first[page] + per_page[page])
        now = int(page_ts[page])
        for i in range(lo, hi):
            if etl[i] == TYPE_TIME_STAMP:
                val = int(stamp[i]) & _ABS_TS_MASK
                msb = now & ~_ABS_TS_MASK
                val |= msb
                if msb and val < now:
                    val += 1 << 59
                now = val
            else:
                now += int(contrib[i])
            ts[i] = now
    return ts


def decode(per_cpu: dict[int, bytes], hdr: PageHeader) -> Events:
    """All CPUs' pages into one time-ordered :class:`Events`."""
    blobs = [(cpu, per_cpu[cpu]) for cpu in sorted(per_cpu)]
    buf = np.frombuffer(b"".join(b for _, b in blobs), np.uint8)
    ts_l, ty_l, off_l, cpu_l, missed = [], [], [], [], []
    base = 0
    pages = 0
    for cpu, blob in blobs:
        ts, ty, off, miss, npg = parse_pages(buf[base:base + len(blob)], cpu, hdr, base)
        ts_l.append(ts)
        ty_l.append(ty)
        off_l.append(off)
        cpu_l.append(np.full(len(ts), cpu, np.uint16))
        missed += miss
        pages += npg
        base += len(blob)
    if not ts_l:
        return Events(buf, np.empty(0, np.uint64), np.empty(0, np.uint16),
                      np.empty(0, np.uint16), np.empty(0, np.int64), missed, 0)
    ts = np.concatenate(ts_l)
    order = np.argsort(ts, kind="stable")
    return Events(buf, ts[order], np.concatenate(cpu_l)[order],
                  np.concatenate(ty_l)[order], np.concatenate(off_l)[order], missed, pages)


# Fields kept per event (name -> the format fields to read); common_pid is always read.
_KEEP: dict[str, tuple[str, ...]] = {
    "sched_switch": ("prev_comm", "prev_pid", "prev_state", "next_comm", "next_pid"),
    "sched_waking": ("pid", "target_cpu"),
    "sched_wakeup": ("pid", "target_cpu"),
    "irq_handler_entry": ("irq", "name"),
    "irq_handler_exit": ("irq",),
    "softirq_entry": ("vec",),
    "softirq_exit": ("vec",),
    "hrtimer_start": ("hrtimer", "function", "expires"),
    "hrtimer_expire_entry": ("hrtimer", "function"),
    "hrtimer_expire_exit": ("hrtimer",),
    "hrtimer_cancel": ("hrtimer",),
    "kvm_msr": ("write", "ecx", "data"),
    "kvm_apic_accept_irq": ("apicid", "vec"),
    "kvm_inj_virq": ("vec", "vector"),       # "vector" on 6.x kernels
    "kvm_entry": ("vcpu_id",),
    "kvm_exit": (),
    "kvm_vcpu_wakeup": (),
    "kvm_userspace_exit": ("reason",),
    "kvm_wait_lapic_expire": ("delta",),
    "kvm_write_tsc_offset": ("previous_tsc_offset", "next_tsc_offset"),
    "print": ("buf",),
}


def tables_from_events(ev: Events, formats: dict[str, EventFormat]) -> dict[str, Table]:
    out: dict[str, Table] = {}
    by_type = ev.by_type()
    for key, fmt in formats.items():
        name = key.split(":", 1)[1]
        keep = _KEEP.get(name)
        if keep is None and not name.endswith(("_entry", "_exit")):
            continue
        idx = by_type.get(fmt.id, np.empty(0, np.int64))
        cols = {"ts": ev.ts[idx], "cpu": ev.cpu[idx],
                "common_pid": ev.column(fmt, "common_pid", idx)}
        for fname in keep or ():
            if fname in fmt.fields:
                cols[fname] = ev.column(fmt, fname, idx)
        out[name] = Table(name, cols)
    return out
