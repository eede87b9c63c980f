"""``overruns`` of a run given ``--duration D``: the periods skipped within D, as its
samples are, not the probe's own counter for its whole run (issue 27, DurationBound).

The fake probe skips 2 periods after every 50th sample and counts them in its ring
header, as the probes' rearm does; 600 of its samples wait in the ring when the host
starts reading, so its counter holds skips far past the end before the run reads one.
"""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.measure import config_for_target, run
from irqlab.measure.stream import DurationBound
from irqlab.samples.record import RECORD_DTYPE
from irqlab.store import Store
from irqlab.targets import TARGETS
from tests.unit.measure.fake_target import SKIPPED_PERIODS, FakeTarget

PERIOD_NS = 1_000_000
SKIP_EVERY = 50


class Quiet:
    """An Observer that keeps nothing but the notices."""

    def __init__(self) -> None:
        self.notices: list[str] = []

    def on_started(self, info):
        pass

    def on_window(self, window, line):
        pass

    def on_progress(self, fraction, detail):
        pass

    def on_notice(self, text):
        self.notices.append(text)


@pytest.fixture
def fake(monkeypatch):
    target = FakeTarget(backlog=600, skip_every=SKIP_EVERY)
    monkeypatch.setitem(TARGETS, "fake", target)
    yield target
    target.close()


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.duckdb") as s:
        yield s


def _cfg(periods: int):
    return config_for_target("fake", {}, period_ns=PERIOD_NS, window_ns=100 * PERIOD_NS,
                             threshold_ns=30_000, duration_ns=periods * PERIOD_NS)


def test_overruns_are_the_skipped_periods_within_the_duration(fake, store):
    # Deadlines are periods 1..50, 53..102, ... (2 skipped after every 50th sample). D =
    # 259 periods ends inside the 5th skip (periods 259 and 260 skipped): samples
    # 1..250, skipped 4 x 2 + 1 = 9, and samples + overruns = D / period.
    res = run(_cfg(259), store, Quiet())
    s = res.summary
    assert res.status == "ok", s["message"]
    assert (s["samples"], s["lost"], s["overruns"]) == (250, 0, 9)
    bound = store.resolve(str(res.run_id)).metadata["duration_bound"]
    assert bound["overruns"] == 9
    # The probe's counter had every skip of its 600 buffered samples (11 x 2) and more.
    assert bound["probe_overruns"] >= 11 * SKIPPED_PERIODS
    assert bound["samples_after_end"] > 0


def test_a_lost_record_is_not_a_skipped_period():
    # seq 0, 1 at periods 0, 1; seq 2 lost; seq 3, 4 at periods 5, 6: of periods 2..4 one
    # fired (its record lost), two were skipped. seq 5 at period 12 is past the end (900
    # ticks, period 9): of the 5 skipped periods 7..11, 7 and 8 are within it.
    recs = np.zeros(5, dtype=RECORD_DTYPE)
    recs["seq"] = [0, 1, 3, 4, 5]
    recs["deadline_tick"] = np.array([0, 1, 5, 6, 12]) * 100
    recs["entry_tick"] = recs["deadline_tick"] + 5
    bound = DurationBound(duration_ns=900, tick_hz=1_000_000_000, period_tick=100)
    inside = bound.keep(recs["deadline_tick"])
    bound.count_skipped(recs)
    assert inside is not None and inside.tolist() == [True] * 4 + [False]
    assert bound.overruns == 2 + 2
    # A later read adds nothing: that CPU's stream has passed the end.
    more = np.zeros(1, dtype=RECORD_DTYPE)
    more["seq"], more["deadline_tick"] = 6, 1500
    bound.keep(more["deadline_tick"])
    bound.count_skipped(more)
    assert bound.overruns == 4


def test_without_the_probes_period_the_bound_counts_nothing():
    recs = np.zeros(2, dtype=RECORD_DTYPE)
    recs["seq"], recs["deadline_tick"] = [0, 1], [0, 500]
    bound = DurationBound(duration_ns=1000, tick_hz=1_000_000_000)
    bound.keep(recs["deadline_tick"])
    bound.count_skipped(recs)
    assert not bound.counts_overruns
    assert bound.metadata()["overruns"] is None


def test_send_time_deadlines_count_every_skipped_period():
    # The net sender's deadline_tick is its send time, late behind its 100-tick
    # schedule (netsend.c): seq 3 (due at 300) goes at 480 and the sender skips 400;
    # seq 6 (due at 700) goes at 950 and skips 800 and 900. Of the 10 periods of
    # [0, 1000), 7 sent and 3 skipped; summing floor(gap / period) pair by pair
    # counted 2.
    recs = np.zeros(8, dtype=RECORD_DTYPE)
    recs["seq"] = np.arange(8)
    recs["deadline_tick"] = [0, 190, 210, 480, 500, 699, 950, 1001]
    recs["entry_tick"] = recs["deadline_tick"] + 40
    bound = DurationBound(duration_ns=1000, tick_hz=1_000_000_000, period_tick=100)
    bound.keep(recs["deadline_tick"][:6])
    bound.count_skipped(recs[:6])
    assert bound.overruns == 1                    # so far: 400 skipped, up to seq 5
    bound.keep(recs["deadline_tick"][6:])
    bound.count_skipped(recs[6:])
    assert bound.overruns == 3
    assert 7 + bound.overruns == 1000 // 100
