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

from .format import format_percent, format_ticks, format_window_line
from .histogram import LogHistogram, QuantileResult, quantile_rank
from .moments import Moments
from .run import PERCENTILES, RunStats, RunSummary
from .units import round_half_away, ticks_to_ns
from .window import WindowStats, Windower

__all__ = [
    "LogHistogram", "Moments", "PERCENTILES", "QuantileResult", "RunStats", "RunSummary",
    "WindowStats", "Windower", "format_percent", "format_ticks", "format_window_line",
    "quantile_rank", "round_half_away", "ticks_to_ns",
]
