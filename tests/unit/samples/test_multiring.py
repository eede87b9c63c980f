"""The multi-ring reader: per-ring loss, watermark merge into window order, finish."""

from __future__ import annotations

import mmap
import os
import struct

import numpy as np
import pytest

from irqlab.samples.multiring import (DIR_SIZE, MR_MAGIC, MultiRingReader, layout_bytes,
                                      ring_stride)
from irqlab.samples.record import RECORD_DTYPE
from irqlab.samples.layout import HEADER_SIZE, RING_MAGIC, RingError

PERIOD = 1000
START = 10_000


class FakeRings:
    """A host-side writer of the directory + rings layout (docs/formats.md section 6)."""

    def __init__(self, cpus: list[int], capacity: int = 64) -> None:
        self.cpus, self.capacity = cpus, capacity
        size = layout_bytes(len(cpus), capacity)
        self.fd = os.memfd_create("irqlab-test-multiring", 0)
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size)
        self.heads = [0] * len(cpus)
        stride = ring_stride(capacity)
        struct.pack_into("<QIIQQIIIIIIQQ", self.map, 0, MR_MAGIC, 1, len(cpus), stride,
                         DIR_SIZE, 1, 0, 1, 90, 0, 0, PERIOD, START)
        struct.pack_into(f"<{len(cpus)}I", self.map, 512, *cpus)
        self.slots = []
        for i in range(len(cpus)):
            base = DIR_SIZE + i * stride
            struct.pack_into("<QIIIIQIIQII", self.map, base, RING_MAGIC, 1,
                             RECORD_DTYPE.itemsize, capacity, 1, 1_000_000_000, 6, 5,
                             PERIOD, 1, 0)
            self.slots.append(np.frombuffer(self.map, RECORD_DTYPE, capacity,
                                            base + HEADER_SIZE))

    @property
    def path(self) -> str:
        return f"/proc/self/fd/{self.fd}"

    def write(self, ring: int, deadlines: list[int], latency: int = 50) -> None:
        for d in deadlines:
            seq = self.heads[ring]
            slot = self.slots[ring][seq % self.capacity]
            slot["seq"], slot["deadline_tick"], slot["entry_tick"] = seq, d, d + latency
            slot["cpu"] = self.cpus[ring]
            self.heads[ring] = seq + 1
        base = DIR_SIZE + ring * ring_stride(self.capacity)
        struct.pack_into("<Q", self.map, base + 56, self.heads[ring])

    def set_ring_state(self, ring: int, state: int) -> None:
        struct.pack_into("<I", self.map, DIR_SIZE + ring * ring_stride(self.capacity) + 48,
                         state)

    def set_progress(self, ring: int, progress_tick: int, busy_start_tick: int = 0,
                     noise_tick: int = 0) -> None:
        """The busy-loop probe's header words (docs/formats.md section 2, offset 440)."""
        struct.pack_into("<QQQ", self.map, DIR_SIZE + ring * ring_stride(self.capacity)
                         + 440, progress_tick, busy_start_tick, noise_tick)

    def close(self) -> None:
        self.slots.clear()
        self.map.close()
        os.close(self.fd)


@pytest.fixture
def rings():
    r = FakeRings([0, 3])
    yield r
    r.close()


def _d(*ks: int) -> list[int]:
    return [START + k * PERIOD for k in ks]


def test_directory_and_header(rings):
    rd = MultiRingReader(rings.path)
    assert rd.magic_ok() and rd.state() == "running" and rd.cpus == [0, 3]
    rings.write(0, _d(1, 2))
    hdr = rd.header()
    assert hdr.tick_hz == 1_000_000_000 and hdr.head == 2 and hdr.capacity == 64
    assert hdr.tick_method == "clock-monotonic" and hdr.timer_mode == "clock-nanosleep"
    d = rd.directory()
    assert d["policy"] == "SCHED_FIFO" and d["priority"] == 90 and d["start_ns"] == START
    rd.close()


def test_watermark_holds_back_until_every_ring_has_passed(rings):
    rd = MultiRingReader(rings.path)
    rings.write(0, _d(1, 2, 3, 4))
    # Ring 1 has written nothing: it could still write deadline START + PERIOD.
    assert len(rd.poll()) == 0 and rd.held_back == 4
    rings.write(1, _d(1, 2))
    got = rd.poll()
    # Ring 1's next deadline is >= _d(3): everything below is released, in order.
    assert list(got.records["deadline_tick"]) == sorted(_d(1, 1, 2, 2))
    assert sorted(set(got.records["cpu"])) == [0, 3]
    rings.write(1, _d(3, 4, 5))
    got = rd.poll()
    assert list(got.records["deadline_tick"]) == _d(3, 3, 4, 4)
    assert rd.held_back == 1        # ring 1's _d(5): ring 0 may still write it
    rd.finish()
    assert list(rd.poll().records["deadline_tick"]) == _d(5)
    assert rd.lost == 0
    rd.close()


def test_a_finished_ring_holds_nothing_back(rings):
    rd = MultiRingReader(rings.path)
    rings.write(0, _d(1, 2, 3))
    rings.set_ring_state(1, 2)      # ring 1 done without a sample
    assert list(rd.poll().records["deadline_tick"]) == _d(1, 2, 3)
    rd.close()


def test_a_ring_that_publishes_its_progress_holds_back_nothing_below_it(rings):
    # The noise probe's rings have no period: a quiet CPU writes nothing for as long as
    # it stays quiet, and only its progress word says it cannot write earlier records.
    rd = MultiRingReader(rings.path)
    rings.write(0, _d(1, 5, 9))
    assert len(rd.poll()) == 0            # ring 1 silent, no progress: all held
    rings.set_progress(1, _d(6)[0], busy_start_tick=START, noise_tick=123)
    assert list(rd.poll().records["deadline_tick"]) == _d(1, 5)
    assert rd.held_back == 1              # _d(9): ring 1 may still write below it
    ring = rd.per_ring()[1]
    assert ring["busy_tick"] == _d(6)[0] - START and ring["noise_tick"] == 123
    assert "busy_tick" not in rd.per_ring()[0]     # a ring with no busy loop
    rd.close()


def test_released_batches_are_in_window_order_whatever_the_interleaving(rings):
    rd = MultiRingReader(rings.path)
    rng = np.random.default_rng(3)
    next_k = [1, 1]
    out = []
    for _ in range(200):
        ring = int(rng.integers(2))
        n = int(rng.integers(1, 5))
        rings.write(ring, _d(*range(next_k[ring], next_k[ring] + n)))
        next_k[ring] += n
        out.append(rd.poll().records["deadline_tick"])
    rd.finish()
    out.append(rd.poll().records["deadline_tick"])
    merged = np.concatenate(out)
    assert np.all(np.diff(merged.astype(np.int64)) >= 0)
    assert len(merged) == sum(next_k) - 2 and rd.lost == 0
    rd.close()


def test_loss_is_counted_per_ring(rings):
    rd = MultiRingReader(rings.path)
    rings.write(0, _d(*range(1, 101)))      # capacity 64: 36 lapped
    rings.write(1, _d(*range(1, 11)))
    rd.finish()
    got = rd.poll()
    per = {r["cpu"]: r for r in rd.per_ring()}
    assert per[0]["lost"] == 36 and per[3]["lost"] == 0 and rd.lost == 36
    assert len(got) == 64 + 10
    rd.close()


def test_bad_directory_is_an_error(rings):
    struct.pack_into("<I", rings.map, 12, 10_000)    # ring count beyond the file
    with pytest.raises(RingError):
        MultiRingReader(rings.path).magic_ok()
