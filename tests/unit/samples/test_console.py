"""Console sink decoder: good frames, damaged frames counted as lost, gaps, chunking."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.samples.console import ConsoleReader, decode_log, frame_line, parse_frame
from irqlab.samples.layout import RingError

PERIOD = 0xF424          # 62500 ticks: 1 ms at 62.5 MHz
TICK_HZ = 62_500_000


def header(fseq: int = 0) -> bytes:
    return frame_line("H", fseq, ["1", "2", f"{TICK_HZ:x}", "5", "3", f"{PERIOD:x}", "1",
                                  "64", "30d4", "10000", "0", "irqlab-probe-test"])


def state(fseq: int, st: int, head: int, overruns: int = 0, msg: str = "") -> bytes:
    return frame_line("T", fseq, [f"{st:x}", "0", f"{head:x}", f"{overruns:x}", msg])


def samples(fseq: int, seq0: int, first_deadline: int, items: list[str]) -> bytes:
    return frame_line("S", fseq, [f"{seq0:x}", f"{first_deadline - PERIOD:x}",
                                  ";".join(items)])


def stream(n_frames: int = 3, per_frame: int = 4) -> list[bytes]:
    """A run: header, running, n_frames sample frames (latency = seq ticks), done."""
    out = [header(0), state(1, 1, 0)]
    seq = 0
    for i in range(n_frames):
        items = [f"{seq + k:x}" for k in range(per_frame)]
        out.append(samples(2 + i, seq, 1000 + seq * PERIOD, items))
        seq += per_frame
    out.append(state(2 + n_frames, 2, seq))
    return out


def read_all(lines: list[bytes]) -> tuple[ConsoleReader, np.ndarray]:
    r = ConsoleReader()
    r.feed(b"".join(lines))
    return r, r.poll().records


def test_reference_counter_frame_follows_the_header():
    lines = stream()
    r, _recs = read_all(lines)
    assert r.header().ref_counter is None
    ref = frame_line("C", 1, ["1", "-2faf080", "6"])
    renumbered = [lines[0], ref] + [frame_line(k, f + 1, fl) for k, f, fl in
                                    (parse_frame(x) for x in lines[1:])]
    r, recs = read_all(renumbered)
    h = r.header()
    assert (h.ref_counter, h.ref_offset_tick, h.ref_offset_err_tick) == (
        "arm64-cntpct", -50_000_000, 6)
    assert len(recs) == 12 and r.bad_frames == 0 and r.missing_frames == 0
    r, _recs = read_all([lines[0], frame_line("C", 1, ["1"])] + lines[1:])
    assert r.bad_frames == 1 and r.header().ref_counter is None


def test_good_frames_decode_to_ring_records():
    r, recs = read_all([b"irqlab-probe: boot banner\r\n", *stream()])
    assert r.magic_ok() and r.state() == "done"
    h = r.header()
    assert (h.arch, h.tick_hz, h.period_tick, h.timer_mode, h.tick_method) == (
        "arm64", TICK_HZ, PERIOD, "arm64-virtual-timer", "cntfrq")
    assert (h.inject_every, h.inject_irqoff_tick, h.build_id) == (100, 0x30D4,
                                                                   "irqlab-probe-test")
    assert np.array_equal(recs["seq"], np.arange(12))
    assert np.array_equal(recs["deadline_tick"], 1000 + np.arange(12) * PERIOD)
    assert np.array_equal(recs["entry_tick"] - recs["deadline_tick"], np.arange(12))
    assert r.lost == 0 and r.bad_frames == 0 and r.missing_frames == 0


def test_item_with_deadline_step_flags_and_negative_latency():
    lines = [header(0), samples(1, 0, 5000, ["-3", "7:1e848:3", "2::1"])]
    r, recs = read_all(lines)
    assert list(recs["deadline_tick"]) == [5000, 5000 + 0x1E848, 5000 + 0x1E848 + PERIOD]
    assert list(recs["entry_tick"].astype(np.int64) - recs["deadline_tick"].astype(np.int64)) \
        == [-3, 7, 2]
    assert list(recs["flags"]) == [0, 3, 1]


def test_corrupt_frame_is_dropped_and_its_samples_counted_lost():
    lines = stream()
    bad = bytearray(lines[3])
    bad[12] ^= 0x01                      # one flipped bit inside the second S frame
    lines[3] = bytes(bad)
    r, recs = read_all(lines)
    assert r.bad_frames == 1
    assert r.lost == 4                   # the 4 samples it carried, no more
    assert list(recs["seq"]) == [0, 1, 2, 3, 8, 9, 10, 11]


def test_missing_frame_is_a_gap_and_a_missing_frame_number():
    lines = stream()
    del lines[3]
    r, recs = read_all(lines)
    assert r.bad_frames == 0 and r.missing_frames == 1 and r.lost == 4
    assert len(recs) == 8


def test_samples_missing_at_the_end_are_lost_by_the_final_head():
    lines = stream()
    del lines[4]                         # the last S frame: no later S frame shows the gap
    r, recs = read_all(lines)
    assert r.state() == "done" and r.lost == 4 and len(recs) == 8
    assert r.header().head == 12


def test_poll_reports_loss_once_per_batch():
    lines = stream()
    del lines[3]
    r = ConsoleReader()
    r.feed(b"".join(lines[:3]))
    first = r.poll()
    r.feed(b"".join(lines[3:]))
    second = r.poll()
    assert (len(first), first.lost) == (4, 0)
    assert (len(second), second.lost) == (4, 4)
    assert r.poll().lost == 0


def test_any_chunking_and_xen_prefixes_give_the_same_result():
    data = b"".join(b"(d1) " + line for line in stream())
    r = ConsoleReader()
    for i in range(0, len(data), 7):     # arbitrary split points, mid-line included
        r.feed(data[i:i + 7])
    recs = r.poll().records
    assert len(recs) == 12 and r.lost == 0 and r.state() == "done"


def test_streaming_source_with_dropped_bytes_counts_them():
    data = b"".join(stream())
    calls = [(data[:50], 50, 0), (data[80:], len(data), 30)]

    def read(pos: int) -> tuple[bytes, int, int]:
        return calls.pop(0) if calls else (b"", pos, 0)
    r = ConsoleReader(read)
    assert not r.magic_ok() and not r.magic_ok()   # two reads: the header line was cut
    assert r.dropped_bytes == 30
    assert r.state() == "done" and r.bad_frames == 3 and r.lost == 12


def test_header_missing_means_no_header_and_samples_lost():
    lines = stream()[1:]
    r, recs = read_all(lines)
    assert not r.magic_ok()
    with pytest.raises(RingError):
        r.header()
    assert len(recs) == 0 and r.bad_frames == 3   # S frames cannot be decoded
    assert r.lost == 12                           # the final head accounts for them


def test_error_state_message_survives_commas():
    lines = [header(0), state(1, 3, 0, msg="period_ns=5 outside [1000, 60000000000]")]
    r, _ = read_all(lines)
    assert r.state() == "error"
    assert r.header().message == "period_ns=5 outside [1000, 60000000000]"


def test_parse_frame_rejects_truncated_trailer():
    line = header(0)
    assert parse_frame(b"no frame here") is None
    with pytest.raises(ValueError):
        parse_frame(line[:-5])


def test_decode_log_reads_a_saved_file(tmp_path):
    path = tmp_path / "console.log"
    path.write_bytes(b"boot\n" + b"".join(stream())[:-2])   # last newline missing
    reader, batch = decode_log(path)
    assert len(batch) == 12 and reader.state() == "done" and reader.lost == 0
