"""scripts/fuzz-import's cases really store what parses (issue 30): read back from the
worker's store file, every case's runs are there, a rejected case leaves nothing, and a
worker's store file is replaced every K cases and removed at the end."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest

from irqlab.importers.fuzz import (FIXTURES, close_store, fixture_texts, fuzz, mutate,
                                   open_store, replay, run_case_stored)
from irqlab.importers.ingest import StoredRun
from irqlab.store import Store

D = Path(__file__).parents[2] / "fixtures" / "import"


def _assert_read_back(store: Store, fmt: str, file: str, stored: list[StoredRun]) -> None:
    for run in stored:
        row = store.resolve(str(run.run_id))
        assert (row.run_id, row.name, row.status, row.source) == (run.run_id, run.name,
                                                                  "ok", fmt)
        assert row.metadata["import"]["file"] == file
        assert row.summary is not None
        assert row.summary["samples"] == run.summary["samples"]
        assert len(store.windows(run.run_id)) == run.windows
        # add_histograms leaves out empty buckets, so a series of empty buckets has none.
        assert len(store.histogram(run.run_id)) <= run.series
        assert store.sample_count(run.run_id) == run.samples_stored


def test_every_fixture_is_stored_and_read_back_after_the_checkpoint(tmp_path):
    store = open_store(tmp_path)
    total = 0
    for name, fmt, text, hz in fixture_texts(D):
        kind, stored = run_case_stored(store, name, fmt, text, hz)
        assert kind == "accepted" and stored, name
        _assert_read_back(store, fmt, name, stored)
        total += len(stored)
    assert len(store.runs()) == total
    close_store(store)
    # The checkpoint wrote them into the file: a new open reads them all.
    with Store(tmp_path / "fuzz.duckdb", read_only=True) as again:
        assert len(again.runs()) == total


def test_a_streaming_format_is_read_from_its_file_into_sample_files(tmp_path):
    # tscdeadline streams (irqlab import reads it with stream_file): its samples go to
    # the store's sample files while the run is stored, as for a user's import.
    name = "tscdeadline_latency.txt"
    fmt, hz = FIXTURES[name]
    cases = tmp_path / "cases"
    cases.mkdir()
    store = open_store(tmp_path)
    try:
        kind, stored = run_case_stored(store, name, fmt, (D / name).read_text(), hz,
                                       case_dir=cases)
        assert kind == "accepted" and len(stored) == 1
        _assert_read_back(store, fmt, str(cases / name), stored)
        assert stored[0].samples_stored == 10
        assert store.sample_file_rows(stored[0].run_id)        # files, not table rows
    finally:
        close_store(store)


def test_mutated_cases_land_whole_or_not_at_all(tmp_path):
    store = open_store(tmp_path)
    sources = fixture_texts(D)
    kinds = set()
    try:
        for k in range(len(sources)):
            name, fmt, text, hz = sources[k % len(sources)]
            crng = random.Random(1000 + k)
            mutated = mutate(crng, text)
            before = len(store.runs())
            kind, stored = run_case_stored(store, name, fmt, mutated, hz, crng.random() < 0.3)
            kinds.add(kind)
            assert len(store.runs()) == before + len(stored), (name, kind)
            if kind == "accepted":
                _assert_read_back(store, fmt, name, stored)
            else:
                assert kind in ("rejected", "store-rejected") and not stored
    finally:
        close_store(store)
    assert {"accepted", "rejected"} <= kinds


def test_worker_store_rotates_and_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = fuzz(12, D, seed=4, rotate_every=5)
    assert (out.cases, out.crashes, out.store_crashes) == (12, 0, 0)
    assert out.stores_opened == 3                      # cases 0-4, 5-9, 10-11
    assert out.accepted and out.runs_stored >= out.accepted
    assert list(tmp_path.iterdir()) == []


def test_replay_gives_the_case_fuzz_ran(tmp_path):
    # fuzz's first case: fixture 0 mutated by Random(the first 48 bits of Random(seed)),
    # whose next draw decides --skip-bad.
    name = next(iter(FIXTURES))
    case_seed = random.Random(7).getrandbits(48)
    fmt, hz = FIXTURES[name]
    crng = random.Random(case_seed)
    assert replay(D, name, case_seed, skip_bad=False) == mutate(crng, (D / name).read_text())
    skip_bad = crng.random() < 0.3
    text = replay(D, name, case_seed, skip_bad)
    store = open_store(tmp_path)
    try:
        kind, stored = run_case_stored(store, name, fmt, text, hz, skip_bad)
        ran = fuzz(1, D, seed=7, store=store)
        assert (ran.accepted, ran.rejected + ran.store_rejected) == (
            (1, 0) if kind == "accepted" else (0, 1))
        assert ran.runs_stored == len(stored)
    finally:
        close_store(store)


@pytest.mark.slow
def test_ctrl_c_ends_the_campaign_with_its_figures_and_no_crash(tmp_path):
    """SIGINT inside a case became DuckDB's InterruptException, counted as a crash (seen
    in a 70,000-case run stopped by hand); now the case at hand ends and the figures of
    the cases run are printed, exit 0."""
    import os
    import signal
    import subprocess
    import sys
    import time
    script = Path(__file__).parents[3] / "scripts" / "fuzz-import"
    proc = subprocess.Popen([sys.executable, str(script), "1000000", "--seed", "5"],
                            env={**os.environ, "TMPDIR": str(tmp_path)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("irqlab-fuzz-*/*.duckdb")):   # the worker's store: running
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    time.sleep(1.0)                    # cases under way
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:        # it did not stop: leave no fuzz running
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, (out[-2000:], err[-2000:])
    assert "Traceback" not in err
    (line,) = [x for x in out.splitlines() if x.startswith("cases ")]
    cases = int(line.split()[1].rstrip(":"))
    assert 0 < cases < 1_000_000 and "crashes 0;" in line and "failed checkpoints 0" in line
    assert not list(tmp_path.glob("irqlab-fuzz-*"))          # its store removed
