"""The two distributions of a split run (issue 44): IRQ latency (deadline -> the timer's
hard IRQ) and thread latency (that IRQ -> the probe thread running), as rtla timerlat
reports them. Percentiles by nearest rank over every split sample (the rule of the run
summary's own, irqlab.stats.histogram.quantile_rank)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from irqlab.stats.fields import METRICS, field
from irqlab.stats.histogram import quantile_rank
from irqlab.stats.units import ticks_to_ns

# The summary objects' figures (docs/formats.md section 4, ``irq_latency`` and
# ``thread_latency``), keyed as the summary's own.
PART_FIELDS = tuple(field(k) for k in ("p50_ns", "p99_ns", "p999_ns", "max_ns"))
# The parts' summary keys and the metric each holds.
PART_KEYS = {"irq_latency": "irq", "thread_latency": "thread"}


def part_ticks(deadline: np.ndarray, entry: np.ndarray, irq: np.ndarray, metric: str
               ) -> np.ndarray:
    """Each split sample's latency of ``metric`` in ticks (int64; the counters are u64
    and subtract in two's complement, docs/formats.md section 2)."""
    d, e, i = (np.asarray(x).astype(np.int64) for x in (deadline, entry, irq))
    if metric == "irq":
        return i - d
    if metric == "thread":
        return e - i
    if metric == "total":
        return e - d
    raise ValueError(f"metric {metric!r} is not one of {', '.join(METRICS)}")


def part_summary(latency_tick: np.ndarray, tick_hz: int, unsplit: int) -> dict[str, Any]:
    """One part's summary object: samples, p50/p99/p99.9/max in ns, and how many samples
    of the run could not be split (irqlab.explain.parts says why)."""
    out: dict[str, Any] = {"samples": int(latency_tick.size), "unsplit": int(unsplit)}
    srt = np.sort(np.asarray(latency_tick, np.int64))
    for f in PART_FIELDS:
        if not srt.size:
            out[f.key] = None
        elif f.quantile is None:
            out[f.key] = ticks_to_ns(int(srt[-1]), tick_hz)
        else:
            out[f.key] = ticks_to_ns(int(srt[quantile_rank(f.quantile, srt.size) - 1]),
                                     tick_hz)
    return out


@dataclass(frozen=True)
class WindowParts:
    """A window's IRQ and thread parts while the run records (rtla timerlat top's two
    columns): min and max in ticks over the window's samples the live capture split
    (``split`` of them; irqlab.explain.live says which can be)."""

    split: int
    irq_min_tick: int | None
    irq_max_tick: int | None
    thread_min_tick: int | None
    thread_max_tick: int | None

    @classmethod
    def of(cls, deadline: np.ndarray, entry: np.ndarray, irq: np.ndarray) -> WindowParts:
        """The parts of split samples (their deadline, entry and timer IRQ entry)."""
        i, t = (part_ticks(deadline, entry, irq, m) for m in ("irq", "thread"))
        if not i.size:
            return cls(0, None, None, None, None)
        return cls(int(i.size), int(i.min()), int(i.max()), int(t.min()), int(t.max()))

    def as_dict(self, tick_hz: int) -> dict[str, Any]:
        """The window record's keys (docs/formats.md section 4, ``window``), in ns."""
        def ns(v: int | None) -> int | None:
            return None if v is None else ticks_to_ns(v, tick_hz)
        return {"split_samples": self.split,
                "irq_min_ns": ns(self.irq_min_tick), "irq_max_ns": ns(self.irq_max_tick),
                "thread_min_ns": ns(self.thread_min_tick),
                "thread_max_ns": ns(self.thread_max_tick)}
