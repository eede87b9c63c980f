"""A run's figures CPU by CPU (`compare --per-cpu`, `check --per-cpu`, the report's
per-CPU table), like cyclictest's ``T:0 … T:1 …`` lines and rtla's per-CPU columns.

Each CPU's figures are the whole run's computation (``irqlab.reports.data.figures``)
over that CPU's samples: a per-CPU RunData holds them (in memory) or reads them from the
store with the selection the run's stored ``per_cpu`` summary used
(``irqlab.store.percentiles``), so a CPU's p99 is the same nearest-rank value in
`run`, `show`, `compare`, `check` and `report`. Its warm max and lost count are its
stored ``per_cpu`` entry's (windows are not kept per CPU).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from irqlab.reports.data import PERCENTILES, RunData, StoredSamples, figures
from irqlab.stats.select import exact_figures
from irqlab.store.percentiles import _cpu_reader   # the per_cpu summary's reader
from irqlab.store.quantiles import StoredFigures

# Said where a run has no per-CPU samples (one stream: a guest's one vCPU, an import).
NO_PER_CPU = "no per-CPU samples (one stream): its figures are the whole run's"


class CpuStoredSamples(StoredSamples):
    """One CPU's samples of a big run kept in the store, read batch by batch."""

    def __init__(self, parent: StoredSamples, cpu: int, count: int) -> None:
        super().__init__(parent.store, parent.run_id, count)
        self.cpu = cpu

    def figures(self, threshold_tick: int | None) -> StoredFigures:
        if threshold_tick not in self._figures:
            got = exact_figures(_cpu_reader(self.store, self.run_id, self.cpu),
                                [q for _, q, _ in PERCENTILES], threshold_tick)
            self._figures[threshold_tick] = StoredFigures(
                got.count, got.min_tick, got.max_tick, got.above, got.quantile_tick)
        return self._figures[threshold_tick]


def run_cpus(run: RunData) -> list[int]:
    """The CPUs a run measured on, when it kept samples per CPU: those of its stored
    ``per_cpu`` summary, else those its raw samples name (more than one); [] else."""
    entries = (run.row.summary or {}).get("per_cpu") or []
    if entries:
        return sorted(int(e["cpu"]) for e in entries)
    if run.cpu is not None and run.cpu.size:
        found = [int(c) for c in np.unique(run.cpu)]
        return found if len(found) > 1 else []
    return []


def cpu_runs(run: RunData) -> list[tuple[int, RunData]]:
    """(cpu, that CPU's RunData) for each CPU of ``run`` (run_cpus)."""
    entries = {int(e["cpu"]): e for e in (run.row.summary or {}).get("per_cpu") or []}
    out = []
    for cpu in run_cpus(run):
        entry = entries.get(cpu, {})
        # The CPU's own summary entry, with the run's threshold and tick rate: figures()
        # reads its warm max, lost count and (without raw samples) its percentiles.
        summary = {**entry, "threshold_ns": run.threshold_ns, "tick_hz": run.tick_hz}
        # Named "NAME T:1" (cyclictest's thread label): its curve in a plot says it.
        row = dataclasses.replace(run.row, summary=summary, name=f"{run.row.name} T:{cpu}")
        sub = RunData(row=row, windows=[])
        if run.stored is not None:
            sub.stored = CpuStoredSamples(run.stored, cpu, int(entry.get("samples") or 0))
        elif run.latency_tick is not None and run.cpu is not None:
            sel = run.cpu == cpu
            sub.latency_tick = run.latency_tick[sel]
            if run.deadline_s is not None:
                sub.deadline_s = run.deadline_s[sel]
            if run.flags is not None:
                sub.flags = run.flags[sel]
            sub.cpu = run.cpu[sel]
        out.append((cpu, sub))
    return out


def per_cpu_figures(run: RunData, threshold_ns: int | None = None
                    ) -> dict[str, dict[str, Any]]:
    """{"0": figures of CPU 0, ...} (JSON keys are strings), {} for a run without
    per-CPU samples."""
    return {str(cpu): {"cpu": cpu, **figures(sub, threshold_ns)}
            for cpu, sub in cpu_runs(run)}
