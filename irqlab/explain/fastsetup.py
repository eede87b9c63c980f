"""C fast paths of explain's set-up (irqlab/native/explain.c) for timeline.py (the
row factorisation and string rows ringbuf uses too are in irqlab.trace.fastpath).

Each function returns None when the library is not available or cannot do the job; the
caller then runs its numpy code, which is the reference and gives identical arrays
(tests/unit/explain/test_fast_paths_match_golden.py runs both on the real captures).
"""

from __future__ import annotations

import ctypes

import numpy as np

from irqlab import native
from irqlab.native import ptr

_I64 = ctypes.c_int64
_P = ctypes.c_void_p
_SW_DTYPES = {"ts": np.int64, "cpu": np.uint16, "prev_pid": np.int32, "next_pid": np.int32,
              "prev_state": np.int64, "ts_max": np.int64}
_WK_DTYPES = {"pid": np.int32, "target_cpu": np.int32, "common_pid": np.int32}


class _TlInput(ctypes.Structure):
    """struct tl_input of explain.c."""

    _fields_ = [("sw_ts", _P), ("sw_cpu", _P), ("sw_prev", _P), ("sw_next", _P),
                ("sw_prev_state", _P), ("sw_inferred", _P), ("sw_ts_max", _P),
                ("sw_n", _I64), ("wk_ts", _P), ("wk_pid", _P), ("wk_target_cpu", _P),
                ("wk_waker", _P), ("wk_n", _I64), ("end_ts", _I64)]


class _TlOutput(ctypes.Structure):
    """struct tl_output of explain.c."""

    _fields_ = [("start", _P), ("end", _P), ("state", _P), ("cpu", _P), ("waker", _P),
                ("end_max", _P), ("cap", _I64)]


def insert_rows(col: np.ndarray, add: np.ndarray, at: np.ndarray) -> np.ndarray | None:
    """``col`` with ``add[j]`` put in at output index ``at[j]`` (strictly increasing):
    = an output where ``out[at] = add`` and the other rows are ``col`` in order."""
    lib = native.lib()
    if lib is None or col.ndim != 1 or col.dtype.hasobject:
        return None
    col = np.ascontiguousarray(col)
    add = np.ascontiguousarray(add, col.dtype)
    at = np.ascontiguousarray(at, np.int64)
    out = np.empty(len(col) + len(add), col.dtype)
    got = lib.irq_insert_rows(ptr(col), len(col), ptr(add), len(add), ptr(at),
                              col.dtype.itemsize, ptr(out))
    return out if got == len(out) else None


def insert_positions(ts: np.ndarray, q: np.ndarray) -> np.ndarray | None:
    """For time ordered ``q`` put into time ordered ``ts`` (int64 both): each one's index
    in the merged output, = ``np.searchsorted(ts, q, "right") + np.arange(len(q))``."""
    lib = native.lib()
    if lib is None:
        return None
    ts = np.ascontiguousarray(ts, np.int64)
    q = np.ascontiguousarray(q, np.int64)
    at = np.empty(len(q), np.int64)
    got = lib.irq_insert_positions(ptr(ts), len(ts), ptr(q), len(q), ptr(at))
    return at if got == len(q) else None


def _column(cols: dict, key: str, dtype) -> np.ndarray | None:
    """A column as the C code reads it, without a copy; None when its type differs."""
    col = cols.get(key)
    if col is None:
        return None
    col = np.asarray(col)
    if col.dtype != np.dtype(dtype) and not (dtype is np.int64 and col.dtype == np.uint64):
        return None
    col = np.ascontiguousarray(col)
    return col.view(np.int64) if col.dtype == np.uint64 else col


def thread_timelines(sw_cols: dict, wk_cols: dict, wk_n: int, tids: list[int],
                     end_ts: int) -> dict[int, tuple[np.ndarray, ...]] | None:
    """Per thread with events: (starts, ends, states int8, cpus, wakers, ends_max), as
    timeline.thread_timelines computes them; None when the C pass cannot be used."""
    lib = native.lib()
    if lib is None:
        return None
    sw = {k: _column(sw_cols, k, t) for k, t in _SW_DTYPES.items()}
    inferred = sw_cols.get("inferred")
    wk = {k: _column(wk_cols, k, t) for k, t in _WK_DTYPES.items()} if wk_n else {}
    wk_ts = _column(wk_cols, "ts", np.int64) if wk_n else None
    if any(v is None for v in sw.values()) or any(v is None for v in wk.values()) or \
            (wk_n and wk_ts is None) or \
            (inferred is not None and np.asarray(inferred).dtype != bool):
        return None
    if inferred is not None:
        inferred = np.ascontiguousarray(inferred).view(np.uint8)
    keep = (sw, wk, wk_ts, inferred)                   # the structure only points at them
    cin = _TlInput(ptr(sw["ts"]), ptr(sw["cpu"]), ptr(sw["prev_pid"]), ptr(sw["next_pid"]),
                   ptr(sw["prev_state"]), None if inferred is None else ptr(inferred),
                   ptr(sw["ts_max"]), len(sw["ts"]),
                   ptr(wk_ts) if wk_n else None, ptr(wk["pid"]) if wk_n else None,
                   ptr(wk["target_cpu"]) if wk_n else None,
                   ptr(wk["common_pid"]) if wk_n else None, wk_n, int(end_ts))
    out: dict[int, tuple[np.ndarray, ...]] = {}
    for tid in sorted(set(tids)):
        # Each of the thread's events starts at most one segment: room for all of them
        # (counted by numpy, a compare per row) spares the C walk a counting pass.
        cap = _events_of(sw["prev_pid"], tid) + _events_of(sw["next_pid"], tid) + \
            (_events_of(wk["pid"], tid) if wk_n else 0)
        if not cap:
            continue
        cols = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int8),
                np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64))
        full = _TlOutput(*(ptr(c) for c in cols), cap)
        n = lib.irq_thread_timeline(ctypes.addressof(cin), tid, ctypes.addressof(full))
        if n < 0:
            return None
        if n:
            out[tid] = tuple(c[:n] for c in cols)
    del keep
    return out


def _events_of(pids: np.ndarray, tid: int) -> int:
    """Rows of an int32 pid column that are ``tid`` (none when no int32 holds it)."""
    if not -(1 << 31) <= tid < 1 << 31:
        return 0
    return int(np.count_nonzero(pids == np.int32(tid)))


def pair_intervals(ts_in: np.ndarray, cpu_in: np.ndarray, ts_out: np.ndarray,
                   cpu_out: np.ndarray) -> dict[int, tuple[np.ndarray, ...]] | None:
    """Per CPU with pairs, in CPU order: (entry times, exit times, entry indices) of
    timeline._pair_sorted's pairs, for time-ordered int64 entries and exits."""
    lib = native.lib()
    if lib is None or ts_in.dtype != np.int64 or ts_out.dtype != np.int64 or \
            cpu_in.dtype != np.uint16 or cpu_out.dtype != np.uint16:
        return None
    ts_in, cpu_in, ts_out, cpu_out = (np.ascontiguousarray(a) for a in
                                      (ts_in, cpu_in, ts_out, cpu_out))
    ncpu = max(int(cpu_in.max(initial=0)), int(cpu_out.max(initial=0))) + 1
    n = len(ts_in)
    scratch = np.empty(max(1, len(ts_out)), np.int64)
    cpu_at = np.empty(ncpu + 1, np.int64)
    npairs = np.empty(ncpu, np.int64)
    start, end, entry = (np.empty(max(1, n), np.int64) for _ in range(3))
    got = lib.irq_pair_intervals(ptr(ts_in), ptr(cpu_in), n, ptr(ts_out), ptr(cpu_out),
                                 len(ts_out), ncpu, ptr(scratch), ptr(cpu_at), ptr(npairs),
                                 ptr(start), ptr(end), ptr(entry))
    if got < 0:
        return None
    out = {}
    for c in np.flatnonzero(npairs).tolist():
        a, k = int(cpu_at[c]), int(npairs[c])
        out[c] = (start[a:a + k], end[a:a + k], entry[a:a + k])
    return out
