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

Instead of walking one event at a time in Python, the record chains of all pages of a
chunk are followed in lock-step (one vectorised step per record position, reading only
record headers), and timestamps are running sums restarted at each page and absolute stamp.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from irqlab.trace import fastpath
from irqlab.trace.formats import EventFormat, Field, PageHeader

TYPE_PADDING, TYPE_TIME_EXTEND, TYPE_TIME_STAMP = 29, 30, 31
RB_MISSED_EVENTS = 1 << 31
RB_MISSED_STORED = 1 << 30
_COMMIT_MASK = RB_MISSED_STORED - 1
_TS_SHIFT = 27
_ABS_TS_MASK = (1 << 59) - 1

_CHUNK_PAGES = 4096          # 16 MiB of 4 KiB pages per vectorised pass: temporaries small
                             # enough to be reused chunk after chunk (fresh memory is slow)


_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_GLIBC_TRIM_DEFAULT, _GLIBC_MMAP_MAX_DEFAULT = 128 * 1024, 65536
_heap_lock = threading.Lock()
_heap_depth = 0


def _mallopt() -> object | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return fn


@contextlib.contextmanager
def heap_reuse() -> Iterator[None]:
    """Within: large numpy temporaries come from (and go back to) glibc's heap instead of
    a fresh mmap each (glibc maps blocks over 128 KiB-32 MiB and unmaps them on free), so
    the many GiB of short-lived arrays of decoding and attribution reuse memory already
    faulted in rather than faulting in and zeroing fresh pages for every new array (THP
    is madvise-only here: numpy asks for huge pages on large arrays, 1.8 GB of a 1 GiB
    decode's were, but each is still zeroed). On exit glibc's defaults are restored;
    the heap is trimmed by the next free past the default threshold. A no-op where
    mallopt is missing (non-glibc)."""
    global _heap_depth
    fn = _mallopt()
    with _heap_lock:
        _heap_depth += 1
        if _heap_depth == 1 and fn is not None:
            fn(_M_MMAP_MAX, 0)
            fn(_M_TRIM_THRESHOLD, -1)            # (size_t)-1: never trim
    try:
        yield
    finally:
        with _heap_lock:
            _heap_depth -= 1
            if _heap_depth == 0 and fn is not None:
                fn(_M_MMAP_MAX, _GLIBC_MMAP_MAX_DEFAULT)
                fn(_M_TRIM_THRESHOLD, _GLIBC_TRIM_DEFAULT)


_pages_lock = threading.Lock()
_pages_depth = 0
_pages_before = True


def _madvise_hugepage() -> object | None:
    """numpy's switch for madvise(MADV_HUGEPAGE) on its large arrays (private API, numpy
    >= 1.20; None where missing)."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            mod = __import__(name, fromlist=["_set_madvise_hugepage"])
        except ImportError:
            continue
        fn = getattr(mod, "_set_madvise_hugepage", None)
        if fn is not None:
            return fn
    return None


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """Within: numpy asks for no transparent huge pages on its large arrays.

    Decoding writes ~1 GB of new tables per GiB of pages front to back. With THP set to
    madvise, numpy's madvise makes each first touch a 2 MiB fault that zeroes the whole
    huge page and, with defrag=madvise (this kernel's default), may compact memory
    synchronously first. Rounds of `irqlab bench trace`'s input alone, 4 pairs on this
    VM (nested virtualisation: the host backs each first touch): decode 1.55-2.18 s with
    huge pages, 0.99-1.09 s without; the kernel time of a round 1.5-2.5 s against
    0.6-0.8 s (docs/figures.md). Attribution, which walks its arrays at random, was no
    faster on small pages (the whole round without them: set-up 1.58-2.11 s against
    1.38-1.60 s), so only decoding is wrapped."""
    global _pages_depth, _pages_before
    fn = _madvise_hugepage()
    with _pages_lock:
        _pages_depth += 1
        if _pages_depth == 1 and fn is not None:
            _pages_before = bool(fn(False))
    try:
        yield
    finally:
        with _pages_lock:
            _pages_depth -= 1
            if _pages_depth == 0 and fn is not None:
                fn(_pages_before)


class Coded:
    """A string column held as each row's code into its distinct values: the column is
    ``values[codes]``, built only when a reader asks for it (:class:`Columns`)."""

    __slots__ = ("codes", "values")

    def __init__(self, codes: np.ndarray, values: np.ndarray) -> None:
        self.codes, self.values = codes, values

    def build(self) -> np.ndarray:
        return self.values[self.codes]


class Columns(dict):
    """A table's columns by name, in order. A column stored as :class:`Coded` is built on
    its first read (and kept), so a reader of its codes alone (:meth:`coded`: explain's
    IRQ labels) never makes the per-row strings, e.g. 165 MB of unicode for 3.2 M irq
    handler names. Every read path builds it: ``[]``, ``get``, ``values``, ``items``,
    ``copy``, ``pop`` and (through a Python ``__iter__``) ``dict(c)`` and ``{**c}``."""

    def __getitem__(self, key: str) -> np.ndarray:
        val = dict.__getitem__(self, key)
        if isinstance(val, Coded):
            val = val.build()
            dict.__setitem__(self, key, val)        # same position: the order is kept
        return val

    def coded(self, key: str) -> Coded | None:
        """The column's codes and distinct values, when it was given that way and not
        read as strings yet."""
        val = dict.get(self, key)
        return val if isinstance(val, Coded) else None

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def __iter__(self):
        return iter(list(dict.keys(self)))

    def values(self):
        return [self[k] for k in dict.keys(self)]

    def items(self):
        return [(k, self[k]) for k in dict.keys(self)]

    def copy(self) -> dict:
        return {k: self[k] for k in dict.keys(self)}

    def pop(self, key: str, *default):
        if key in self:
            val = self[key]
            dict.pop(self, key)
            return val
        return dict.pop(self, key, *default)


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

    def columns(self, fmt: EventFormat, names: list[str] | tuple[str, ...],
                idx: np.ndarray) -> dict[str, np.ndarray]:
        """Several fields of the events ``idx`` (as :meth:`column`), their payload offsets
        gathered and checked for alignment once."""
        fields = [fmt.f(name) for name in names]
        out: dict[str, np.ndarray] = {}
        off = self.off[idx]
        aligned = _aligned(self.buf, off)
        words = [f for f in fields if aligned and not f.data_loc and f.offset % 4 == 0
                 and f.size > 0 and f.size % 4 == 0 and (f.is_string or f.size in (4, 8))]
        if len(words) > 1 and len(off):
            # The words of all these fields, one row per record: each record's cache
            # lines are read once (a gather per field re-reads them from memory).
            lo = min(f.offset for f in words) // 4
            width = max(f.offset + f.size for f in words) // 4 - lo
            wbuf = self.buf.view("<u4")
            first = (off >> 2) + lo
            if int(first.max()) <= len(wbuf) - width and int(first.min()) >= 0:
                rows = np.lib.stride_tricks.sliding_window_view(wbuf, width)[first]
                for f in words:
                    out[f.name] = _from_words(rows[:, f.offset // 4 - lo:
                                                   (f.offset + f.size) // 4 - lo], f)
        for f in fields:
            if f.name not in out:
                out[f.name] = read_field(self.buf, off, f, aligned)
        return {name: out[name] for name in names}


def _aligned(buf: np.ndarray, off: np.ndarray) -> bool:
    """Every payload offset (and the buffer) 4-byte aligned: fields can be read as words."""
    return len(buf) % 4 == 0 and not (len(off) and np.bitwise_or.reduce(off & 3))


def read_field(buf: np.ndarray, off: np.ndarray, f: Field,
               aligned: bool | None = None) -> np.ndarray:
    if aligned is None:
        aligned = _aligned(buf, off)
    if f.data_loc:
        # __data_loc: u32 (length << 16 | offset in the record); the string runs to its NUL.
        fast = fastpath.data_loc_strings(buf, off, f.offset)
        if fast is not None:
            return fast
        if aligned and f.offset % 4 == 0:
            loc = _word_columns(buf, off, f.offset, 1).ravel()
        else:
            loc = _gather(buf, off + f.offset, 4).view("<u4").ravel()
        starts, lens = off + (loc & 0xFFFF), (loc >> 16).astype(np.int64)
        return _strings(buf, starts, lens)
    if f.is_string and f.size == 0:
        # char buf[] (ftrace:print): runs to its NUL; markers are short, 256 B bound.
        raw = _gather(buf, np.minimum(off + f.offset, len(buf) - 256), 256)
        return np.array([bytes(r).split(b"\0", 1)[0].rstrip(b"\n") for r in raw],
                        dtype=object)
    if aligned and f.offset % 4 == 0 and f.size % 4 == 0 and (f.is_string or f.size in (4, 8)):
        return _from_words(_word_columns(buf, off, f.offset, f.size // 4), f)
    return _from_bytes(_gather(buf, off + f.offset, f.size), f)


def _from_bytes(raw: np.ndarray, f: Field) -> np.ndarray:
    """A fixed-size field from its (n, size) bytes, as :func:`read_field` gives it."""
    if f.is_string:
        return raw.view(f"S{f.size}").ravel()
    if f.size in (1, 2, 4, 8):
        kind = "i" if f.signed else "u"
        return raw.view(f"<{kind}{f.size}").ravel()
    return raw


def _from_words(words: np.ndarray, f: Field) -> np.ndarray:
    """A field from its (n, size/4) little-endian words, as :func:`read_field` gives it."""
    if f.is_string:
        return np.ascontiguousarray(words).view(f"S{f.size}").ravel()
    if f.size == 4:
        return np.ascontiguousarray(words[:, 0]).view("<i4" if f.signed else "<u4")
    val = words[:, 0].astype(np.uint64) | (words[:, 1].astype(np.uint64) << 32)
    return val.view("<i8") if f.signed else val


def _word_columns(buf: np.ndarray, off: np.ndarray, at: int, nwords: int) -> np.ndarray:
    """(n, nwords) little-endian u32 words of each record from byte ``at`` (the same bytes
    as :func:`_gather`; offsets, ``at`` and the buffer 4-byte aligned), one 1-D take per
    word instead of a 2-D index array."""
    words = buf.view("<u4")
    first = (off >> 2) + at // 4
    if nwords == 1:
        return words[first].reshape(-1, 1)
    out = np.empty((len(off), nwords), np.uint32)
    for k in range(nwords):
        out[:, k] = words[first + k]
    return out


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Distinct rows of an (n, k) uint64 array: (index of one row of each, code of every
    row), via a 64-bit multiplicative hash of each row (one np.unique on n integers, not on
    n rows), then checked row by row; None on a hash collision (caller falls back)."""
    h = rows[:, 0].copy()
    for k in range(1, rows.shape[1]):
        h *= np.uint64(0x9E3779B97F4A7C15)
        h ^= rows[:, k]
    _, rep, inv = np.unique(h, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if np.array_equal(rows[rep][inv], rows):
        return rep, inv
    return None


def _strings(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """buf[start:start+len] up to a NUL, as a numpy unicode array (elements are str): the
    distinct values are few (irq handler names), so gather fixed-width bytes and decode
    each distinct one once; a fixed-width array also sorts and compares vectorised."""
    if not len(starts):
        return np.empty(0, dtype="U1")
    width = int(min(max(1, lens.max()), 4096))
    wide = -(-width // 8) * 8
    found = _strings_c(buf, starts, lens, width, wide)
    if found is not None:
        return found
    if len(buf) % 4 == 0 and wide <= 64 and int(starts.max()) <= len(buf) - wide and \
            not np.bitwise_or.reduce(starts & 3):
        # Whole words (the same bytes: no start is clamped), bytes past each length
        # zeroed, distinct rows found by a 64-bit hash and then checked row by row.
        raw = _word_columns(buf, starts, 0, wide // 4).view(np.uint8)
        raw[np.arange(wide) >= np.minimum(lens, width)[:, None]] = 0
        keys = raw.view("<u8")
        found = unique_rows(keys)
        if found is not None:
            rep, inv = found
            text = np.array([bytes(keys[r].view(np.uint8)[:width]).split(b"\0", 1)[0]
                             .decode("utf-8", "replace") for r in rep.tolist()])
            return text[inv]
    raw = _gather(buf, np.minimum(starts, len(buf) - width), width)
    raw[np.arange(width) >= lens[:, None]] = 0
    fixed = raw.view(f"S{width}").ravel()
    uniq, inv = np.unique(fixed, return_inverse=True)
    text = np.array([u.split(b"\0", 1)[0].decode("utf-8", "replace") for u in uniq.tolist()])
    return text[inv.ravel()]


def _strings_c(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, width: int,
               wide: int) -> np.ndarray | None:
    """:func:`_strings` by the C fast path (irqlab/native/explain.c): each string's
    bytes zero-padded to ``wide`` (as the word path zeroes them), distinct rows by an
    exact hash table, each distinct one decoded once (None: no library, or a string
    past the buffer, which the numpy path clamps)."""
    raw = fastpath.string_rows(buf, starts, np.minimum(lens, width), wide)
    found = fastpath.factorize_rows(raw.view("<u8")) if raw is not None else None
    if found is None:
        return None
    rep, inv = found
    text = np.array([bytes(raw[r, :width]).split(b"\0", 1)[0].decode("utf-8", "replace")
                     for r in rep.tolist()])
    return text[inv]


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
    out_ts, out_ty, out_off, missed, npages = _parse_pages_chunks(data, cpu, hdr, base)
    if not out_ts:
        e = np.empty(0, np.uint64)
        return e, np.empty(0, np.uint16), np.empty(0, np.int64), missed, 0
    return (np.concatenate(out_ts), np.concatenate(out_ty), np.concatenate(out_off),
            missed, npages)


def _parse_pages_chunks(data: bytes | np.ndarray, cpu: int, hdr: PageHeader, base: int
                        ) -> tuple[list, list, list, list[tuple[int, int, int]], int]:
    """:func:`parse_pages` as per-chunk pieces (not concatenated)."""
    buf = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data
    psz = hdr.page_size
    npages = len(buf) // psz
    out_ts, out_ty, out_off = [], [], []
    missed: list[tuple[int, int, int]] = []
    for first in range(0, npages, _CHUNK_PAGES):
        n = min(_CHUNK_PAGES, npages - first)
        pages = buf[first * psz:(first + n) * psz].reshape(n, psz)
        ts, ty, off, miss = _parse_chunk(pages, hdr)
        off += first * psz + base
        out_ts.append(ts)
        out_ty.append(ty)
        out_off.append(off)
        missed += [(cpu, t, c) for t, c in miss]
    return out_ts, out_ty, out_off, missed, npages


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
        # A view, no copy: all words of the chunk; word j of page p's data is at
        # p * stride + first + j (events are 4-byte aligned).
        flat = pages.reshape(-1).view("<u4")
        stride, first_word = psz // 4, hdr.data_offset // 4
    else:
        flat = np.ascontiguousarray(
            pages[:, hdr.data_offset:hdr.data_offset + nwords * 4]).view("<u4").reshape(-1)
        stride, first_word = nwords, 0
    limit = (used // 4).astype(np.int32)
    # Follow every page's event chain in lock-step: step k reads the k-th record header
    # of all pages that still have one, so the work is per record, not per word. Reads
    # are 1-D takes of the flat word array (cheaper than 2-D fancy indexing).
    step_pages, step_words = [], []
    cur = np.zeros(n, np.int64)
    live = np.flatnonzero(limit > 0)
    row = live * stride + first_word                  # word 0 of each live page's data
    last = nwords - 1
    while len(live):
        c = cur[live]
        w = flat.take(row + c)
        tl = w & 31
        length = (tl + 1).astype(np.int64)               # 1..28: header + tl data words
        # type_len 0 and discarded events: array[0] bytes follow the header
        # (rb_event_length(): array[0] + RB_EVNT_HDR_SIZE; for data it counts itself).
        var = np.flatnonzero((tl == 0) | ((tl == TYPE_PADDING) & (w > 31)))
        if len(var):
            a0 = flat.take(row[var] + np.minimum(c[var] + 1, last))
            length[var] = 1 + (np.minimum(a0, 4 * nwords) + 3) // 4
        length[tl >= TYPE_TIME_EXTEND] = 2
        step_pages.append(live)
        step_words.append(c)
        nxt = c + length
        # Padding with a zero delta is the null event: the rest of the page is empty.
        nxt[(tl == TYPE_PADDING) & (w <= 31)] = nwords
        cur[live] = nxt
        more = nxt < limit[live]
        live, row = live[more], row[more]
    if not step_pages:
        return (np.empty(0, np.uint64), np.empty(0, np.uint16), np.empty(0, np.int64), miss)
    # Records in file order (page, then position): step k of page p goes to slot
    # first[p] + k; pages appear in every step up to their last record, in page order.
    steps = np.repeat(np.arange(len(step_pages)), [len(x) for x in step_pages])
    all_pages = np.concatenate(step_pages)
    per_page = np.bincount(all_pages, minlength=n).astype(np.int64)
    first = np.concatenate(([0], np.cumsum(per_page)[:-1]))
    total = int(per_page.sum())
    at = first[all_pages] + steps
    pp = np.empty(total, np.int64)
    pw = np.empty(total, np.int64)
    pp[at] = all_pages
    pw[at] = np.concatenate(step_words)
    word = pp * stride + first_word + pw
    hw = flat.take(word)
    a0 = flat.take(pp * stride + first_word + np.minimum(pw + 1, last))
    etl = (hw & 31).astype(np.int64)
    edelta = (hw >> 5).astype(np.int64)
    ea0 = a0.astype(np.int64)
    ts = _timestamps(page_ts, first, per_page, pp, etl, edelta, ea0)
    in_page = 4 * (pw + 1) + np.where(etl == 0, 4, 0)
    # A data record whose type would lie past the page's data is cut by the page end
    # (only in a corrupt page): dropped, as rbdecode.c drops it.
    is_data = (etl <= 28) & (in_page + 2 <= hdr.data_size)
    payload = pp * psz + hdr.data_offset + in_page
    payload = payload[is_data]
    flatb = pages.reshape(-1)
    ety = flatb[payload].astype(np.uint16) | (flatb[payload + 1].astype(np.uint16) << 8)
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
    ext = np.flatnonzero(etl == TYPE_TIME_EXTEND)
    contrib[ext] = (ea0[ext] << _TS_SHIFT) + edelta[ext]
    csum = np.cumsum(contrib)
    is_abs = etl == TYPE_TIME_STAMP
    if not is_abs.any():
        # Only page starts are bases: time = page stamp + the deltas summed in the page
        # so far (the same int64 sums as the general case below, in another order).
        starts = first[per_page > 0]
        base = np.zeros(len(page_ts), np.int64)
        base[per_page > 0] = page_ts[per_page > 0].astype(np.int64) - \
            (csum[starts] - contrib[starts])
        return base[pp] + csum
    before = csum - contrib                       # sum of the records before each one
    idx = np.arange(len(etl), dtype=np.int64)
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


def _shared_buffer(blobs: list) -> np.ndarray | None:
    """When the CPUs' pages are consecutive views of one uint8 array (as a caller that
    reads them into one buffer hands them over), that array's span: no 1 GiB join/copy."""
    if not blobs or not all(isinstance(b, np.ndarray) and b.dtype == np.uint8 and b.ndim == 1
                            and b.flags.c_contiguous for b in blobs):
        return None
    root = blobs[0]
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.c_contiguous:
        return None
    flat = root.reshape(-1).view(np.uint8)
    lo = flat.__array_interface__["data"][0]
    start = blobs[0].__array_interface__["data"][0] - lo
    at = start
    for b in blobs:
        r = b
        while isinstance(r.base, np.ndarray):
            r = r.base
        if r is not root or b.__array_interface__["data"][0] - lo != at:
            return None
        at += len(b)
    if start < 0 or at > len(flat):
        return None
    return flat[start:at]


def decode(per_cpu: dict[int, bytes], hdr: PageHeader) -> Events:
    """All CPUs' pages into one time-ordered :class:`Events`."""
    with heap_reuse():
        return _decode(per_cpu, hdr)


def _one_buffer(per_cpu: dict[int, bytes]
                ) -> tuple[list[tuple[int, bytes]], np.ndarray, list[tuple[int, int, int]]]:
    """The CPUs' pages in CPU order, in one buffer (joined only when they are not views
    of one already), and each CPU's (cpu, offset, length) in it."""
    blobs = [(cpu, per_cpu[cpu]) for cpu in sorted(per_cpu)]
    buf = _shared_buffer([b for _, b in blobs])
    if buf is None:
        buf = np.frombuffer(b"".join(b for _, b in blobs), np.uint8)
    spans, at = [], 0
    for cpu, blob in blobs:
        spans.append((cpu, at, len(blob)))
        at += len(blob)
    return blobs, buf, spans


@dataclass
class Decoded:
    """Columns of the wanted event types, each in time order, plus what decoding saw."""

    tables: dict[int, dict[str, np.ndarray]]     # event id -> {ts, cpu, field...}
    missed: list[tuple[int, int, int]]
    events: int                                  # records of every type
    pages: int
    seconds: dict[str, float] = field(default_factory=dict)  # decode_s, tables_s


def decode_tables(per_cpu: dict[int, bytes], hdr: PageHeader,
                  wanted: list[tuple[EventFormat, list[str]]]) -> Decoded:
    """The ``wanted`` fields (plus ``ts`` and ``cpu``) of each event type's records, in
    time order: the same columns as :func:`decode` then :meth:`Events.columns` per type.

    The C fast path merges the CPUs' records straight into per-type columns (no merged
    whole-trace columns, no per-type gathers); otherwise the numpy path does exactly that.
    """
    with heap_reuse(), small_pages():
        t0 = time.perf_counter()
        merged_ev = None
        _, buf, spans = _one_buffer(per_cpu)
        spec = {}
        for fmt, names in wanted:
            fields = [fmt.f(n) for n in names]
            kept = [f for f in fields if not f.data_loc and f.size > 0]
            fixed = [(f.offset, f.size) for f in kept]
            # char[] fields (task names) as codes into their distinct values: 4 bytes a
            # record written instead of 16 (the streaming merge only; Coded columns).
            coded = [i for i, f in enumerate(kept) if f.is_string]
            spec[fmt.id] = (fixed, len(fixed) < len(fields), coded)
        by_id = {fmt.id: (fmt, names) for fmt, names in wanted}
        streamed = fastpath.stream_tables(
            spans, buf, hdr, spec,
            finish=lambda t, merged: _table_columns(buf, *by_id[t], merged))
        if streamed is not None:
            counted, tables = streamed
            t1 = time.perf_counter()
            return Decoded({fmt.id: tables[fmt.id] for fmt, _ in wanted}, counted.missed,
                           len(counted), counted.pages,
                           {"decode_s": t1 - t0, "tables_s": 0.0})   # made in the merges
        # A CPU's records go back in time somewhere: decoded into pieces, merged by runs.
        pieces = fastpath.decode_pieces(spans, buf, hdr)
        t1 = time.perf_counter()
        if pieces is not None:
            merged = fastpath.merge_tables(pieces, spec)
            if merged is not None:
                tables = {fmt.id: _table_columns(buf, fmt, names, merged[fmt.id])
                          for fmt, names in wanted}
                return Decoded(tables, pieces.missed, len(pieces), pieces.pages,
                               {"decode_s": t1 - t0, "tables_s": time.perf_counter() - t1})
            # Too far out of time order for the merge: sorted like the numpy path.
            merged_ev = fastpath.merge_events(pieces)
            if merged_ev is not None:
                ev = Events(buf, *merged_ev, pieces.missed, pieces.pages)
        if pieces is None or merged_ev is None:
            ev = _decode(per_cpu, hdr)
        t1 = time.perf_counter()
        by_type = ev.by_type()
        tables = {}
        for fmt, names in wanted:
            idx = by_type.get(fmt.id, np.empty(0, np.int64))
            cols = {"ts": ev.ts[idx], "cpu": ev.cpu[idx]}
            cols.update(ev.columns(fmt, names, idx))
            tables[fmt.id] = cols
        return Decoded(tables, ev.missed, len(ev), ev.pages,
                       {"decode_s": t1 - t0, "tables_s": time.perf_counter() - t1})


def _table_columns(buf: np.ndarray, fmt: EventFormat, names: list[str],
                   merged: dict[str, np.ndarray]) -> Columns:
    """One type's columns from :func:`fastpath.merge_tables`, as Events.columns gives
    (a __data_loc string field as :class:`Coded`: built when read)."""
    cols = Columns(ts=merged["ts"], cpu=merged["cpu"])
    raw = iter(zip(merged["fields"], merged.get("dicts") or [None] * len(merged["fields"])))
    for name in names:
        f = fmt.f(name)
        if not f.data_loc and f.size > 0:
            col, values = next(raw)
            cols[name] = _from_bytes(col, f) if values is None else \
                Coded(col, _from_bytes(values, f))
            continue
        coded = fastpath.data_loc_coded(buf, merged["off"], f.offset) if f.data_loc \
            else None
        cols[name] = Coded(*coded) if coded is not None else \
            read_field(buf, merged["off"], f)
    return cols


def _decode(per_cpu: dict[int, bytes], hdr: PageHeader) -> Events:
    blobs, buf, spans = _one_buffer(per_cpu)
    pieces = fastpath.decode_pieces(spans, buf, hdr)
    merged = fastpath.merge_events(pieces) if pieces is not None else None
    if merged is not None:
        return Events(buf, *merged, pieces.missed, pieces.pages)
    ts_l, ty_l, off_l, cpu_l, missed = [], [], [], [], []
    base = 0
    pages = 0
    for cpu, blob in blobs:
        ts, ty, off, miss, npg = _parse_pages_chunks(buf[base:base + len(blob)], cpu, hdr,
                                                     base)
        ts_l += ts
        ty_l += ty
        off_l += off
        cpu_l += [np.full(len(t), cpu, np.uint16) for t in ts]
        missed += miss
        pages += npg
        base += len(blob)
    if not ts_l:
        return Events(buf, np.empty(0, np.uint64), np.empty(0, np.uint16),
                      np.empty(0, np.uint16), np.empty(0, np.int64), missed, 0)
    # One concatenation of all chunks of all CPUs (the CPUs in order, as before), then
    # the stable time order; each column is gathered once and its pieces freed.
    ts = np.concatenate(ts_l)
    del ts_l
    order = np.argsort(ts, kind="stable")
    ts = ts[order]
    cpu_col = np.concatenate(cpu_l)[order]
    del cpu_l
    ty_col = np.concatenate(ty_l)[order]
    del ty_l
    off_col = np.concatenate(off_l)
    del off_l
    off_col = off_col[order]
    return Events(buf, ts, cpu_col, ty_col, off_col, missed, pages)
