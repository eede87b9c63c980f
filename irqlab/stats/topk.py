"""The k largest values of a stream, with their positions in it.

A tail fit (irqlab.stats.evt) only looks at the samples above its highest candidate
threshold (the top 2 %) and where they were in the run; keeping just those while a
run's samples stream past (reports/scan.py's one pass) spares a second read of the
store and a sort of every sample. Ties at the k-th value are kept or dropped
arbitrarily: the fit only uses values strictly above its threshold, which is itself one
of the kept values.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class TopK:
    """Accumulates the ``k`` largest values seen and their 0-based positions."""

    def __init__(self, k: int) -> None:
        self.k = max(0, int(k))
        self.values = np.empty(0)
        self.positions = np.empty(0, np.int64)
        self.seen = 0
        self._floor: Any = None         # a value must exceed this to be among the top
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_size = 0

    def add(self, values: np.ndarray) -> None:
        """The next batch of the stream (positions continue from the last batch); any
        numeric dtype, kept as given (ticks need no conversion to be ranked)."""
        values = np.asarray(values)
        start, self.seen = self.seen, self.seen + values.size
        if not self.k or not values.size:
            return
        if self._floor is None:
            idx = np.arange(values.size)
        else:
            idx = np.flatnonzero(values > self._floor)
        if idx.size > self.k:           # a batch's own top k first (one partition)
            idx = idx[np.argpartition(values[idx], idx.size - self.k)[-self.k:]]
        if not idx.size:
            return
        self._pending.append((values[idx], idx + start))
        self._pending_size += idx.size
        # Cut back to k only once k more are waiting: one partition per k candidates.
        if self._pending_size >= self.k:
            self._compact()

    def _compact(self) -> None:
        vals = np.concatenate([self.values] + [v for v, _ in self._pending])
        pos = np.concatenate([self.positions] + [p for _, p in self._pending])
        self._pending, self._pending_size = [], 0
        if vals.size > self.k:
            keep = np.argpartition(vals, vals.size - self.k)[-self.k:]
            vals, pos = vals[keep], pos[keep]
        if vals.size and vals.size >= self.k:
            self._floor = vals.min()
        self.values, self.positions = vals, pos

    def ascending(self) -> tuple[np.ndarray, np.ndarray]:
        """(values ascending, their positions)."""
        self._compact()
        order = np.argsort(self.values, kind="stable")
        return self.values[order], self.positions[order]
