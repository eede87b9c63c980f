"""The k largest values of a stream, with their positions in it.

A tail fit (irqlab.stats.evt) only looks at the samples above its highest candidate
threshold (the top 2 %) and where they were in the run; keeping just those while a
run's samples stream past (reports/scan.py's one pass) spares a second read of the
store and a sort of every sample. Ties at the k-th value are kept or dropped
arbitrarily: the fit only uses values strictly above its threshold, which is itself one
of the kept values.
"""

from __future__ import annotations

import numpy as np


class TopK:
    """Accumulates the ``k`` largest values seen and their 0-based positions."""

    def __init__(self, k: int) -> None:
        self.k = max(0, int(k))
        self.values = np.empty(0, np.float64)
        self.positions = np.empty(0, np.int64)
        self.seen = 0

    def add(self, values: np.ndarray) -> None:
        """The next batch of the stream (positions continue from the last batch)."""
        values = np.asarray(values, np.float64)
        start, self.seen = self.seen, self.seen + values.size
        if not self.k or not values.size:
            return
        if self.values.size >= self.k:
            # Only values above the smallest kept one can enter: usually a small share.
            idx = np.flatnonzero(values > self.values.min())
        else:
            idx = np.arange(values.size)
        if not idx.size:
            return
        vals = np.concatenate([self.values, values[idx]])
        pos = np.concatenate([self.positions, idx.astype(np.int64) + start])
        if vals.size > self.k:
            keep = np.argpartition(vals, vals.size - self.k)[-self.k:]
            vals, pos = vals[keep], pos[keep]
        self.values, self.positions = vals, pos

    def ascending(self) -> tuple[np.ndarray, np.ndarray]:
        """(values ascending, their positions)."""
        order = np.argsort(self.values, kind="stable")
        return self.values[order], self.positions[order]
