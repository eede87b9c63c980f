"""Console decoder on a stream that is already running (a board's UART opened late) and
with the probe's repeated H/T frames: synchronise on the first good frame, nothing
before it is lost, a gap after it is; a restarted probe stops the decoding."""

from __future__ import annotations

import numpy as np

from irqlab.samples.console import ConsoleReader, frame_line
from tests.unit.samples.test_console import PERIOD, header, samples, state

PER_FRAME = 4


def running_stream(n_frames: int, repeat_every: int = 5) -> list[bytes]:
    """A probe that runs on: H, T, then S frames with H + T repeated every
    ``repeat_every`` S frames (as lib/probe.c does every second). Latency = seq."""
    out, fseq, seq = [header(0), state(1, 1, 0)], 2, 0
    for i in range(n_frames):
        if i and i % repeat_every == 0:
            out += [header(fseq), state(fseq + 1, 1, seq)]
            fseq += 2
        items = [f"{seq + k:x}" for k in range(PER_FRAME)]
        out.append(samples(fseq, seq, 1000 + seq * PERIOD, items))
        fseq, seq = fseq + 1, seq + PER_FRAME
    return out


def seqs(r: ConsoleReader) -> np.ndarray:
    return r.poll().records["seq"]


def test_repeated_header_is_accepted_and_counted_not_bad():
    r = ConsoleReader()
    r.feed(b"".join(running_stream(12)))
    got = seqs(r)
    assert np.array_equal(got, np.arange(12 * PER_FRAME))
    assert r.header_repeats == 2 and r.bad_frames == 0 and r.missing_frames == 0
    assert r.lost == 0 and r.state() == "running"


def test_late_attach_mid_line_syncs_on_next_frame_and_loses_nothing_before():
    data = b"".join(running_stream(12))
    starts = [i for i in range(len(data)) if data.startswith(b"~IQS", i)]
    cut = starts[2] + 9                           # inside the third S frame
    r = ConsoleReader(attach=True)
    # What a UART opened late gives: the tail of a frame, then line noise that looks
    # like a frame (a framing error mid-byte), then whole frames.
    r.feed(data[cut:data.index(b"\n", cut) + 1] + b"~IQS,9,0,0,1*00000000\r\n"
           + data[data.index(b"\n", cut) + 1:])
    got = seqs(r)
    # The cut frame and the noise are skipped (not bad); S frames before the repeated H
    # are held and decoded once it arrives: the run starts at the first whole S frame
    # after the cut.
    assert r.skipped_lines == 1 and r.bad_frames == 0
    assert r.lost == 0 and r.magic_ok() and r.state() == "running"
    assert got[0] > 0 and np.array_equal(got, np.arange(got[0], 12 * PER_FRAME))
    assert len(r.poll().records) == 0               # each sample once


def test_late_attach_without_any_header_yet_has_no_magic_and_no_loss():
    stream = running_stream(12)
    r = ConsoleReader(attach=True)
    r.feed(b"".join(stream[-2:]))                 # two S frames, no H seen yet
    assert not r.magic_ok() and r.lost == 0 and r.bad_frames == 0
    assert r.stats()["skipped_frames"] == 2       # held, waiting for the header


def test_gap_after_sync_is_lost():
    stream = running_stream(12)
    del stream[9]                                 # an S frame after the sync point
    r = ConsoleReader(attach=True)
    r.feed(b"".join(stream[6:]))
    seqs(r)
    assert r.lost == PER_FRAME and r.missing_frames == 1


def test_final_state_counts_loss_only_after_sync():
    stream = running_stream(6)
    seq_end = 6 * PER_FRAME
    r = ConsoleReader(attach=True)
    r.feed(b"".join(stream[-3:]) + state(20, 2, seq_end + 3))
    seqs(r)
    # attached at the repeated header: its S frame decoded, 3 never sent are lost
    assert r.state() == "done" and r.lost == 3


def test_probe_restart_stops_decoding_with_an_error():
    r = ConsoleReader()
    r.feed(b"".join(running_stream(6)) + b"".join(running_stream(3)))
    got = seqs(r)
    assert np.array_equal(got, np.arange(6 * PER_FRAME))
    assert r.state() == "error" and "restarted" in r.header().message
    assert r.stats()["ignored_frames"] > 0


def test_changed_header_is_another_run():
    r = ConsoleReader()
    other = frame_line("H", 40, ["1", "2", "3b9aca0", "5", "3", "f4240", "1", "0", "0",
                                 "10000", "0", "irqlab-probe-other"])
    r.feed(b"".join(running_stream(3)) + other)
    assert r.state() == "error" and "header changed" in r.header().message
