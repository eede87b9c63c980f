"""Host-side reader of the probe's sample ring in a shared guest-RAM file.

The probe is the only writer; we only read. The protocol (docs/formats.md section 2)
is a single-producer ring with a monotonic ``head``: read head, copy the slots, read
head again, and count as lost anything the writer may have overwritten meanwhile.
"""

from __future__ import annotations

import mmap
import os
import struct

import numpy as np

from irqlab.samples.layout import (ARCH_NAMES, CAPACITY_OFFSET, HEAD_OFFSET, HEADER,
                                   HEADER_SIZE, IDLE_NAMES, PROGRESS, PROGRESS_OFFSET,
                                   REF, REF_OFFSET, RING_MAGIC,
                                   RING_OFFSET, RING_VERSION, STATE_NAMES, STATE_OFFSET,
                                   TICK_METHODS, TIMER_MODES, RingError, RingHeader,
                                   ref_counter_name)
from irqlab.samples.record import RECORD_DTYPE, SampleBatch
from irqlab.samples.source import RingPeek, SampleSource

def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def map_readonly(mem_path: str, min_size: int, what: str) -> tuple[mmap.mmap, int]:
    """Map a shared-memory file read-only; RingError when it cannot hold ``what``."""
    fd = os.open(mem_path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size < min_size:
            raise RingError(f"shared memory {mem_path} is {size} bytes, too small to hold "
                            f"{what}")
        return mmap.mmap(fd, size, prot=mmap.PROT_READ), size
    finally:
        os.close(fd)


class RingReader(SampleSource):
    """Reads sample batches from a guest-RAM file mapped read-only."""

    def __init__(self, mem_path: str, ring_offset: int = RING_OFFSET) -> None:
        self._map, size = map_readonly(mem_path, ring_offset + HEADER_SIZE,
                                       f"the ring at {ring_offset:#x}")
        self._path = mem_path
        self._base = ring_offset
        self._size = size
        self.next_seq = 0
        self.lost = 0
        self._capacity = 0

    def close(self) -> None:
        self._map.close()

    def _u64(self, offset: int) -> int:
        return int.from_bytes(self._map[self._base + offset:self._base + offset + 8], "little")

    def magic_ok(self) -> bool:
        """True once the probe has initialised the ring header."""
        return self._u64(0) == RING_MAGIC

    def state(self) -> str:
        raw = self._map[self._base + STATE_OFFSET:self._base + STATE_OFFSET + 4]
        return STATE_NAMES.get(int.from_bytes(raw, "little"), "unknown")

    def header(self) -> RingHeader:
        """Decode and validate the header; raises RingError when it is not a v1 ring."""
        f = HEADER.unpack_from(self._map, self._base)
        (magic, version, record_size, capacity, arch, tick_hz, tick_method, timer_mode,
         period_tick, state, error, head, overruns, apic_hz, idle, inject_every,
         inject_irqoff_tick, build_id, message) = f
        if magic != RING_MAGIC:
            raise RingError("no irqlab ring in guest memory (bad magic): the probe did not "
                            "start or is not an irqlab probe")
        if version != RING_VERSION or record_size != RECORD_DTYPE.itemsize:
            raise RingError(f"ring version {version} record size {record_size} is not "
                            f"supported (need v{RING_VERSION}/{RECORD_DTYPE.itemsize}): "
                            f"rebuild the probe (make -C probes/guest)")
        end = self._base + HEADER_SIZE + capacity * record_size
        if capacity == 0 or capacity & (capacity - 1) or end > self._size:
            raise RingError(f"ring capacity {capacity} is invalid for a {self._size}-byte "
                            f"guest memory: give the guest more memory (--memory)")
        self._capacity = capacity
        ref_offset_tick, ref_counter, ref_err_tick = REF.unpack_from(self._map,
                                                                     self._base + REF_OFFSET)
        progress, busy_start, noise = PROGRESS.unpack_from(self._map,
                                                           self._base + PROGRESS_OFFSET)
        return RingHeader(
            version=version, record_size=record_size, capacity=capacity,
            arch=ARCH_NAMES.get(arch, f"unknown({arch})"), tick_hz=tick_hz,
            tick_method=TICK_METHODS.get(tick_method, f"unknown({tick_method})"),
            timer_mode=TIMER_MODES.get(timer_mode, f"unknown({timer_mode})"),
            period_tick=period_tick, state=STATE_NAMES.get(state, f"unknown({state})"),
            error=error, head=head, overruns=overruns, apic_hz=apic_hz,
            idle=IDLE_NAMES.get(idle, f"unknown({idle})"), inject_every=inject_every,
            inject_irqoff_tick=inject_irqoff_tick, build_id=_cstr(build_id),
            message=_cstr(message), ref_counter=ref_counter_name(ref_counter),
            ref_offset_tick=ref_offset_tick, ref_offset_err_tick=ref_err_tick,
            progress_tick=progress, busy_start_tick=busy_start, noise_tick=noise)

    def progress_tick(self) -> int:
        """The writer's progress (acquire-ordered before the records it covers: read it
        before polling): no record still unread starts before it; 0 when not kept."""
        return self._u64(PROGRESS_OFFSET)

    def _copy(self, first: int, count: int) -> np.ndarray:
        """Copy ``count`` slots starting at sequence ``first`` (handles the wrap)."""
        cap = self._capacity
        start = first % cap
        n1 = min(count, cap - start)
        recs = self._base + HEADER_SIZE
        size = RECORD_DTYPE.itemsize
        part1 = np.frombuffer(self._map, RECORD_DTYPE, n1, recs + start * size).copy()
        if n1 == count:
            return part1
        part2 = np.frombuffer(self._map, RECORD_DTYPE, count - n1, recs).copy()
        return np.concatenate([part1, part2])

    def poll(self, max_records: int | None = None) -> SampleBatch:
        """Return the records written since the last poll; losses are counted, not hidden."""
        if not self._capacity:
            self.header()
        cap = self._capacity
        head = self._u64(HEAD_OFFSET)
        lost = 0
        first = self.next_seq
        if head < first:
            raise RingError(f"ring head went backwards ({head} < {first}): the guest rebooted "
                            f"or the memory file was reused")
        if head - first > cap:
            # The writer lapped us: the oldest slots are gone.
            lost += head - cap - first
            first = head - cap
        count = head - first
        if max_records is not None:
            count = min(count, max_records)
        if count == 0:
            self.lost += lost
            self.next_seq = first
            return SampleBatch(lost=lost)
        recs = self._copy(first, count)
        head_after = self._u64(HEAD_OFFSET)
        # Slots below head_after - cap may have been rewritten while we copied them.
        overwritten_below = head_after - cap
        expected = np.arange(first, first + count, dtype=np.uint64)
        good = recs["seq"] == expected
        if overwritten_below > first:
            good &= expected >= np.uint64(overwritten_below)
        bad = int(count - np.count_nonzero(good))
        lost += bad
        self.next_seq = first + count
        self.lost += lost
        return SampleBatch(records=recs[good] if bad else recs, lost=lost)

    def peek(self) -> RingPeek:
        return MappedRingPeek(self._path, self._base)


class MappedRingPeek(RingPeek):
    """The newest sample of a ring, read through a mapping of its own."""

    def __init__(self, mem_path: str, ring_offset: int = RING_OFFSET) -> None:
        self._map, _size = map_readonly(mem_path, ring_offset + HEADER_SIZE,
                                        f"the ring at {ring_offset:#x}")
        self._base = ring_offset
        self._capacity = struct.unpack_from("<I", self._map, ring_offset + CAPACITY_OFFSET)[0]

    def latest(self) -> tuple[int, int]:
        head = struct.unpack_from("<Q", self._map, self._base + HEAD_OFFSET)[0]
        if not head or not self._capacity:
            return head, 0
        slot = (self._base + HEADER_SIZE
                + ((head - 1) % self._capacity) * RECORD_DTYPE.itemsize)
        seq, _deadline, entry = struct.unpack_from("<QQQ", self._map, slot)
        return head, entry if seq == head - 1 else 0

    def close(self) -> None:
        self._map.close()
