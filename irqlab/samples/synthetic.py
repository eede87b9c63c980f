"""A host-side writer of the v1 ring, standing in for the probe in tests and benchmarks.

It follows the probe's protocol (record first, then ``head``) so the reader is exercised
exactly as in a run, at rates no guest reaches.
"""

from __future__ import annotations

import mmap
import os
import struct

import numpy as np

from irqlab.samples.record import RECORD_DTYPE
from irqlab.samples.layout import (HEAD_OFFSET, HEADER_SIZE, OVERRUNS_OFFSET, REF,
                                   REF_OFFSET, RING_MAGIC, RING_OFFSET, RING_VERSION,
                                   STATE_OFFSET, STATE_RUNNING)


class SyntheticRing:
    """Guest memory in a memfd with a ring the caller fills."""

    def __init__(self, capacity: int = 65536, tick_hz: int = 1_000_000_000,
                 period_tick: int = 1_000_000, mem_bytes: int | None = None) -> None:
        size = mem_bytes or RING_OFFSET + HEADER_SIZE + capacity * RECORD_DTYPE.itemsize
        self.fd = os.memfd_create("irqlab-synthetic", 0)
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size)
        self.capacity = capacity
        self.head = 0
        struct.pack_into("<QIIIIQIIQII", self.map, RING_OFFSET, RING_MAGIC, RING_VERSION,
                         RECORD_DTYPE.itemsize, capacity, 1, tick_hz, 4, 2, period_tick,
                         STATE_RUNNING, 0)
        self.slots = np.frombuffer(self.map, RECORD_DTYPE, capacity, RING_OFFSET + HEADER_SIZE)

    @property
    def path(self) -> str:
        return f"/proc/self/fd/{self.fd}"

    def _set_head(self, head: int) -> None:
        self.head = head
        struct.pack_into("<Q", self.map, RING_OFFSET + HEAD_OFFSET, head)

    def write(self, deadline_tick: np.ndarray, entry_tick: np.ndarray,
              flags: np.ndarray | None = None) -> None:
        """Append records (may lap the reader: that is how loss is tested)."""
        n = len(deadline_tick)
        seq = np.arange(self.head, self.head + n, dtype=np.uint64)
        idx = (seq % self.capacity).astype(np.int64)
        self.slots["seq"][idx] = seq
        self.slots["deadline_tick"][idx] = deadline_tick
        self.slots["entry_tick"][idx] = entry_tick
        self.slots["flags"][idx] = 0 if flags is None else flags
        self.slots["cpu"][idx] = 0
        self._set_head(self.head + n)

    def add_overruns(self, n: int) -> None:
        """Count ``n`` more skipped periods in the header, as the probe's rearm does."""
        at = RING_OFFSET + OVERRUNS_OFFSET
        struct.pack_into("<Q", self.map, at, struct.unpack_from("<Q", self.map, at)[0] + n)

    def set_ref_counter(self, code: int, offset_tick: int, error_tick: int) -> None:
        """The reference counter the probe read beside its own (layout REF_COUNTERS)."""
        REF.pack_into(self.map, RING_OFFSET + REF_OFFSET, offset_tick, code, error_tick)

    def set_state(self, state: int, error: int = 0) -> None:
        """Publish the probe's state (layout STATE_*), e.g. done, or error with a code."""
        struct.pack_into("<II", self.map, RING_OFFSET + STATE_OFFSET, state, error)

    def corrupt_seq(self, seq: int, value: int) -> None:
        """Make slot ``seq`` carry a wrong sequence number (a torn or stale slot)."""
        self.slots["seq"][seq % self.capacity] = value

    def close(self) -> None:
        del self.slots
        self.map.close()
        os.close(self.fd)
