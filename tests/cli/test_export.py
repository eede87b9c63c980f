"""`irqlab export --parquet` and irqlab.open_store: samples in ns read back equal."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import irqlab
from irqlab.stats import ticks_to_ns
from irqlab.store import Store
from tests.conftest import DEFAULT_PROBE, call_cli, run_cli


@pytest.mark.emulated          # boots the guest probe under TCG
@pytest.mark.skipif(not DEFAULT_PROBE.exists(), reason="guest probe not built")
def test_export_reads_back_equal_to_the_store(tmp_path):
    db = tmp_path / "runs.duckdb"
    res = run_cli(["run", "--accel", "tcg", "--icount", "--samples", "500", "--period", "1ms",
                   "--json"], db)
    assert res.code == 0, res.stderr
    run_id = res.summary["run_id"]
    with Store(db, read_only=True) as store:
        row = store.resolve(str(run_id))
        ticks = np.concatenate([b.column("entry_tick").to_numpy().astype(np.int64)
                                - b.column("deadline_tick").to_numpy().astype(np.int64)
                                for b in store.iter_samples(run_id)])
    want = [ticks_to_ns(int(t), row.tick_hz) for t in ticks]

    out = tmp_path / "export"
    exp = call_cli(["export", str(run_id), "--parquet", str(out), "--json"], db)
    assert exp.code == 0, exp.stderr
    assert exp.lines == [{"type": "export", "version": 1, "run_id": run_id, "samples": 500,
                          "path": str(out)}]

    got = duckdb.sql(f"SELECT run_id, count(*), min(latency_ns), max(latency_ns), "
                     f"sum(latency_ns) FROM read_parquet('{out}/samples/**/*.parquet', "
                     f"hive_partitioning = true) GROUP BY run_id").fetchall()
    assert got == [(run_id, 500, min(want), max(want), sum(want))]
    frame = pd.read_parquet(out / "samples")
    assert frame["latency_ns"].tolist() == want           # seq order, every sample
    assert res.summary["max_ns"] == max(want) and res.summary["min_ns"] == min(want)

    with irqlab.open_store(db) as lab:
        table = lab.samples(run_id)
        assert table.column("latency_ns").to_pylist() == want
        assert lab.summaries().to_pylist()[0]["p50_ns"] == res.summary["p50_ns"]
        assert len(lab.windows(run_id)) == len(res.windows)

    again = call_cli(["export", str(run_id), "--parquet", str(out)], db)
    assert again.code == 2 and "not an empty directory" in again.stderr


def _two_run_export(tmp_path):
    """Two imported runs with raw samples (no emulation), exported: (dir, {run_id: ns})."""
    from pathlib import Path

    db = tmp_path / "two.duckdb"
    fixture = str(Path(__file__).resolve().parents[1] / "fixtures" / "import"
                  / "tscdeadline_latency.txt")
    for name, hz in (("a", "1000000000"), ("b", "2000000000")):
        res = run_cli(["import", "tscdeadline", fixture, "--tick-hz", hz, "--name", name], db)
        assert res.code == 0, res.stderr
    out = tmp_path / "export"
    res = run_cli(["export", "a", "b", "--parquet", str(out)], db)
    assert res.code == 0, res.stderr
    with irqlab.open_store(db) as lab:
        want = {r: lab.samples(r).column("latency_ns").to_pylist() for r in (1, 2)}
    assert want[1] != want[2] and len(want[1]) == 10
    return out, want


def test_every_reader_reads_an_export_of_two_runs_as_one_dataset(tmp_path):
    # Issue 31: run_id is the Hive partition, in the path only (never also in the file,
    # where a second, int64 run_id would clash with the int32 pyarrow infers).
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    out, want = _two_run_export(tmp_path)
    table = ds.dataset(out / "samples", partitioning="hive").to_table()
    got = {r: table.filter(pa.compute.equal(table["run_id"], r))["latency_ns"].to_pylist()
           for r in (1, 2)}
    assert got == want and table.num_rows == 20

    rows = duckdb.sql(f"SELECT run_id, typeof(run_id), list(latency_ns ORDER BY seq) "
                      f"FROM read_parquet('{out}/samples/**/*.parquet', "
                      f"hive_partitioning = true) GROUP BY ALL ORDER BY run_id").fetchall()
    assert rows == [(1, "BIGINT", want[1]), (2, "BIGINT", want[2])]

    # pyarrow infers int32 for the partition; runs.parquet's run_id is int64. The
    # partitioning docs/formats.md gives makes them one type, so the two join.
    part = ds.partitioning(pa.schema([("run_id", pa.int64())]), flavor="hive")
    samples = ds.dataset(out / "samples", partitioning=part).to_table()
    runs = pq.read_table(out / "runs.parquet").select(["run_id", "name"])
    joined = samples.join(runs, "run_id")
    assert sorted(set(zip(joined["run_id"].to_pylist(), joined["name"].to_pylist()))) == [
        (1, "a"), (2, "b")]


def test_polars_reads_an_export_of_two_runs_as_one_dataset(tmp_path):
    pl = pytest.importorskip("polars", reason="polars is not installed in .venv (not a "
                                              "dependency of irqlab): reader not tested")
    out, want = _two_run_export(tmp_path)
    frame = pl.read_parquet(out / "samples" / "**" / "*.parquet", hive_partitioning=True)
    got = {r: frame.filter(pl.col("run_id") == r).sort("seq")["latency_ns"].to_list()
           for r in (1, 2)}
    assert got == want
