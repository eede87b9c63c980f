"""Per-CPU statistics beside the whole run's (like cyclictest's per-thread lines).

The samples arrive merged in window order (irqlab.samples.multiring); each CPU's subset
is then in window order too, so each CPU gets an ordinary RunStats.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .fields import stats_figures
from .run import RunStats, RunSummary


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
            entry = {"cpu": cpu, **stats_figures(s, self.tick_hz)}
            entry.update((extra or {}).get(cpu, {}))
            out.append(entry)
        return out
