"""Sample files (store/sample_files.py, schema v4): a run kept in Parquet files beside the
database reads back exactly as the same samples kept in the table, through every reader
of the store; files of uncommitted rows are swept by the next writer; failures are one
clear error and never touch what was committed."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.samples.record import RECORD_DTYPE
from irqlab.store import Store, StoreError, StoreWriteError
from irqlab.store.sample_files import Writer, files_root, record_batch, run_dir
from irqlab.store.interface import NewRun


def _records(n: int, start: int = 0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed + start)
    rec = np.zeros(n, RECORD_DTYPE)
    rec["seq"] = np.arange(start, start + n)
    rec["deadline_tick"] = rec["seq"] * 1000 + (1 << 63)      # the top bit: u64 kept
    rec["entry_tick"] = rec["deadline_tick"] + rng.integers(0, 5000, n).astype(np.uint64)
    rec["entry_tick"][::97] = rec["deadline_tick"][::97] - np.uint64(3)   # negative
    rec["flags"] = rec["seq"] % 3
    rec["cpu"] = rec["seq"] % 2
    return rec


def _pair(st: Store) -> tuple[int, int]:
    """Two runs with the same samples: one in the table, one in files."""
    table = st.create_run(NewRun("table", "guest", {}, {}))
    files = st.create_run(NewRun("files", "guest", {}, {}))
    assert st.keep_samples_in_files(files)
    for rid in (table, files):
        st.add_samples(rid, _records(3000))
        st.add_sample_stream(rid, iter([_records(2000, 3000), _records(0),
                                        _records(1500, 5000)]))
        with st.transaction():
            st.add_samples(rid, _records(700, 6500))
    return table, files


def _cat(batches, key: int | str = 0) -> np.ndarray:
    parts = [b[key] if isinstance(b, tuple) else
             (b.column(key).to_numpy() if hasattr(b, "column") else b) for b in batches]
    return np.concatenate(parts) if parts else np.array([])


def test_every_reader_sees_the_same_samples_as_the_table(tmp_path) -> None:
    db = tmp_path / "x.duckdb"
    with Store(db) as st:
        table, files = _pair(st)
        assert st._query("SELECT count(*) FROM samples WHERE run_id = ?",
                         [files]).fetchone() == (0,)
        assert len(list(run_dir(db, files).glob("*.parquet"))) == 4
    with Store(db, read_only=True) as st:
        assert st.sample_count(files) == st.sample_count(table) == 7200
        for kw in ({}, {"in_sequence": True}, {"with_deadline": True}):
            a = list(st.iter_latency(table, batch=1000, **kw))
            b = list(st.iter_latency(files, batch=1000, **kw))
            assert np.array_equal(_cat(a), _cat(b))
        assert np.array_equal(_cat(st.iter_latency_sorted(files)),
                              _cat(st.iter_latency_sorted(table)))
        for key in ("seq", "deadline_tick", "entry_tick", "flags", "cpu"):
            assert np.array_equal(_cat(st.iter_samples(files, batch=999), key),
                                  _cat(st.iter_samples(table, batch=999), key))
        for i in range(3):
            assert np.array_equal(_cat(st.iter_samples_by_deadline(files), i),
                                  _cat(st.iter_samples_by_deadline(table), i))
        qs = [0.5, 0.99, 0.999, 1.0]
        assert st.sample_figures(files, qs, 4000) == st.sample_figures(table, qs, 4000)
        assert st.sample_figures_sql(files, qs, 4000) == st.sample_figures(table, qs, 4000)


def test_latency_streams_and_origin_shifts_match_the_table(tmp_path) -> None:
    with Store(tmp_path / "x.duckdb") as st:
        table = st.create_run(NewRun("table", "import", {}, {}))
        files = st.create_run(NewRun("files", "import", {}, {}))
        st.keep_samples_in_files(files)
        lat = np.random.default_rng(3).integers(0, 10_000, 5000)
        lat[2500] = -50                 # the second batch needs origin 50, the first 0
        for rid in (table, files):
            with st.transaction():
                st.add_latency_stream(rid, iter([(0, 0, lat[:2000]), (2000, 50, lat[2000:])]))
                st.shift_sample_origin(rid, 50, 0, 2000)   # as the importer does
        for key in ("seq", "deadline_tick", "entry_tick", "flags", "cpu"):
            assert np.array_equal(_cat(st.iter_samples(files), key),
                                  _cat(st.iter_samples(table), key)), key
        assert np.array_equal(_cat(st.iter_latency(files)), lat)


def test_rolled_back_files_are_swept_by_the_next_writer(tmp_path) -> None:
    db = tmp_path / "x.duckdb"
    with Store(db) as st:
        rid = st.create_run(NewRun("r", "guest", {}, {}))
        st.keep_samples_in_files(rid)
        st.add_samples(rid, _records(1000))
        with pytest.raises(RuntimeError), st.transaction():
            st.add_sample_stream(rid, iter([_records(1000, 1000)]))  # listed, rolled back
            st.add_samples(rid, _records(1000, 2000))    # still being written: discarded
            raise RuntimeError("the window's transaction failed")
        assert st.sample_count(rid) == 1000
        assert len(list(run_dir(db, rid).iterdir())) == 2          # one is an orphan
        (run_dir(db, rid) / ".half.parquet.tmp").write_bytes(b"PAR1")  # a kill -9
        (files_root(db) / "run-99").mkdir()
        (files_root(db) / "run-99" / "x.parquet").write_bytes(b"never committed")
    with Store(db, read_only=True) as st:                          # readers never sweep
        assert len(list(run_dir(db, rid).iterdir())) == 3
    with Store(db) as st:
        assert [p.name for p in run_dir(db, rid).iterdir()] == [st._files(rid)[0][2]]
        assert not (files_root(db) / "run-99").exists()
        assert np.array_equal(_cat(st.iter_samples(rid), "seq"), np.arange(1000))


def test_an_iterator_failure_is_raised_as_it_is_and_nothing_lands(tmp_path) -> None:
    with Store(tmp_path / "x.duckdb") as st:
        rid = st.create_run(NewRun("r", "guest", {}, {}))
        st.keep_samples_in_files(rid)

        def batches():
            yield _records(100)
            yield _records(100, 100)
            raise ValueError("line 7: not a number")
        with pytest.raises(ValueError, match="line 7"), st.transaction():
            st.add_sample_stream(rid, batches())
        assert st.sample_count(rid) == 0


def test_unwritable_files_are_a_store_write_error_and_committed_data_stays(tmp_path) -> None:
    db = tmp_path / "x.duckdb"
    with Store(db) as st:
        rid = st.create_run(NewRun("r", "guest", {}, {}))
        st.add_samples(rid, _records(10))                          # in the table
        other = st.create_run(NewRun("f", "guest", {}, {}))
        st.keep_samples_in_files(other)
        files_root(db).write_text("not a directory")              # where the files go
        with pytest.raises(StoreWriteError, match=r"cannot write to .*x\.duckdb\.samples"):
            with st.transaction():                 # a window: its commit waits for its files
                st.add_samples(other, _records(10))
                st.add_windows(other, [{"index": 0, "start_s": 0.0}])
        assert st.write_failed and st.sample_count(rid) == 10
        assert st.windows(other) == [] and st.sample_count(other) == 0
        # Outside a transaction the write goes on in the background: its failure is
        # raised at the next point that lists files (here the run's end), never lost.
        st.add_samples(other, _records(10))
        with pytest.raises(StoreWriteError, match="Not a directory"):
            st.finish_run(other, "ok", None)


def test_a_missing_file_is_named_in_one_line(tmp_path) -> None:
    db = tmp_path / "x.duckdb"
    with Store(db) as st:
        rid = st.create_run(NewRun("r", "guest", {}, {}))
        st.keep_samples_in_files(rid)
        st.add_samples(rid, _records(10))
    for f in run_dir(db, rid).iterdir():
        f.unlink()
    with Store(db, read_only=True) as st:
        with pytest.raises(StoreError, match=r"samples file .* is missing: .*\.samples "
                                             r"belongs to .*x\.duckdb"):
            list(st.iter_latency(rid))


def test_in_memory_stores_keep_the_table(tmp_path) -> None:
    with Store(":memory:") as st:
        rid = st.create_run(NewRun("r", "guest", {}, {}))
        assert not st.keep_samples_in_files(rid)
        st.add_samples(rid, _records(10))
        assert st.sample_count(rid) == 10


def test_background_writes_land_at_every_settle_point_in_order(tmp_path) -> None:
    db = tmp_path / "x.duckdb"
    with Store(db) as st:
        rid = st.create_run(NewRun("r", "guest", {}, {}))
        st.keep_samples_in_files(rid)
        for k in range(5):                       # more batches than the writer holds
            st.add_samples(rid, _records(100, 100 * k))
        assert st.sample_count(rid) == 500       # a read lists what was written
        st.add_samples(rid, _records(100, 500))
        st.add_samples(rid, _records(100, 600))
    with Store(db, read_only=True) as st:        # close listed the last ones
        assert _cat(st.iter_samples(rid), "seq").tolist() == list(range(700))


def test_a_failed_write_keeps_the_files_before_it_and_discards_those_after(
        tmp_path) -> None:
    db = tmp_path / "x.duckdb"
    run_dir(db, 2).parent.mkdir(parents=True)
    run_dir(db, 2).write_text("not a directory")          # run 2's files cannot be
    writer = Writer(db)
    try:
        for rid, start in ((1, 0), (2, 0), (1, 100), (1, 200)):
            writer.submit(rid, record_batch(_records(100, start)))
        rows, failure = writer.settle()
        assert [(r.run_id, r.first_seq, r.samples) for r in rows] == [(1, 0, 100)]
        assert isinstance(failure, OSError) and len(writer) == 0
        assert [f.name for f in run_dir(db, 1).iterdir()] == [rows[0].name]
    finally:
        writer.close()
