"""Per-CPU statistics beside the whole run's (like cyclictest's per-thread lines).

The samples arrive merged in window order (irqlab.samples.multiring); each CPU's subset
is then in window order too, so each CPU gets an ordinary RunStats.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .run import RunStats, RunSummary
from .units import ticks_to_ns

# Latency keys of a summary (docs/formats.md section 4), in the same order.
LATENCY_KEYS = (("min_ns", "min_tick"), ("mean_ns", "mean_tick"),
                ("stddev_ns", "stddev_tick"), ("max_ns", "max_tick"),
                ("warm_max_ns", "warm_max_tick"), ("p50_ns", "p50_tick"),
                ("p90_ns", "p90_tick"), ("p99_ns", "p99_tick"), ("p999_ns", "p999_tick"),
                ("p9999_ns", "p9999_tick"))


def latency_dict(s: RunSummary | None, tick_hz: int) -> dict[str, Any]:
    """samples, above_threshold and every latency key of a summary, in ns."""
    out: dict[str, Any] = {"samples": 0 if s is None else s.samples,
                           "above_threshold": 0 if s is None else s.above_threshold}
    for key, attr in LATENCY_KEYS:
        val = None if s is None or not s.samples else getattr(s, attr)
        out[key] = None if val is None else ticks_to_ns(val, tick_hz)
    return out


class PerCpuStats:
    """One RunStats per CPU, created as CPUs appear (or up front from a known list)."""

    def __init__(self, tick_hz: int, threshold_tick: int, window_tick: int,
                 warmup_windows: int, cpus: list[int] | None = None) -> None:
        self._args = (tick_hz, threshold_tick, window_tick, warmup_windows)
        self.tick_hz = int(tick_hz)
        self.stats: dict[int, RunStats] = {}
        for cpu in cpus or []:
            self.stats[int(cpu)] = RunStats(*self._args)

    def add(self, cpu: np.ndarray, deadline_tick: np.ndarray,
            latency_tick: np.ndarray) -> None:
        """Add a batch (already in window order); windows are not reported per CPU."""
        cpu = np.asarray(cpu)
        if cpu.size == 0:
            return
        for c in np.unique(cpu):
            sel = cpu == c
            st = self.stats.get(int(c))
            if st is None:
                st = self.stats[int(c)] = RunStats(*self._args)
            st.add(np.asarray(deadline_tick)[sel], np.asarray(latency_tick)[sel])

    def finish(self) -> dict[int, RunSummary]:
        return {cpu: st.finish()[1] for cpu, st in sorted(self.stats.items())}

    def summaries(self, extra: dict[int, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """``per_cpu`` entries: {"cpu", "samples", ..., latency keys in ns} + ``extra``."""
        out = []
        for cpu, s in self.finish().items():
            entry = {"cpu": cpu, **latency_dict(s, self.tick_hz)}
            entry.update((extra or {}).get(cpu, {}))
            out.append(entry)
        return out
