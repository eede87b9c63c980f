"""`irqlab explain` prints little by default (issue 29): the top culprits, where the time
goes (each step once) and the 10 worst samples; `--all` prints every sample. On the
stored real capture (tests/unit/explain/data) with 2,000 samples inside it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from irqlab.measure import window_dict
from irqlab.samples.record import RECORD_DTYPE
from irqlab.stats import RunStats
from irqlab.store import Store
from irqlab.store.interface import NewRun
from tests.conftest import call_cli

CAPTURE = (Path(__file__).parents[1] / "unit" / "explain" / "data"
           / "idle_exit_unrecorded.irqtrace.gz")
SPAN_START = 5906602402638                  # the capture's start marker (ticks, 1 GHz)
N_SAMPLES, PERIOD_NS, SPIKE_EVERY, SPIKE_NS = 2000, 90_000, 4, 60_000


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("concise") / "irqlab.duckdb"
    tick_hz = 1_000_000_000
    with Store(path) as st:
        meta = {"host": {"hostname": "h"}, "probe": {"timer_mode": "tsc-deadline"},
                "hooks": {"trace": {"file": str(CAPTURE)}}}
        rid = st.create_run(NewRun("traced", "guest", {"window_ns": 10**9, "warmup": 1,
                                                       "period_ns": PERIOD_NS}, meta,
                                   tags={"series": "t"}))
        st.update_run(rid, arch="x86_64", accel="kvm", emulated=False, tick_hz=tick_hz,
                      period_ns=PERIOD_NS, threshold_ns=30_000)
        rec = np.zeros(N_SAMPLES, RECORD_DTYPE)
        rec["seq"] = np.arange(N_SAMPLES)
        rec["deadline_tick"] = SPAN_START + 100_000 + rec["seq"] * PERIOD_NS
        # Spikes of different sizes, so "the worst" is a real choice.
        lat = np.where(rec["seq"] % SPIKE_EVERY == 0, SPIKE_NS + rec["seq"], 5_000)
        rec["entry_tick"] = rec["deadline_tick"] + lat.astype(np.uint64)
        stats = RunStats(tick_hz, 30_000, 10**9, 1)
        wins = stats.add(rec["deadline_tick"].astype(np.int64), lat.astype(np.int64))
        last, s = stats.finish()
        st.add_windows(rid, [window_dict(w, tick_hz) for w in wins + last])
        st.add_samples(rid, rec)
        st.finish_run(rid, "ok", {"type": "summary", "version": 1, "run_id": rid,
                                  "name": "traced", "samples": s.samples,
                                  "tick_hz": tick_hz, "status": "ok"})
        # A later run of the series without a capture: `explain series:t` passes it by.
        later = st.create_run(NewRun("traced", "guest", {"window_ns": 10**9, "warmup": 1,
                                                         "period_ns": PERIOD_NS},
                                     {"host": {"hostname": "h"}}, tags={"series": "t"}))
        st.finish_run(later, "ok", {"type": "summary", "version": 1, "run_id": later,
                                    "name": "traced", "samples": 0, "status": "ok"})
    return path


def _sample_lines(out: str) -> list[int]:
    return [int(line.split()[1].rstrip(":")) for line in out.splitlines()
            if line.startswith("sample ")]


def test_default_output_is_short_and_shows_the_worst(db: Path) -> None:
    res = call_cli(["explain", "1"], db)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) <= 60, res.stdout
    spikes = N_SAMPLES // SPIKE_EVERY
    worst = sorted(range(0, N_SAMPLES, SPIKE_EVERY), reverse=True)[:10]
    assert _sample_lines(res.stdout) == worst
    assert f"({spikes - 10} more samples" in res.stdout
    # Each block once (the stage table was printed twice before issue 29); this capture
    # has no KVM events, so its samples have no stages to tabulate.
    assert res.stdout.count("where the time goes") <= 1
    assert res.stdout.count("top culprits") == 1
    culprits = [line.split(" total ")[0] for line in lines if " total " in line]
    assert culprits and len(culprits) == len(set(culprits)), culprits


def test_all_prints_every_sample(db: Path) -> None:
    res = call_cli(["explain", "1", "--all"], db)
    assert res.code == 0, res.stderr
    assert sorted(_sample_lines(res.stdout)) == list(range(0, N_SAMPLES, SPIKE_EVERY))
    assert "more samples" not in res.stdout


def test_a_native_run_with_a_tsc_capture_is_one_clear_error(tmp_path: Path) -> None:
    """Native runs recorded before 2026-11-26 have an x86-tsc capture: the native
    explainer needs CLOCK_MONOTONIC and says how to get it (exit 2, one line)."""
    path = tmp_path / "irqlab.duckdb"
    with Store(path) as st:
        rid = st.create_run(NewRun("old-native", "native", {"window_ns": 10**9, "warmup": 1,
                                                            "period_ns": PERIOD_NS},
                                   {"hooks": {"trace": {"file": str(CAPTURE)}}}))
        st.update_run(rid, arch="x86_64", tick_hz=10**9, period_ns=PERIOD_NS,
                      threshold_ns=30_000)
        rec = np.zeros(4, RECORD_DTYPE)
        rec["seq"] = np.arange(4)
        rec["deadline_tick"] = SPAN_START + rec["seq"] * PERIOD_NS
        rec["entry_tick"] = rec["deadline_tick"] + np.uint64(50_000)
        st.add_samples(rid, rec)
        st.finish_run(rid, "ok", {"type": "summary", "version": 1, "run_id": rid,
                                  "name": "old-native", "samples": 4, "tick_hz": 10**9,
                                  "status": "ok"})
    res = call_cli(["explain", "old-native"], path)
    assert res.code == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "x86-tsc clock" in lines[0] and "--trace" in lines[0], lines
    assert "Traceback" not in res.stderr


def test_a_series_explains_its_latest_traced_run_within_120_columns(db: Path) -> None:
    # issue 46: `explain series:NAME` said "no run 'series:...'"; lines reached 650
    # columns; causes "in 0 samples" were listed.
    res = call_cli(["explain", "series:t"], db)
    assert res.code == 0, res.stderr
    assert res.stdout == call_cli(["explain", "1"], db).stdout
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120, max(lines, key=len)
    assert "in 0 samples" not in res.stdout
    wide = call_cli(["explain", "1", "--wide"], db)
    assert wide.code == 0 and max(len(x) for x in wide.stdout.splitlines()) > 120


def test_a_selector_without_a_traced_run_is_one_line(db: Path, tmp_path: Path) -> None:
    res = call_cli(["explain", "2"], db)
    assert res.code == 2
    res = call_cli(["explain", "tag:nope=1"], db)
    assert res.code == 2 and len(res.stderr.strip().splitlines()) == 1
