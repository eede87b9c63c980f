"""Statistics of latency samples, all in raw counter ticks.

Public API:
    RunStats, RunSummary      whole-run streaming statistics (windows + summary)
    Windower, WindowStats     fixed guest-time windows
    LogHistogram              log-linear histogram, quantile relative error < 1/128
    Moments                   exact streaming mean / population stddev
    format_window_line        the seed-log-compatible live line
    ticks_to_ns               tick -> ns, round half away from zero

irqlab.stats.fields is the one catalog of summary keys (labels, units, which table shows
which) and builds every summary object, for measured and imported runs alike.
irqlab.stats.native is the C fast path of the per-batch reductions (irqlab/native/stats.c;
segments.py and histogram.py stay the numpy reference); irqlab.stats.select finds exact
percentiles of samples read again and again in batches (stored runs), in bounded memory.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .format import format_percent, format_ticks, format_window_line
    from .histogram import LogHistogram, QuantileResult, quantile_rank
    from .moments import Moments
    from .run import PERCENTILES, RunStats, RunSummary
    from .units import round_half_away, ticks_to_ns
    from .window import WindowStats, Windower

# The public names load on first use (PEP 562 module __getattr__): importing
# irqlab.stats.fields, the catalog the parser and renderers read, must not import numpy
# (docs/design.md, "Start-up").
_LAZY = {"format_percent": "format", "format_ticks": "format",
         "format_window_line": "format", "LogHistogram": "histogram",
         "QuantileResult": "histogram", "quantile_rank": "histogram", "Moments": "moments",
         "PERCENTILES": "run", "RunStats": "run", "RunSummary": "run",
         "round_half_away": "units", "ticks_to_ns": "units", "WindowStats": "window",
         "Windower": "window"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "LogHistogram", "Moments", "PERCENTILES", "QuantileResult", "RunStats", "RunSummary",
    "WindowStats", "Windower", "format_percent", "format_ticks", "format_window_line",
    "quantile_rank", "round_half_away", "ticks_to_ns",
]
