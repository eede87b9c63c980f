"""Decode binary ring-buffer pages (``per_cpu/cpuN/trace_pipe_raw``) with numpy.

Layout (kernel/trace/ring_buffer.c, include/linux/ring_buffer.h; described again by
``events/header_page`` and ``events/header_event`` on the running kernel):

- a page (sub-buffer) starts with ``u64 timestamp`` and ``local_t commit`` (bytes of event
  data in the page); ring_buffer_read_page() sets bit 31 of commit when events were lost
  before this page (RB_MISSED_EVENTS) and bit 30 when their count is stored as an
  ``unsigned long`` right after the data (RB_MISSED_STORED);
- events follow, 4-byte aligned, each with a 32-bit header ``type_len:5, time_delta:27``:
  type_len 1..28 = data of type_len*4 bytes after the header; 0 = length in the next word
  (which counts itself), data after it; 29 = padding (time_delta 0: rest of the page,
  else a discarded event of 4 + array[0] bytes, whose delta the kernel's reader ignores,
  rb_update_read_stamp()); 30 = time extend, delta = array[0] << 27 | time_delta;
  31 = absolute time stamp (bits 0..58; upper bits from the running stamp, rb_fix_abs_ts()).

Instead of walking one event at a time in Python, every 4-byte word of every page gets the
index of the word following "an event starting here"; the real event chain of all pages of
a chunk is then followed in lock-step, one vectorised step per event position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from irqlab.trace.formats import EventFormat, Field, PageHeader

TYPE_PADDING, TYPE_TIME_EXTEND, TYPE_TIME_STAMP = 29, 30, 31
RB_MISSED_EVENTS = 1 << 31
RB_MISSED_STORED = 1 << 30
_COMMIT_MASK = RB_MISSED_STORED - 1
_TS_SHIFT = 27
_ABS_TS_MASK = (1 << 59) - 1

_CHUNK_PAGES = 8192          # 32 MiB of 4 KiB pages per vectorised pass


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

    def column(self, fmt: EventFormat, name: str, idx: np.ndarray) -> np.ndarray:
        """One field of the events ``idx`` (ints as their signed/unsigned width; char[]
        as fixed-width bytes ``S<n>``; __data_loc strings as Python str objects)."""
        return read_field(self.buf, self.off[idx], fmt.f(name))


def read_field(buf: np.ndarray, off: np.ndarray, f: Field) -> np.ndarray:
    if f.data_loc:
        loc = _gather(buf, off + f.offset, 4).view("<u4").ravel()
        starts, lens = off + (loc & 0xFFFF), loc >> 16
        return np.array([bytes(buf[s:s + n]).split(b"\0", 1)[0].decode("utf-8", "replace")
                         for s, n in zip(starts.tolist(), lens.tolist())], dtype=object)
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


def _gather(buf: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """(n, size) uint8 array of buf[start:start+size] for each start."""
    idx = starts.astype(np.int64)[:, None] + np.arange(size, dtype=np.int64)
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


def _parse_chunk(pages: np.ndarray, hdr: PageHeader):
    n, psz = pages.shape
    page_ts = np.ascontiguousarray(pages[:, hdr.ts_offset:hdr.ts_offset + 8]).view("<u8").ravel()
    commit = np.ascontiguousarray(
        pages[:, hdr.commit_offset:hdr.commit_offset + 8]).view("<u8").ravel()
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
    words = np.ascontiguousarray(pages[:, hdr.data_offset:hdr.data_offset + nwords * 4]
                                 ).view("<u4")
    # array[0] of an event starting at each word (0 past the end of the page).
    arr0 = np.zeros_like(words)
    arr0[:, :-1] = words[:, 1:]
    # int32 throughout: these arrays cover every word of every page, so width is time.
    tl = (words & 31).astype(np.int32)
    nonzero_delta = words > 31
    nxt = tl + 1                                             # 1..28: data words
    var = (tl == 0) | ((tl == TYPE_PADDING) & nonzero_delta)  # length in array[0]
    nxt[var] = 1 + (np.minimum(arr0[var], 4 * nwords).astype(np.int32) + 3) // 4
    nxt[tl >= TYPE_TIME_EXTEND] = 2
    nxt[(tl == TYPE_PADDING) & ~nonzero_delta] = nwords       # end of page
    nxt += np.arange(nwords, dtype=np.int32)
    np.minimum(nxt, nwords, out=nxt)
    limit = used // 4
    # Follow each page's chain in lock-step: position k of every page at once.
    pos_pages, pos_words = [], []
    cur = np.zeros(n, np.int32)
    live = np.flatnonzero(cur < limit)
    while len(live):
        c = cur[live]
        pos_pages.append(live)
        pos_words.append(c)
        cur[live] = nxt[live, c]
        live = live[cur[live] < limit[live]]
    if not pos_pages:
        return (np.empty(0, np.uint64), np.empty(0, np.uint16), np.empty(0, np.int64), miss)
    pp = np.concatenate(pos_pages).astype(np.int64)
    pw = np.concatenate(pos_words).astype(np.int64)
    order = np.argsort(pp * nwords + pw, kind="stable")
    pp, pw = pp[order], pw[order]
    etl = tl[pp, pw].astype(np.int64)
    edelta = (words[pp, pw] >> 5).astype(np.int64)
    ea0 = arr0[pp, pw].astype(np.int64)
    # Time: page stamp + running sum of deltas (data events and extends count, padding
    # does not); absolute stamps restart the sum (handled page by page, they are rare).
    contrib = np.where(etl <= 28, edelta, 0)
    contrib = np.where(etl == TYPE_TIME_EXTEND, (ea0 << _TS_SHIFT) + edelta, contrib)
    csum = np.cumsum(contrib)
    starts = np.searchsorted(pp, np.arange(n), side="left")
    before = np.where(starts > 0, csum[np.maximum(starts - 1, 0)], 0)
    ts = page_ts[pp].astype(np.int64) + csum - before[pp]
    abs_idx = np.flatnonzero(etl == TYPE_TIME_STAMP)
    if len(abs_idx):
        ts = _fix_absolute(ts, pp, etl, edelta, ea0, contrib, abs_idx)
    is_data = etl <= 28
    payload = (pp * psz + hdr.data_offset + 4 * (pw + 1) + np.where(etl == 0, 4, 0))
    payload = payload[is_data]
    ety = pages.reshape(-1)[payload].astype(np.uint16) | (
        pages.reshape(-1)[payload + 1].astype(np.uint16) << 8)
    return ts[is_data].astype(np.uint64), ety, payload.astype(np.int64), miss


def _fix_absolute(ts, pp, etl, edelta, ea0, contrib, abs_idx):
    """Recompute the pages holding absolute stamps event by event."""
    ts = ts.copy()
    for page in np.unique(pp[abs_idx]).tolist():
        sel = np.flatnonzero(pp == page)
        now = int(ts[sel[0]] - contrib[sel[0]])      # the page stamp
        for i in sel.tolist():
            if etl[i] == TYPE_TIME_STAMP:
                stamp = (int(ea0[i]) << _TS_SHIFT) | int(edelta[i])
                now = (now & ~_ABS_TS_MASK) | (stamp & _ABS_TS_MASK)
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
