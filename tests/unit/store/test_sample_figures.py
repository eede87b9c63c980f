"""Exact figures of stored samples without reading them into memory: DuckDB's streamed
passes, DuckDB's quantile_disc and the PostgreSQL lab store's percentile_disc all equal
sorting every sample; a streamed import into either store gives the same summary."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from irqlab.importers import ParseOptions, store_runs, stream_file
from irqlab.importers.ingest import _records
from irqlab.store import PgStore, Store
from irqlab.store.interface import NewRun

QS = [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0]


def reference(lat: np.ndarray, threshold_tick: int) -> tuple:
    srt = np.sort(lat)
    return (lat.size, int(srt[0]), int(srt[-1]), int(np.count_nonzero(lat > threshold_tick)),
            [int(srt[max(1, math.ceil(Fraction(repr(q)) * lat.size)) - 1]) for q in QS])


DATASETS = {
    "lognormal": lambda rng: rng.lognormal(8, 1.2, 200_000).astype(np.int64),
    "ties": lambda rng: np.repeat(np.array([5, 7, 7_000_000], dtype=np.int64),
                                  [90_000, 9_000, 1_000]),
    "negative-and-huge": lambda rng: np.concatenate([
        rng.integers(-2**40, 0, 50_000), rng.integers(2**41, 2**50, 50_000),
        rng.integers(0, 3000, 100_000)]),
    "one": lambda rng: np.array([-3], dtype=np.int64),
}


@pytest.fixture(scope="module")
def pg(pg_server):
    return pg_server            # the session's server (tests/conftest.py): fresh databases


def fill(store, name: str, lat: np.ndarray) -> int:
    rid = store.create_run(NewRun(name, "synthetic", {}, {}, status="ok"))
    # Small batches: the streamed passes cross batch boundaries.
    for start in range(0, lat.size, 30_000):
        part = lat[start:start + 30_000]
        store.add_samples(rid, _records(part, origin=2**41, first_seq=start))
    return rid


def as_tuple(f) -> tuple:
    return (f.count, f.min_tick, f.max_tick, f.above, f.quantile_tick)


@pytest.mark.slow
def test_duckdb_and_postgres_figures_are_exact(tmp_path, pg):
    rng = np.random.default_rng(4)
    data = {name: make(rng) for name, make in DATASETS.items()}
    with Store(tmp_path / "s.duckdb") as st, PgStore(pg.database("figs")) as lab:
        for name, lat in data.items():
            want = reference(lat, 2_000)
            rid, lab_rid = fill(st, name, lat), fill(lab, name, lat)
            assert as_tuple(st.sample_figures(rid, QS, 2_000)) == want, name
            assert as_tuple(st.sample_figures_sql(rid, QS, 2_000)) == want, name
            assert as_tuple(lab.sample_figures(lab_rid, QS, 2_000)) == want, name
            streamed = np.concatenate(list(st.iter_latency(rid, batch=7_000,
                                                           in_sequence=True)))
            assert np.array_equal(streamed, lat)


def test_streamed_import_into_the_lab_store_matches_duckdb(tmp_path, pg):
    path = tmp_path / "k.txt"
    rng = np.random.default_rng(5)
    path.write_text("".join(f"latency: {v}\n" for v in rng.integers(-5, 90_000, 50_000))
                    + "tsc_hz=2000000000\n")
    summaries = []
    for store in (Store(tmp_path / "i.duckdb"), PgStore(pg.database("imp"))):
        with store:
            res = stream_file("tscdeadline", Path(path), ParseOptions())
            [stored] = store_runs(store, [(res.runs, ["k"])], {}, {})
            assert store.sample_count(stored.run_id) == 50_000
            summaries.append({k: v for k, v in stored.summary.items() if k != "run_id"})
    assert summaries[0] == summaries[1]
