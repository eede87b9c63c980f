"""Store: schema, run lifecycle, lossless samples, resolution by id and name."""

import duckdb
import numpy as np
import pytest

from irqlab.samples.record import RECORD_DTYPE
from irqlab.store import Store, StoreError
from irqlab.store.interface import NewRun


def _records(n: int, start: int = 0) -> np.ndarray:
    rec = np.zeros(n, RECORD_DTYPE)
    rec["seq"] = np.arange(start, start + n)
    rec["deadline_tick"] = rec["seq"] * 1000 + (1 << 63)  # uses the top bit: u64 kept
    rec["entry_tick"] = rec["deadline_tick"] + 7
    rec["flags"] = rec["seq"] % 3
    return rec


def test_samples_round_trip_losslessly(tmp_path):
    with Store(tmp_path / "x.duckdb") as st:
        rid = st.create_run(NewRun("a", "guest", {"period_ns": 1}, {"k": "v"}))
        st.add_samples(rid, _records(1000))
        st.add_samples(rid, _records(500, start=1000))
        st.finish_run(rid, "ok", {"samples": 1500})
    with Store(tmp_path / "x.duckdb", read_only=True) as st:
        assert st.sample_count(rid) == 1500
        back = np.concatenate([b.column("deadline_tick").to_numpy()
                               for b in st.iter_samples(rid, batch=400)])
        want = np.concatenate([_records(1000), _records(500, 1000)])
        assert np.array_equal(back, want["deadline_tick"])
        row = st.resolve(str(rid))
        assert row.status == "ok" and row.summary == {"samples": 1500}
        assert row.params == {"period_ns": 1} and row.metadata == {"k": "v"}


def test_resolve_by_name_takes_the_latest(tmp_path):
    with Store(tmp_path / "x.duckdb") as st:
        first = st.create_run(NewRun("same", "guest", {}, {}))
        second = st.create_run(NewRun("same", "guest", {}, {}))
        assert st.resolve("same").run_id == second != first
        with pytest.raises(StoreError, match="irqlab list"):
            st.resolve("nope")


def test_refuses_foreign_database(tmp_path):
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (x INT)")
    con.close()
    with pytest.raises(StoreError, match="not irqlab's"):
        Store(path)
    with pytest.raises(StoreError, match="not an irqlab database"):
        Store(path, read_only=True)


def test_missing_database_read_only_says_what_to_do(tmp_path):
    with pytest.raises(StoreError, match="irqlab run"):
        Store(tmp_path / "none.duckdb", read_only=True)


def test_windows_round_trip(tmp_path):
    w = {"index": 0, "start_s": 0.0, "samples": 10, "mean_ns": 5, "stddev_ns": 1,
         "min_ns": 3, "max_ns": 9, "above_threshold": 2, "global_min_ns": 3,
         "global_max_ns": 9}
    empty = dict(w, index=1, start_s=10.0, samples=0, mean_ns=None, stddev_ns=None,
                 min_ns=None, max_ns=None, above_threshold=0)
    with Store(tmp_path / "x.duckdb") as st:
        rid = st.create_run(NewRun("w", "guest", {}, {}))
        st.add_windows(rid, [w, empty])
        assert st.windows(rid) == [w, empty]


def test_v1_database_is_upgraded_in_place_keeping_its_runs(tmp_path):
    from irqlab.store.schema import MIGRATIONS, SCHEMA_VERSION

    path = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(path))
    for stmt in MIGRATIONS[1]:
        con.execute(stmt)
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("INSERT INTO runs (name, target, status, started_at, params, metadata) "
                "VALUES ('old', 'guest', 'ok', now()::TIMESTAMP, '{}', '{}')")
    con.close()
    with Store(path) as st:
        row = st.resolve("old")
        assert (row.kind, row.source, row.tags) == ("latency", "irqlab", {})
    with Store(path, read_only=True) as st:
        assert st._version() == SCHEMA_VERSION


def test_histogram_and_tags_round_trip(tmp_path):
    with Store(tmp_path / "x.duckdb") as st:
        rid = st.create_run(NewRun("imp", "board", {}, {}, source="cyclictest",
                                   tags={"board": "rcar"}, status="ok"))
        st.add_histogram(rid, "cpu0", [(0, 1000, 5), (1000, 2000, 0), (2000, None, 2)])
        row = st.resolve("imp")
        assert row.tags == {"board": "rcar"} and row.source == "cyclictest"
        assert st.histogram(rid) == {"cpu0": [(0, 1000, 5), (2000, None, 2)]}
