"""The flight recorder's own rules (irqlab.trace.recorder), without tracefs: which ring
pages a window keeps, spikes sharing a window, and the worst N kept a day."""

from __future__ import annotations

import os
import struct

from irqlab.trace.recorder import FlightRecorder

PAGE = 4096


def _recorder(tmp_path, keep=2, around_ns=1_000):
    return FlightRecorder(tmp_path / "r.duckdb", 1_000_000, threshold_ns=500,
                          ring_kb=1024, around_ns=around_ns, keep_per_day=keep,
                          clock="mono", kind="native")


def _page(ts: int) -> bytes:
    return struct.pack("<Q", ts) + bytes(PAGE - 8)


def test_pages_wholly_before_the_window_are_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr("irqlab.trace.recorder.RECENT_S", 0.0)    # 2 x around counts
    rec = _recorder(tmp_path)
    rec.page_size = PAGE
    r, w = os.pipe2(os.O_NONBLOCK)
    try:
        for ts in (100, 200, 300, 400):
            os.write(w, _page(ts))
        # lo = 250: the page from 100 ends before 200 (wholly before); the one from 200
        # may hold events after 250 and is kept, as are the later ones.
        kept = rec._window_pages(0, r, 250, now_ns=2_350)
        # Read out, the ring is empty; the pages of the last 2 x around (around 1,000
        # ns: those holding events since 350) stay for the next window, which reaches
        # back into them.
        os.write(w, _page(600))
        again = rec._window_pages(0, r, 350, now_ns=2_600)
        assert [struct.unpack_from("<Q", p)[0] for p in rec._recent[0]] == [400, 600]
    finally:
        os.close(r)
        os.close(w)
    assert [struct.unpack_from("<Q", p)[0] for p in kept] == [200, 300, 400]
    assert [struct.unpack_from("<Q", p)[0] for p in again] == [300, 400, 600]


def test_a_spike_inside_a_pending_window_joins_it(tmp_path):
    rec = _recorder(tmp_path, around_ns=1_000)
    spike = {"seq": 1, "cpu": 0, "deadline_tick": 10_000, "entry_tick": 10_600,
             "latency_ns": 600}
    rec.on_spike(spike)
    rec.on_spike({**spike, "seq": 2, "deadline_tick": 11_000, "entry_tick": 11_900})
    rec.on_spike({**spike, "seq": 3, "deadline_tick": 20_000, "entry_tick": 20_700})
    assert [[s["seq"] for s in p["spikes"]] for p in rec._pending] == [[1, 2], [3]]
    assert (rec._pending[0]["lo"], rec._pending[0]["due"]) == (9_000, 11_600)


def test_over_the_days_limit_the_least_bad_window_goes(tmp_path):
    rec = _recorder(tmp_path, keep=2)
    for seq, lat in ((1, 700), (2, 900), (3, 800)):
        f = tmp_path / f"w{seq}"
        f.write_text("x")
        rec._kept.append({"file": str(f), "seq": seq, "latency_ns": lat,
                          "day": "2026-11-28"})
        rec._limit_day()
    assert [k["seq"] for k in rec._kept] == [2, 3]
    assert not (tmp_path / "w1").exists() and (tmp_path / "w3").exists()
    assert rec.meta["recorder"]["dropped_over_keep"] == 1
    # Another day has its own N.
    f = tmp_path / "w4"
    f.write_text("x")
    rec._kept.append({"file": str(f), "seq": 4, "latency_ns": 1, "day": "2026-11-29"})
    rec._limit_day()
    assert [k["seq"] for k in rec._kept] == [2, 3, 4]
