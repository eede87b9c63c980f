"""The sample record (docs/formats.md, ring version 1) and batches of them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# One 32-byte slot of the ring, exactly as the probe writes it.
RECORD_DTYPE = np.dtype(
    [
        ("seq", "<u8"),
        ("deadline_tick", "<u8"),
        ("entry_tick", "<u8"),
        ("flags", "<u4"),
        ("cpu", "<u4"),
    ]
)

FLAG_INJECTED = 1 << 0
FLAG_AFTER_OVERRUN = 1 << 1


@dataclass
class SampleBatch:
    """Consecutive valid records read in one poll, plus what was lost before them."""

    records: np.ndarray = field(default_factory=lambda: np.empty(0, RECORD_DTYPE))
    lost: int = 0

    def __len__(self) -> int:
        return len(self.records)

    @property
    def latency_tick(self) -> np.ndarray:
        """Signed latency of each record: ISR entry minus programmed deadline."""
        return (self.records["entry_tick"].astype(np.int64)
                - self.records["deadline_tick"].astype(np.int64))

    @property
    def deadline_tick(self) -> np.ndarray:
        return self.records["deadline_tick"].astype(np.int64)
