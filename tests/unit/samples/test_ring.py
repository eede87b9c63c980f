"""Ring reader against a synthetic writer: counts, order, wrap, loss."""

import numpy as np
import pytest

from irqlab.samples.ring import RingError, RingReader
from irqlab.samples.synthetic import SyntheticRing


def _write(ring: SyntheticRing, n: int, start_deadline: int = 0) -> np.ndarray:
    deadline = start_deadline + np.arange(n, dtype=np.uint64) * 1000
    latency = np.random.default_rng(n).integers(0, 500, n).astype(np.uint64)
    ring.write(deadline, deadline + latency)
    return latency


def test_reads_everything_in_order_across_wraps():
    ring = SyntheticRing(capacity=64)
    reader = RingReader(ring.path)
    got = []
    expect = []
    for i in range(20):
        expect.append(_write(ring, 50, start_deadline=i * 50_000))
        batch = reader.poll()
        assert batch.lost == 0
        got.append(batch.latency_tick)
    assert np.array_equal(np.concatenate(got), np.concatenate(expect).astype(np.int64))
    assert reader.next_seq == 1000 and reader.lost == 0
    reader.close()
    ring.close()


def test_lapped_reader_counts_the_overwritten_records_as_lost():
    ring = SyntheticRing(capacity=64)
    reader = RingReader(ring.path)
    _write(ring, 200)
    batch = reader.poll()
    assert batch.lost == 200 - 64
    assert len(batch) == 64
    assert batch.records["seq"][0] == 136
    reader.close()
    ring.close()


def test_wrong_sequence_number_is_lost_not_a_sample():
    ring = SyntheticRing(capacity=64)
    reader = RingReader(ring.path)
    _write(ring, 10)
    ring.corrupt_seq(4, 999)
    batch = reader.poll()
    assert batch.lost == 1 and len(batch) == 9
    assert 4 not in batch.records["seq"]
    reader.close()
    ring.close()


def test_header_is_decoded():
    ring = SyntheticRing(capacity=128, tick_hz=2_500_000_000, period_tick=2_500_000)
    reader = RingReader(ring.path)
    hdr = reader.header()
    assert (hdr.capacity, hdr.tick_hz, hdr.period_tick, hdr.arch) == (128, 2_500_000_000,
                                                                       2_500_000, "x86_64")
    assert hdr.state == "running"
    reader.close()
    ring.close()


def test_reference_counter_offset_is_decoded_signed():
    ring = SyntheticRing(capacity=64)
    reader = RingReader(ring.path)
    assert reader.header().ref_counter is None and reader.header().ref_meta() is None
    ring.set_ref_counter(1, -123_456_789_012, 3)
    hdr = reader.header()
    assert (hdr.ref_counter, hdr.ref_offset_tick, hdr.ref_offset_err_tick) == (
        "arm64-cntpct", -123_456_789_012, 3)
    assert hdr.ref_meta() == {"counter": "arm64-cntpct", "offset_tick": -123_456_789_012,
                              "error_tick": 3}
    ring.set_ref_counter(9, 5, 0)
    assert reader.header().ref_counter == "unknown(9)"
    reader.close()
    ring.close()


def test_no_ring_is_an_error_naming_the_cause():
    ring = SyntheticRing(capacity=64)
    ring.map[0x400000:0x400008] = b"\0" * 8
    reader = RingReader(ring.path)
    assert not reader.magic_ok()
    with pytest.raises(RingError, match="bad magic"):
        reader.header()
    reader.close()
    ring.close()
