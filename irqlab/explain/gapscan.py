"""C fast paths of the switch-chain repair (irqlab/native/gaps.c) for timeline.py.

Each function returns None when the library is not available; the caller then runs its
numpy code, which is the reference (tests/unit/explain/test_native_paths.py compares).
"""

from __future__ import annotations

import ctypes

import numpy as np

from irqlab import native
from irqlab.native import ptr

_I64 = ctypes.c_int64


class _Switches(ctypes.Structure):
    """struct gap_switches of gaps.c (pointers into the arrays kept by :class:`Gaps`)."""

    _fields_ = [("sw_ts", ctypes.c_void_p), ("gap_after", ctypes.c_void_p),
                ("cpu_lo", ctypes.c_void_p), ("cpu_hi", ctypes.c_void_p), ("ncpu", _I64),
                ("gap_end_ts", ctypes.c_void_p), ("gap_a", ctypes.c_void_p),
                ("gap_b", ctypes.c_void_p), ("gap_start_ts", ctypes.c_void_p),
                ("gap_cpu", ctypes.c_void_p), ("ngaps", _I64)]


class _Table(ctypes.Structure):
    """struct gap_table of gaps.c (pointers into a table's columns)."""

    _fields_ = [("ts", ctypes.c_void_p), ("cpu", ctypes.c_void_p), ("pid", ctypes.c_void_p),
                ("n", _I64)]


class Gaps:
    """Recorded switches in (cpu, time) order and the gaps after the broken ones."""

    def __init__(self, c_s: np.ndarray, t_s: np.ndarray, broken: np.ndarray,
                 g_t1: np.ndarray, g_a: np.ndarray, g_b: np.ndarray):
        """From switches already in (cpu, time) order and their broken chains."""
        ncpu = int(c_s.max()) + 1 if len(c_s) else 0
        cpus = np.arange(ncpu + 1)
        bounds = np.searchsorted(c_s, cpus)
        gap_after = np.full(len(t_s), -1, np.int64)
        gap_after[broken] = np.arange(len(broken))
        self._set(ncpu, t_s, gap_after, bounds[:-1], bounds[1:], g_t1, g_a, g_b,
                  t_s[broken], c_s[broken])

    def _set(self, ncpu: int, *arrays: np.ndarray) -> None:
        """The struct over (sw_ts, gap_after, cpu_lo, cpu_hi, gap_end_ts, gap_a, gap_b,
        gap_start_ts, gap_cpu), kept as attributes: the structure only points at them."""
        self._arrays = a = [np.ascontiguousarray(x, np.int64) for x in arrays]
        self.sw = _Switches(ptr(a[0]), ptr(a[1]), ptr(a[2]), ptr(a[3]), ncpu, ptr(a[4]),
                            ptr(a[5]), ptr(a[6]), ptr(a[7]), ptr(a[8]), len(a[4]))
        self.ngaps = len(a[4])
        # Per gap (int64): its CPU, the times of the switches around it, the task
        # switched in before it (A) and the one switched out after it (B).
        self.g_cpu, self.g_t0, self.g_t1, self.g_a, self.g_b = a[8], a[7], a[4], a[5], a[6]

    @classmethod
    def of_switches(cls, ts: np.ndarray, cpu: np.ndarray, prev_pid: np.ndarray,
                    next_pid: np.ndarray) -> Gaps | None:
        """From the recorded switches in time order (ts int64): gaps.c sorts them by CPU
        and finds the broken chains, as timeline._sorted_by_cpu() does with numpy.
        None without the library."""
        lib = native.lib()
        n = len(ts)
        if lib is None or not n:
            return None
        ncpu = int(cpu.max()) + 1
        cpu = np.ascontiguousarray(cpu, np.uint16)
        prev_pid = np.ascontiguousarray(prev_pid, np.int32)
        next_pid = np.ascontiguousarray(next_pid, np.int32)
        sw_ts, gap_after = np.empty(n, np.int64), np.empty(n, np.int64)
        lo, hi = np.empty(ncpu, np.int64), np.empty(ncpu, np.int64)
        per_gap = [np.empty(n, np.int64) for _ in range(5)]    # cpu, t0, t1, a, b
        ng = lib.irq_switch_gaps(ptr(np.ascontiguousarray(ts, np.int64)), ptr(cpu),
                                 ptr(prev_pid), ptr(next_pid), n, ncpu, ptr(sw_ts), ptr(lo),
                                 ptr(hi), ptr(gap_after), *[ptr(x) for x in per_gap])
        if ng < 0:
            return None
        g_cpu, g_t0, g_t1, g_a, g_b = (x[:ng] for x in per_gap)
        gaps = cls.__new__(cls)
        gaps._set(ncpu, sw_ts, gap_after, lo, hi, g_t1, g_a, g_b, g_t0, g_cpu)
        return gaps

    @staticmethod
    def _tables(tables: list) -> tuple[list, ctypes.Array]:
        """The tables' columns (kept by the caller: the structs point into them) and the
        struct gap_table array of gaps.c."""
        cols = [Gaps.table_columns(tb) for tb in tables]
        return cols, (_Table * max(1, len(cols)))(
            *[_Table(ptr(ts), ptr(cpu), ptr(pid), len(ts)) for ts, cpu, pid in cols])

    @staticmethod
    def table_columns(tb) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ts int64, cpu uint16, pid int32) of a table, without copies where possible."""
        return (_ts_int64(tb), np.ascontiguousarray(tb["cpu"], np.uint16),
                np.ascontiguousarray(tb["common_pid"], np.int32))

    def bounds(self, tables: list, last_a: np.ndarray, first_b: np.ndarray,
               other: np.ndarray) -> bool:
        """Fold the tables' events into last_a / first_b (int64) and other (uint8), all
        tables in one pass over the switches."""
        lib = native.lib()
        if lib is None:
            return False
        cols, tabs = self._tables(tables)
        return lib.irq_gap_bounds(ctypes.addressof(self.sw), tabs, len(cols), ptr(last_a),
                                  ptr(first_b), ptr(other)) >= 0

    def events(self, tables: list, want: np.ndarray
               ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
        """Per table, (gap, ts, pid) of its events inside the gaps where ``want`` is set,
        in table order; all tables in one pass over the wanted gaps."""
        lib = native.lib()
        if lib is None:
            return None
        cols, tabs = self._tables(tables)
        cap = sum(len(ts) for ts, _, _ in cols)
        counts = np.zeros(max(1, len(cols)), np.int64)
        gap_out, ts_out, pid_out = (np.empty(max(1, cap), np.int64) for _ in range(3))
        n = lib.irq_gap_events(ctypes.addressof(self.sw), tabs, len(cols),
                               ptr(np.ascontiguousarray(want, np.uint8)), ptr(counts),
                               ptr(gap_out), ptr(ts_out), ptr(pid_out), cap)
        if n < 0:
            return None
        at = np.concatenate([[0], np.cumsum(counts[:len(cols)])])
        return [(gap_out[lo:hi], ts_out[lo:hi], pid_out[lo:hi])
                for lo, hi in zip(at[:-1].tolist(), at[1:].tolist())]


def _ts_int64(tb) -> np.ndarray:
    """A table's stamps as int64 (below 2**63: a view, not a copy, of an unsigned column)."""
    ts = np.ascontiguousarray(tb["ts"])
    return ts.view(np.int64) if ts.dtype == np.uint64 else ts.astype(np.int64)


def available() -> bool:
    return native.lib() is not None


def last_event_before(tb, lut: np.ndarray, nkeys: int, q_key: np.ndarray,
                      q_before: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per query, the latest event of its task (``lut[pid]``) in table ``tb`` strictly
    before ``q_before``: (time, found mask), or None without the library."""
    lib = native.lib()
    if lib is None:
        return None
    ts = _ts_int64(tb)
    pid = np.ascontiguousarray(tb["pid"], np.int32)
    lut = np.ascontiguousarray(lut, np.int64)
    q_key = np.ascontiguousarray(q_key, np.int64)
    q_before = np.ascontiguousarray(q_before, np.int64)
    found = np.zeros(len(q_key), np.int64)
    has = np.zeros(len(q_key), np.uint8)
    if lib.irq_last_event_before(ptr(pid), ptr(ts), len(ts), ptr(lut), len(lut), nkeys,
                                 ptr(q_key), ptr(q_before), len(q_key), ptr(found),
                                 ptr(has)) < 0:
        return None
    return found, has.astype(bool)
