"""Range checks of a parsed run before anything is derived or stored (issue 20).

Every number an importer read must fit what the schema and the summary arithmetic can
hold; one that does not is a clean ImportFormatError naming the file and line, never an
OverflowError in the summary builder or a DuckDB conversion error in the store.

Bounds: latencies and durations |ns| <= MAX_NS (10^15 ns, ~11.6 days: far beyond any
latency, far inside BIGINT, and count x value sums stay exact); counts 0..MAX_COUNT
(10^15); a counter rate 1..MAX_TICK_HZ (10^12 Hz).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from irqlab.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    # numpy on first use (irqlab/lazy.py): a refused input is refused before it loads.
    np = lazy_import("numpy")

from irqlab.importers.base import ImportFormatError, ParsedRun

MAX_NS = 10**15
MAX_COUNT = 10**15
MAX_TICK_HZ = 10**12
MAX_WINDOWS = 10_000_000

# Window keys: ns values, and counts.
_WINDOW_NS = ("mean_ns", "stddev_ns", "min_ns", "max_ns", "global_min_ns", "global_max_ns")
_WINDOW_COUNTS = ("samples", "above_threshold")


def _bad(run: ParsedRun, what: str, value: Any, line: int | None = None) -> ImportFormatError:
    shown = str(value)
    if len(shown) > 40:
        shown = shown[:40] + f"… ({len(shown)} characters)"
    return ImportFormatError(run.path, line if line is not None else run.line, what, shown)


def _check_ns(run: ParsedRun, key: str, value: Any, line: int | None = None,
              nonneg: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _bad(run, f"a number for {key}", value, line)
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise _bad(run, f"a finite {key}", value, line)
    low = 0 if nonneg else -MAX_NS
    if not low <= value <= MAX_NS:
        raise _bad(run, f"{key} within {low}..{MAX_NS} ns", value, line)


def _check_count(run: ParsedRun, key: str, value: Any, line: int | None = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise _bad(run, f"a count for {key}", value, line)
    if isinstance(value, (float, np.floating)) and not (math.isfinite(value)
                                                       and float(value).is_integer()):
        raise _bad(run, f"a whole count for {key}", value, line)
    if not 0 <= value <= MAX_COUNT:
        raise _bad(run, f"{key} within 0..{MAX_COUNT}", value, line)


def validate_run(run: ParsedRun) -> None:
    """Raise ImportFormatError (file:line) for the first number out of range."""
    if run.tick_hz is not None and not (isinstance(run.tick_hz, (int, np.integer))
                                        and 1 <= run.tick_hz <= MAX_TICK_HZ):
        raise _bad(run, f"a counter rate of 1..{MAX_TICK_HZ} Hz", run.tick_hz)
    _check_ns(run, "period", run.period_ns, nonneg=True)
    _check_ns(run, "threshold", run.threshold_ns, nonneg=True)
    if len(run.windows) > MAX_WINDOWS:
        raise _bad(run, f"at most {MAX_WINDOWS} windows", len(run.windows))
    for w in run.windows:
        line = w.get("line") if isinstance(w.get("line"), int) else None
        for key in _WINDOW_NS:
            _check_ns(run, key, w.get(key), line)
        for key in _WINDOW_COUNTS:
            _check_count(run, key, w.get(key), line)
        start = w.get("start_s")
        # NaN: the source does not say when the window started (rt_eval).
        if start is not None and not (isinstance(start, (int, float)) and (
                math.isnan(start) or abs(start) <= MAX_NS / 1e9)):
            raise _bad(run, "a window start time", start, line)
        idx = w.get("index")
        if idx is not None and not (isinstance(idx, int) and 0 <= idx < 2**31):
            raise _bad(run, "a window index", idx, line)
    for name, series in run.series.items():
        at = series.line
        _check_ns(run, f"{name} resolution", series.resolution_ns, at, nonneg=True)
        _check_count(run, f"{name} count", series.count, at)
        for key in ("min_ns", "max_ns", "mean_ns"):
            _check_ns(run, f"{name} {key}", getattr(series, key), at)
        total = 0
        for lo, hi, n in series.buckets:
            _check_ns(run, f"{name} bucket bound", lo, at)
            _check_ns(run, f"{name} bucket bound", hi, at)
            _check_count(run, f"{name} bucket count", n, at)
            total += int(n)
        if total > MAX_COUNT:
            raise _bad(run, f"{name} bucket counts summing to at most {MAX_COUNT}", total, at)
    for key, value in run.figures.items():
        if key.endswith("_ns"):
            _check_ns(run, key, value)
        elif key in ("samples", "above_threshold", "lost", "overruns", "injected"):
            _check_count(run, key, value)
    if run.latency_tick is not None and len(run.latency_tick):
        lat = np.asarray(run.latency_tick)
        if lat.dtype.kind not in "iu":
            raise _bad(run, "integer raw samples", lat.dtype)
        check_samples(run, int(lat.min()), int(lat.max()))


def check_samples(run: ParsedRun, lo: int, hi: int) -> None:
    """Raw samples from `lo` to `hi` ticks must convert to ns within MAX_NS."""
    hz = run.tick_hz or 1_000_000_000
    # ticks -> ns must stay inside MAX_NS: |ticks| <= MAX_NS * hz / 1e9.
    limit = MAX_NS * hz // 1_000_000_000
    if lo < -limit or hi > limit:
        raise _bad(run, f"raw samples within ±{limit} ticks", lo if lo < -limit else hi)
