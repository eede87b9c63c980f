"""The C fast path of the ring-buffer decoder (irqlab/native/rbdecode.c), and the row
factorisation and string rows (irqlab/native/explain.c) that its string columns and
explain's timelines share.

The C pass reads each page once and writes each output once, and runs page ranges in
parallel threads. Optional (see :mod:`irqlab.native`): every function here returns None
when it cannot do the job, and :mod:`irqlab.trace.ringbuf` uses its numpy path, which
gives identical results (tests/unit/trace/test_fastpath.py compares them).
"""

from __future__ import annotations

import ctypes
import errno
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from irqlab import native
from irqlab.native import ptr
from irqlab.trace.formats import PageHeader

_MAX_STREAMS = 4096          # pieces at most (a few per CPU in practice)
_MERGE_GROUPS = 4            # parallel merges at most (each decodes every page again)
# A record's finishing read costs as much as merging this many more bytes of it: the
# bench's 2.2 M irq handler names took 77 ms; at 40 its two merges end within 40 ms of
# each other (at 24, 30-90 ms apart; at 0, 10-250 ms).
_FINISH_WEIGHT = 40
_THREAD_PAGES = 8192          # 32 MiB of pages per parallel piece, at least
_I64 = ctypes.c_int64


class _Layout(ctypes.Structure):
    """struct rb_page_layout of rbdecode.c."""

    _fields_ = [("page_size", _I64), ("ts_offset", _I64), ("commit_offset", _I64),
                ("data_offset", _I64), ("data_size", _I64)]


def threads() -> int:
    """Threads the C decoder runs on: one per CPU of the machine, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


def merge_threads() -> int:
    """Parallel merges into the tables at most (each writes its own event types)."""
    return min(threads(), _MERGE_GROUPS)


def _layout(hdr: PageHeader) -> _Layout:
    return _Layout(hdr.page_size, hdr.ts_offset, hdr.commit_offset, hdr.data_offset,
                   hdr.data_size)


class _Runs(ctypes.Structure):
    """struct rb_runs of rbdecode.c."""

    _fields_ = [("page", ctypes.c_void_p), ("skip", ctypes.c_void_p),
                ("rec", ctypes.c_void_p), ("cap", _I64), ("n", _I64),
                ("first", ctypes.c_uint64), ("last", ctypes.c_uint64)]


def _decode_piece(lib: ctypes.CDLL, buf: np.ndarray, piece: "_Piece", lay: _Layout,
                  out: tuple[np.ndarray, np.ndarray, np.ndarray] | None
                  ) -> tuple[int, list[tuple[int, int]]] | None:
    """Decode one piece into its region of the shared output columns (or only count its
    records per type, and find where their stamps go back, when ``out`` is None):
    (records, missed)."""
    ts, ty, off = out if out is not None else (None, None, None)
    miss_cap = run_cap = 64
    while True:
        piece.type_count = np.zeros(65536, np.int64)
        miss_ts = np.empty(miss_cap, np.uint64)
        miss_n = np.empty(miss_cap, np.int64)
        nmiss = np.zeros(1, np.int64)
        run_cols = np.empty((3, run_cap), np.int64)
        runs = _Runs(ptr(run_cols[0]), ptr(run_cols[1]), ptr(run_cols[2]), run_cap)
        r = piece.region
        outs = (ptr(ts) + 8 * r, ptr(ty) + 2 * r, ptr(off) + 8 * r) if ts is not None \
            else (None, None, None)                     # count only
        n = lib.irq_rb_decode(ptr(buf) + piece.byte_at, piece.npages, ctypes.addressof(lay),
                              piece.byte_at, *outs, piece.cap, ptr(miss_ts), ptr(miss_n),
                              miss_cap, ptr(nmiss), ptr(piece.type_count),
                              None if ts is not None else ctypes.addressof(runs))
        if n < 0:
            return None
        if int(nmiss[0]) <= miss_cap and (ts is not None or runs.n <= run_cap):
            break
        miss_cap, run_cap = max(miss_cap, int(nmiss[0])), max(run_cap, runs.n)
    if ts is None:
        # (page in the piece, records of that page before it, record in the piece)
        piece.backsteps = run_cols[:, :runs.n].T.tolist()
        piece.first_last = (runs.first, runs.last) if n else None
    missed = list(zip(miss_ts[:int(nmiss[0])].tolist(), miss_n[:int(nmiss[0])].tolist()))
    return int(n), missed


class _Piece:
    """A run of one CPU's pages decoded by one thread into its own output region."""

    def __init__(self, cpu: int, byte_at: int, npages: int, region: int, cap: int):
        self.cpu, self.byte_at, self.npages = cpu, byte_at, npages
        self.region, self.cap = region, cap
        self.type_count: np.ndarray | None = None    # records per event type, once decoded
        self.backsteps: list[list[int]] = []         # counted only: where stamps go back
        self.first_last: tuple[int, int] | None = None   # counted: first, last stamp


class Pieces:
    """Every CPU's records decoded, not yet merged: each piece's (ts, type, payload
    offset) sit in its own region of three shared columns, in page order (``cols`` None:
    only counted)."""

    def __init__(self, buf: np.ndarray, cols: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
                 pieces: list[_Piece], counts: np.ndarray,
                 missed: list[tuple[int, int, int]], pages: int):
        self.buf, self.cols, self.pieces = buf, cols, pieces
        self.counts, self.missed, self.pages = counts, missed, pages
        self.start = np.array([p.region for p in pieces], np.int64)
        self.end = self.start + counts
        self.cpu_of = np.array([p.cpu for p in pieces], np.uint16)

    def __len__(self) -> int:
        return int(self.counts.sum())

    def type_counts(self) -> np.ndarray:
        """Records per event type (65536 counters), counted while decoding."""
        return np.sum([p.type_count for p in self.pieces], axis=0, dtype=np.int64) \
            if self.pieces else np.zeros(65536, np.int64)


def decode_pieces(blobs: list[tuple[int, int, int]], buf: np.ndarray,
                  hdr: PageHeader, records: bool = True) -> Pieces | None:
    """Decode every CPU's pages, page ranges in parallel threads.

    ``blobs``: (cpu, byte offset in ``buf``, byte length), in CPU order. ``records``
    False: only count them (per type) and find lost-event pages, keeping nothing. None
    when the fast path cannot be used.
    """
    lib = native.lib()
    if lib is None or buf.dtype != np.uint8 or not buf.flags.c_contiguous:
        return None
    psz = hdr.page_size
    lay = _layout(hdr)
    workers = threads()
    total_pages = sum(length // psz for _, _, length in blobs)
    step = max(_THREAD_PAGES, -(-total_pages // workers))
    # A data record takes at least 8 bytes (header + one word): each piece gets room for
    # the worst case in shared columns, of which only the part written is ever touched.
    per_page = hdr.data_size // 8 + 1
    pieces: list[_Piece] = []
    region = 0
    for cpu, at, length in blobs:
        npages = length // psz
        for first in range(0, npages, step):
            count = min(step, npages - first)
            pieces.append(_Piece(cpu, at + first * psz, count, region, count * per_page))
            region += count * per_page
    if len(pieces) > _MAX_STREAMS:
        return None
    cols = (np.empty(region, np.uint64), np.empty(region, np.uint16),
            np.empty(region, np.int64)) if records else None
    if len(pieces) > 1 and workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            done = list(pool.map(lambda p: _decode_piece(lib, buf, p, lay, cols), pieces))
    else:
        done = [_decode_piece(lib, buf, p, lay, cols) for p in pieces]
    if any(d is None for d in done):
        return None
    missed = [(p.cpu, int(t), int(c)) for p, (_, m) in zip(pieces, done) for t, c in m]
    counts = np.array([n for n, _ in done], np.int64)
    return Pieces(buf, cols, pieces, counts, missed, total_pages)


def merge_events(p: Pieces) -> tuple[np.ndarray, ...] | None:
    """All records in time order as fresh exact-size (ts, cpu, type, off), in the numpy
    path's order (a stable sort by time of the CPUs' records, CPU after CPU)."""
    lib = native.lib()
    n = len(p)
    ts = np.empty(n, np.uint64)
    cpu = np.empty(n, np.uint16)
    ty = np.empty(n, np.uint16)
    off = np.empty(n, np.int64)
    c_ts, c_ty, c_off = p.cols
    if n == 0:
        return ts, cpu, ty, off
    if lib is None:
        return None
    got = lib.irq_merge_by_ts(ptr(c_ts), ptr(c_ty), ptr(c_off), ptr(p.start), ptr(p.end),
                              len(p.pieces), ptr(p.cpu_of), ptr(ts), ptr(ty), ptr(off),
                              ptr(cpu))
    if got == n:
        return ts, cpu, ty, off
    if got != -errno.EDOM:
        return None
    # A piece out of time order (the kernel's stamps went back): sort, as numpy does.
    keep = np.concatenate([np.arange(a, b) for a, b in zip(p.start.tolist(),
                                                           p.end.tolist())])
    order = np.argsort(c_ts[keep], kind="stable")
    keep = keep[order]
    return c_ts[keep], np.repeat(p.cpu_of, p.counts)[order], c_ty[keep], c_off[keep]


class _TableSpec(ctypes.Structure):
    """struct table_spec of rbdecode.c."""

    _fields_ = [(name, ctypes.c_void_p) for name in ("table_of_type",)] + \
        [("ntables", _I64)] + \
        [(name, ctypes.c_void_p) for name in ("ts_out", "cpu_out", "off_out", "fill", "cap",
                                              "field_first", "field_offset", "field_size",
                                              "field_out", "buf")] + \
        [("buf_len", _I64)] + \
        [(name, ctypes.c_void_p) for name in ("field_code_cap", "field_dict", "field_ndict")]


_CODE_CAP = 65536             # distinct values of a coded field at most (task names: few)


class _Tables:
    """Per-type output columns sized from the counts, and the C description of them.

    ``wanted`` = {type id: (fields, keep payload offsets[, coded field indices])}: a
    coded field (``code`` True only) gets an int32 code per record and its distinct
    values, ``out[t]["dicts"][i]``, (k, size) bytes; an uncoded one (n, size) bytes."""

    def __init__(self, buf: np.ndarray, counts: np.ndarray,
                 wanted: dict[int, tuple], code: bool = False):
        types = sorted(wanted)
        self.table_of_type = np.full(65536, -1, np.int32)
        self.table_of_type[types] = np.arange(len(types), dtype=np.int32)
        self.out: dict[int, dict[str, np.ndarray]] = {}
        ts_ptr, cpu_ptr, off_ptr, f_first, f_off, f_size, f_out = [], [], [], [0], [], [], []
        f_cap, f_dict = [], []
        self.coded: list[tuple[int, int, int]] = []       # (type, field, spec field)
        for t in types:
            n = int(counts[t])
            fields, keep_off = wanted[t][:2]
            coded = set(wanted[t][2]) if code and len(wanted[t]) > 2 else set()
            cols = {"ts": np.empty(n, np.uint64), "cpu": np.empty(n, np.uint16),
                    "fields": [np.empty(n, np.int32) if i in coded else
                               np.empty((n, size), np.uint8)
                               for i, (_, size) in enumerate(fields)],
                    "dicts": [np.empty((_CODE_CAP, size), np.uint8) if i in coded else None
                              for i, (_, size) in enumerate(fields)]}
            if keep_off:
                cols["off"] = np.empty(n, np.int64)
            self.out[t] = cols
            ts_ptr.append(ptr(cols["ts"]))
            cpu_ptr.append(ptr(cols["cpu"]))
            off_ptr.append(ptr(cols["off"]) if keep_off else 0)
            for i, d in enumerate(cols["dicts"]):
                if d is not None:
                    self.coded.append((t, i, len(f_off) + i))
                f_cap.append(_CODE_CAP if d is not None else 0)
                f_dict.append(ptr(d) if d is not None else 0)
            f_off += [o for o, _ in fields]
            f_size += [z for _, z in fields]
            f_out += [ptr(a) for a in cols["fields"]]
            f_first.append(len(f_off))
        # Kept as attributes: the structure only points at them.
        self.arrays = {
            "ts_out": np.array(ts_ptr or [0], np.uintp),
            "cpu_out": np.array(cpu_ptr or [0], np.uintp),
            "off_out": np.array(off_ptr or [0], np.uintp),
            "fill": np.zeros(max(1, len(types)), np.int64),
            "cap": np.array([counts[t] for t in types] or [0], np.int64),
            "field_first": np.array(f_first, np.int64),
            "field_offset": np.array(f_off or [0], np.int64),
            "field_size": np.array(f_size or [0], np.int64),
            "field_out": np.array(f_out or [0], np.uintp),
            "field_code_cap": np.array(f_cap or [0], np.int64),
            "field_dict": np.array(f_dict or [0], np.uintp),
            "field_ndict": np.zeros(max(1, len(f_cap)), np.int64)}
        self.spec = _TableSpec(ptr(self.table_of_type), len(types),
                               *(ptr(self.arrays[k]) for k in (
                                   "ts_out", "cpu_out", "off_out", "fill", "cap",
                                   "field_first", "field_offset", "field_size",
                                   "field_out")),
                               ptr(buf), len(buf),
                               *(ptr(self.arrays[k]) for k in (
                                   "field_code_cap", "field_dict", "field_ndict")))

    def complete(self) -> bool:
        """Every table filled to the count it was sized for; each coded field's distinct
        values cut to their count."""
        for t, i, g in self.coded:
            self.out[t]["dicts"][i] = self.out[t]["dicts"][i][
                :int(self.arrays["field_ndict"][g])].copy()
        return bool(np.array_equal(self.arrays["fill"], self.arrays["cap"]))


def merge_tables(p: Pieces, wanted: dict[int, tuple[list[tuple[int, int]], bool]]
                 ) -> dict[int, dict[str, np.ndarray]] | None:
    """The records of the wanted event types in time order, straight into per-type
    columns: ``wanted`` = {type id: ([(field offset, size)], keep payload offsets)}.

    Returns {type id: {"ts", "cpu", "off" (if asked), "fields": [(n, size) uint8]}} or
    None (streams too far out of order, or no library: the caller merges and groups).
    """
    lib = native.lib()
    if lib is None or not wanted or p.cols is None:
        return None
    tables = _Tables(p.buf, p.type_counts(), wanted)
    c_ts, c_ty, c_off = p.cols
    if len(p) and lib.irq_merge_to_tables(ptr(c_ts), ptr(c_ty), ptr(c_off), ptr(p.start),
                                          ptr(p.end), len(p.pieces), ptr(p.cpu_of),
                                          ctypes.addressof(tables.spec)) < 0:
        return None
    return tables.out if tables.complete() else None


class _Stream(ctypes.Structure):
    """struct rb_stream of rbdecode.c."""

    _fields_ = [("byte_at", _I64), ("npages", _I64), ("cpu", _I64), ("skip", _I64),
                ("count", _I64)]


def _sorted_runs(counted: Pieces, psz: int, ends: dict[int, int]) -> list[_Stream]:
    """Each CPU's records cut into sorted runs where their stamps go back (inside a piece
    or from one piece to the next), CPU after CPU: the streams of the merge."""
    runs: list[_Stream] = []
    by_cpu: dict[int, list[tuple[_Piece, int]]] = {}
    for piece, count in zip(counted.pieces, counted.counts.tolist()):
        by_cpu.setdefault(piece.cpu, []).append((piece, count))
    for cpu, pieces in by_cpu.items():
        starts: list[tuple[int, int]] = []          # (byte of the run's page, skip)
        sizes: list[int] = []
        rec, last = 0, None
        for piece, count in pieces:
            if not count:
                continue
            first, final = piece.first_last
            if last is None or first < last:
                starts.append((piece.byte_at, 0))
                sizes.append(rec)
            for page, skip, at in piece.backsteps:
                starts.append((piece.byte_at + page * psz, skip))
                sizes.append(rec + at)
            rec += count
            last = final
        sizes.append(rec)
        for (byte_at, skip), a, b in zip(starts, sizes, sizes[1:]):
            runs.append(_Stream(byte_at, (ends[cpu] - byte_at) // psz, cpu, skip, b - a))
    return runs


def stream_tables(blobs: list[tuple[int, int, int]], buf: np.ndarray, hdr: PageHeader,
                  wanted: dict[int, tuple[list[tuple[int, int]], bool]],
                  finish: Callable[[int, dict[str, np.ndarray]], Any] | None = None
                  ) -> tuple[Pieces, dict[int, Any]] | None:
    """:func:`merge_tables`'s tables without a decoded copy of the whole trace: a
    counting pass (parallel) that also finds where each CPU's stamps go back, then each
    sorted run's pages decoded page by page as the merge reaches them. Fields listed as
    coded in ``wanted`` (a third item: field indices) come as int32 codes plus their
    distinct values (:class:`_Tables`). None without the library (or when a run's bounds
    disagree with its pages, or a coded field has more than 65,536 distinct values: the
    caller then decodes into pieces and merges, coding nothing). ``finish(type id, its
    merged columns)``, when given, makes each table's final form in the thread that merged
    it (ringbuf's __data_loc strings: one group's while the other group still merges);
    the result has its return values."""
    lib = native.lib()
    if lib is None or not wanted:
        return None
    counted = decode_pieces(blobs, buf, hdr, records=False)
    if counted is None:
        return None
    counts = counted.type_counts()
    psz = hdr.page_size
    ends = {cpu: at + length // psz * psz for cpu, at, length in blobs}
    runs = _sorted_runs(counted, psz, ends)
    lay = _layout(hdr)

    def merge(group: dict[int, tuple]) -> dict[int, Any] | None:
        tables = _Tables(buf, counts, group, code=True)
        streams = (_Stream * max(1, len(runs)))(*runs)
        if lib.irq_stream_to_tables(ptr(buf), ctypes.addressof(streams), len(runs),
                                    ctypes.addressof(lay), ctypes.addressof(tables.spec)) < 0:
            return None
        if not tables.complete():
            return None
        return tables.out if finish is None else \
            {t: finish(t, cols) for t, cols in tables.out.items()}

    # Writing the records into their tables is most of the merge (decoding the pages and
    # ordering them, ~10 %, is repeated by each thread): the tables are split between
    # threads, each merging every run but writing only its own types.
    groups = _type_groups(counts, wanted, merge_threads())
    if len(groups) > 1:
        with ThreadPoolExecutor(len(groups)) as pool:
            done = list(pool.map(merge, groups))
    else:
        done = [merge(g) for g in groups]
    if any(t is None for t in done):
        return None
    out: dict[int, Any] = {}
    for t in done:
        out.update(t)
    return counted, out


def _type_groups(counts: np.ndarray, wanted: dict[int, tuple[list[tuple[int, int]], bool]],
                 groups: int) -> list[dict[int, tuple[list[tuple[int, int]], bool]]]:
    """The wanted types in at most ``groups`` parts of about equal work (greedy, largest
    first: the longest-processing-time rule, Graham 1969). A type's work is its output
    bytes, plus, for a type with fields read from the pages after the merge (``__data_loc``
    strings: stream_tables' ``finish``, a second read of each record), _FINISH_WEIGHT
    bytes more a record."""
    weight = {t: int(counts[t]) * (10 + sum(z for _, z in spec[0])
                                   + (8 + _FINISH_WEIGHT if spec[1] else 0))
              for t, spec in wanted.items()}
    parts: list[dict[int, tuple[list[tuple[int, int]], bool]]] = \
        [{} for _ in range(max(1, groups))]
    load = [0] * len(parts)
    for t in sorted(weight, key=lambda t: (-weight[t], t)):
        g = load.index(min(load))
        parts[g][t] = wanted[t]
        load[g] += weight[t]
    return [p for p in parts if p]


def factorize_rows(rows: np.ndarray, extra: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """(index of the first row of each distinct value, code of every row) of an (n, w)
    uint64 array, rows told apart also by ``extra`` (int64 per row) when given; distinct
    values in order of first appearance."""
    lib = native.lib()
    if lib is None or rows.ndim != 2 or rows.dtype != np.uint64:
        return None
    rows = np.ascontiguousarray(rows)
    n = len(rows)
    if extra is not None:
        extra = np.ascontiguousarray(extra, np.int64)
    code = np.empty(n, np.int64)
    rep = np.empty(max(1, n), np.int64)
    k = lib.irq_factorize_rows(ptr(rows), n, rows.shape[1],
                               None if extra is None else ptr(extra), ptr(code), ptr(rep))
    return (rep[:k].copy(), code) if k >= 0 else None


def string_rows(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray,
                width: int) -> np.ndarray | None:
    """(n, width) bytes: each string's first min(len, width) bytes, zero padded (None
    when one would run past the buffer)."""
    lib = native.lib()
    if lib is None or width % 8 or buf.dtype != np.uint8 or not buf.flags.c_contiguous:
        return None
    starts = np.ascontiguousarray(starts, np.int64)
    lens = np.ascontiguousarray(lens, np.int64)
    out = np.empty((len(starts), width), np.uint8)
    got = lib.irq_string_rows(ptr(buf), len(buf), ptr(starts), ptr(lens), len(starts),
                              width, ptr(out))
    return out if got == len(starts) else None


_DATA_LOC_DISTINCT = 4096     # distinct strings of a field at most (irq handler names: few)


def data_loc_strings(buf: np.ndarray, off: np.ndarray, field_offset: int
                     ) -> np.ndarray | None:
    """A __data_loc string field of the records at payload offsets ``off``, as
    ringbuf._strings gives it (unicode, each distinct string decoded once), in one C pass
    with no per-record rows of bytes (None: no library, a string past the buffer, or
    too many distinct ones: the caller's path then decides)."""
    found = data_loc_coded(buf, off, field_offset)
    if found is None:
        return None
    code, text = found
    return text[code]


def data_loc_coded(buf: np.ndarray, off: np.ndarray, field_offset: int
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`data_loc_strings` as (code of each record, distinct strings): the field is
    ``text[code]``. Codes are in order of first appearance, one per distinct string
    (rows of bytes that decode alike share one), so they group as the strings do."""
    lib = native.lib()
    if lib is None or not len(off) or buf.dtype != np.uint8 or not buf.flags.c_contiguous:
        return None
    off = np.ascontiguousarray(off, np.int64)
    code = np.empty(len(off), np.int64)
    cap = min(len(off), _DATA_LOC_DISTINCT)
    rows = np.empty(cap * 4096, np.uint8)            # untouched beyond the rows written
    width, wide = np.zeros(1, np.int64), np.zeros(1, np.int64)
    k = lib.irq_data_loc_rows(ptr(buf), len(buf), ptr(off), len(off), field_offset,
                              ptr(code), ptr(rows), cap, ptr(width), ptr(wide))
    if k < 0:
        return None
    w, wd = int(width[0]), int(wide[0])
    text = [bytes(rows[r * wd:r * wd + w]).split(b"\0", 1)[0].decode("utf-8", "replace")
            for r in range(k)]
    first: dict[str, int] = {}
    canon = [first.setdefault(t, len(first)) for t in text]
    if len(first) < k:               # bytes past a NUL, or invalid UTF-8, decoded alike
        code = np.array(canon, np.int64)[code]
    return code, np.array(list(first))
