"""irqlab's host-side C fast paths (rbdecode.c: ring-buffer pages; gaps.c: explain's
switch-chain repair; explain.c: explain's thread states, row inserts and distinct rows;
stats.c: per-window reductions and histogram tally; lines.c: the
sample lines of raw-sample logs; xentrace.c: xentrace record headers and the
xenalyze --summary replay), loaded with
ctypes from ``build/libirqlab.so``.

Why C: these are sequential walks (record headers, per-CPU switch pointers) that numpy can
only do with many whole-array passes and temporaries; on a VM the first writes to fresh
memory cost as much as the arithmetic. ctypes releases the GIL during each call.

Optional by design: when the library is missing (not built: ``make -C irqlab/native``,
another platform) or ``IRQLAB_NATIVE=0`` is set, :func:`lib` returns None and callers use
their numpy code, which stays the reference (tests compare both on real captures).
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

LIB_PATH = Path(__file__).resolve().parent / "build" / "libirqlab.so"

_P = ctypes.c_void_p
_I64 = ctypes.c_int64

# name -> argument types; every function returns int64 (a count, or -errno).
_SIGNATURES: dict[str, list] = {
    "irq_rb_decode": [_P, _I64, _P, _I64, _P, _P, _P, _I64, _P, _P, _I64, _P, _P, _P],
    "irq_merge_by_ts": [_P, _P, _P, _P, _P, _I64, _P, _P, _P, _P, _P],
    "irq_merge_to_tables": [_P, _P, _P, _P, _P, _I64, _P, _P],
    "irq_stream_to_tables": [_P, _P, _I64, _P, _P],
    "irq_switch_gaps": [_P, _P, _P, _P, _I64, _I64, _P, _P, _P, _P, _P, _P, _P, _P, _P],
    "irq_gap_bounds": [_P, _P, _I64, _P, _P, _P],
    "irq_gap_events": [_P, _P, _I64, _P, _P, _P, _P, _P, _I64],
    "irq_last_event_before": [_P, _P, _I64, _P, _I64, _I64, _P, _P, _I64, _P, _P],
    "irq_stats_reduce_valid": [_P, _P, _I64, _P, _P, _I64, _P],
    "irq_parse_prefixed_ints": [_P, _I64, _P, _I64, _P, _I64, _P],
    "irq_xen_index": [_P, _I64, _P, _P, _P, _P, _P, _P, _I64, _P],
    "irq_xen_summary": [_P, _P, _P, _P, _P, _P, _P, _P, _I64, _P, _P, _P, _P, _P, _P,
                        _P],
    "irq_xen_summary_raw": [_P, _I64, _P, _P, _P, _P, _P, _P, _P, _P],
    "irq_insert_rows": [_P, _I64, _P, _I64, _P, _I64, _P],
    "irq_insert_positions": [_P, _I64, _P, _I64, _P],
    "irq_factorize_rows": [_P, _I64, _I64, _P, _P, _P],
    "irq_string_rows": [_P, _I64, _P, _P, _I64, _I64, _P],
    "irq_data_loc_rows": [_P, _I64, _P, _I64, _I64, _P, _P, _I64, _P, _P],
    "irq_thread_timeline": [_P, _I64, _P],
    "irq_pair_intervals": [_P, _P, _I64, _P, _P, _I64, _I64, _P, _P, _P, _P, _P, _P],
}

_lib: ctypes.CDLL | None = None
_why_not: str | None = None


def lib() -> ctypes.CDLL | None:
    """The library, loaded once; None (and :func:`why_not` says why) when unusable."""
    global _lib, _why_not
    if _lib is not None or _why_not is not None:
        return _lib
    if os.environ.get("IRQLAB_NATIVE", "1") == "0":
        _why_not = "disabled by IRQLAB_NATIVE=0"
        return None
    if sys.byteorder != "little":
        _why_not = "big-endian host (the C code reads little-endian ring pages)"
        return None
    try:
        handle = ctypes.CDLL(str(LIB_PATH))
        for name, args in _SIGNATURES.items():
            fn = getattr(handle, name)
            fn.argtypes, fn.restype = args, _I64
    except (OSError, AttributeError) as exc:
        _why_not = f"{LIB_PATH} not usable ({exc}); build it: make -C irqlab/native"
        return None
    _lib = handle
    return handle


def why_not() -> str | None:
    """Why the C fast paths are not used (None when they are)."""
    lib()
    return _why_not


def set_enabled(enabled: bool) -> None:
    """Switch the fast paths off (tests of the numpy reference) or back on."""
    global _lib, _why_not
    _lib = None
    _why_not = None if enabled else "disabled by irqlab.native.set_enabled(False)"


def ptr(a) -> int:
    """Address of a numpy array's data, for a ctypes call."""
    return a.ctypes.data
