"""A finished run's summary holds the exact nearest-rank percentiles of its stored samples
(issue 27: one value per percentile), not the live histogram's estimate."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.measure import run
from irqlab.samples.record import RECORD_DTYPE
from irqlab.stats import LogHistogram, quantile_rank, ticks_to_ns
from irqlab.stats.fields import PERCENTILE_FIELDS, SUMMARY_FIELDS
from irqlab.store import Store
from irqlab.store.percentiles import with_exact_percentiles
from irqlab.store.interface import NewRun
from tests.unit.measure.test_run_flow import Recorder, _cfg, fake, store  # noqa: F401
from tests.unit.robust.test_dead_runs import _dead_pid


def _nearest_rank_ns(latency_tick: np.ndarray, tick_hz: int) -> dict[str, int]:
    """The reference: sort every sample, take the ceil(q*n)-th (Hyndman & Fan def. 1)."""
    srt = np.sort(latency_tick)
    return {f.key: ticks_to_ns(int(srt[quantile_rank(f.quantile, srt.size) - 1]), tick_hz)
            for f in PERCENTILE_FIELDS}


def _stored_latency(store: Store, run_id: int) -> np.ndarray:
    return np.concatenate([e - d for d, e, _f in store.iter_samples_by_deadline(run_id)])


@pytest.mark.slow
def test_a_measured_run_summary_has_the_exact_percentiles_of_its_samples(
        fake, store):  # noqa: F811
    fake()
    res = run(_cfg(samples=1000, duration_ns=None), store, Recorder())
    assert res.status == "ok", res.summary["message"]
    lat = _stored_latency(store, res.run_id)
    assert lat.size == res.summary["samples"] == 1000
    want = _nearest_rank_ns(lat, 1_000_000_000)
    got = {f.key: res.summary[f.key] for f in PERCENTILE_FIELDS}
    assert got == want and res.summary["percentiles_from"] == "exact"
    # The fake probe's 5 us: the histogram said the top of its bucket (5,023 ns), the
    # exact value is 5,000 ns.
    hist = LogHistogram()
    hist.add(lat)
    assert hist.quantile(0.5) != want["p50_ns"] == 5_000
    # What is stored is what was printed.
    stored = store.resolve(str(res.run_id)).summary
    assert {f.key: stored[f.key] for f in PERCENTILE_FIELDS} == want
    assert stored["percentiles_from"] == "exact"
    assert list(stored)[:len(SUMMARY_FIELDS)] == [f.key for f in SUMMARY_FIELDS]


def _records(latency_ns: np.ndarray) -> np.ndarray:
    recs = np.zeros(latency_ns.size, dtype=RECORD_DTYPE)
    recs["seq"] = np.arange(latency_ns.size)
    recs["deadline_tick"] = (np.arange(latency_ns.size) + 1) * 1_000_000
    recs["entry_tick"] = recs["deadline_tick"] + latency_ns
    return recs


def test_a_run_closed_as_died_gets_exact_percentiles(tmp_path):
    rng = np.random.default_rng(7)
    lat = rng.lognormal(10, 0.6, 5_000).astype(np.int64)      # ~22 us, a long tail
    db = tmp_path / "r.duckdb"
    with Store(db) as s:
        run_id = s.create_run(NewRun("killed", "guest", {"window_ns": 1_000_000_000,
                                                         "threshold_ns": 30_000, "warmup": 1},
                                     {"writer": {"pid": _dead_pid(), "starttime": 1}}))
        s.update_run(run_id, tick_hz=1_000_000_000, period_ns=1_000_000,
                     threshold_ns=30_000, accel="tcg")
        s.add_samples(run_id, _records(lat))
    with Store(db) as s:                       # this open closes it as died
        summary = s.resolve(str(run_id)).summary
    assert summary["status"] == "died" and summary["percentiles_from"] == "exact"
    assert {f.key: summary[f.key] for f in PERCENTILE_FIELDS} == \
        _nearest_rank_ns(lat, 1_000_000_000)


def test_a_store_lacking_samples_keeps_the_estimate_and_says_so(tmp_path):
    lat = np.arange(1_000, 2_000, dtype=np.int64)
    with Store(tmp_path / "r.duckdb") as s:
        run_id = s.create_run(NewRun("short", "guest", {}, {}))
        s.add_samples(run_id, _records(lat[:900]))          # 100 never stored
        summary = {"samples": 1000, "tick_hz": 1_000_000_000, "p50_ns": 1_504,
                   "percentiles_from": "histogram"}
        with_exact_percentiles(s, run_id, summary)
        assert summary == {"samples": 1000, "tick_hz": 1_000_000_000, "p50_ns": 1_504,
                           "percentiles_from": "histogram"}
        summary = {"samples": 900, "tick_hz": 1_000_000_000, "p50_ns": 1_454,
                   "percentiles_from": "histogram"}
        with_exact_percentiles(s, run_id, summary)
        assert summary["p50_ns"] == 1_449 and summary["percentiles_from"] == "exact"
