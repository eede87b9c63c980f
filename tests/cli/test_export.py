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


# The sample columns of an export and their Arrow types, as docs/formats.md gives them
# (irqlab.api.SAMPLE_SCHEMA less run_id, which is in the partition's path only).
EXPORT_TYPES = {"seq": "uint64", "cpu": "uint32", "deadline_ns": "int64",
                "latency_ns": "int64", "flags": "uint32"}


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """Three imported runs with raw samples (no emulation), each at its own tick rate so
    their ns differ, exported: (DIR, {run_id: the store's samples as an Arrow table})."""
    from pathlib import Path

    tmp = tmp_path_factory.mktemp("export3")
    db = tmp / "three.duckdb"
    fixture = str(Path(__file__).resolve().parents[1] / "fixtures" / "import"
                  / "tscdeadline_latency.txt")
    for name, hz in (("a", "1000000000"), ("b", "2000000000"), ("c", "3000000000")):
        res = call_cli(["import", "tscdeadline", fixture, "--tick-hz", hz, "--name", name], db)
        assert res.code == 0, res.stderr
    out = tmp / "export"
    res = call_cli(["export", "a", "b", "c", "--parquet", str(out)], db)
    assert res.code == 0, res.stderr
    with irqlab.open_store(db) as lab:
        want = {r: lab.samples(r) for r in (1, 2, 3)}
    lat = [t.column("latency_ns").to_pylist() for t in want.values()]
    assert len({tuple(x) for x in lat}) == 3 and all(len(x) == 10 for x in lat)
    return out, want


def _per_run(table, want):
    """{run_id: the table's rows of that run in seq order, without run_id}."""
    import pyarrow.compute as pc

    return {r: table.filter(pc.equal(table["run_id"], r)).sort_by("seq")
            .select(list(EXPORT_TYPES)) for r in want}


def test_files_carry_no_run_id(three_runs):
    # Hive convention: the partition column is in the path only. A second run_id inside
    # the files (int64) clashed with the partition's inferred type (int32 in pyarrow):
    # "Unable to merge: Field run_id has incompatible types" (issue 31).
    import pyarrow.parquet as pq

    out, want = three_runs
    files = sorted((out / "samples").glob("run_id=*/*.parquet"))
    assert [f.parent.name for f in files] == [f"run_id={r}" for r in want]
    for f in files:
        schema = pq.read_schema(f)
        assert {n: str(schema.field(n).type) for n in schema.names} == EXPORT_TYPES


def test_pyarrow_dataset_reads_the_export_as_one_dataset(three_runs):
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    out, want = three_runs
    table = ds.dataset(out / "samples", format="parquet", partitioning="hive").to_table()
    assert {n: str(table.schema.field(n).type) for n in table.schema.names} == {
        **EXPORT_TYPES, "run_id": "int32"}          # pyarrow infers int32 from the path
    assert table.num_rows == 30
    assert _per_run(table, want) == {r: t.select(list(EXPORT_TYPES)) for r, t in want.items()}

    # The int64 partitioning docs/formats.md gives: run_id as in runs.parquet, so they join.
    part = ds.partitioning(pa.schema([("run_id", pa.int64())]), flavor="hive")
    samples = ds.dataset(out / "samples", format="parquet", partitioning=part).to_table()
    assert samples.schema.field("run_id").type == pa.int64()
    runs = pq.read_table(out / "runs.parquet").select(["run_id", "name"])
    joined = samples.join(runs, "run_id")
    assert sorted(set(zip(joined["run_id"].to_pylist(), joined["name"].to_pylist()))) == [
        (1, "a"), (2, "b"), (3, "c")]


def test_duckdb_reads_the_export_as_one_dataset(three_runs):
    out, want = three_runs
    rows = duckdb.sql(f"SELECT run_id, typeof(run_id), list(latency_ns ORDER BY seq), "
                      f"list(deadline_ns ORDER BY seq) "
                      f"FROM read_parquet('{out}/samples/**/*.parquet', "
                      f"hive_partitioning = true) GROUP BY ALL ORDER BY run_id").fetchall()
    assert rows == [(r, "BIGINT", t["latency_ns"].to_pylist(), t["deadline_ns"].to_pylist())
                    for r, t in want.items()]


def test_polars_reads_the_export_as_one_dataset(three_runs):
    import polars as pl

    out, want = three_runs
    frame = pl.scan_parquet(str(out / "samples" / "**" / "*.parquet"),
                            hive_partitioning=True).collect()
    assert dict(frame.schema) == {"seq": pl.UInt64, "cpu": pl.UInt32, "deadline_ns": pl.Int64,
                                  "latency_ns": pl.Int64, "flags": pl.UInt32,
                                  "run_id": pl.Int64}
    assert frame.height == 30
    got = {r: frame.filter(pl.col("run_id") == r).sort("seq").to_arrow().select(
        list(EXPORT_TYPES)) for r in want}
    assert got == {r: t.select(list(EXPORT_TYPES)) for r, t in want.items()}


def test_selectors_name_the_runs_to_export(tmp_path):
    # issue 46: export took run ids and names only ("no run 'series:s'").
    from irqlab.store import Store
    from tests.unit.reports._runs import add_run, latencies

    db = tmp_path / "sel.duckdb"
    with Store(db) as st:
        for i in range(3):
            add_run(st, f"r{i}", latencies("lognormal", 200, seed=i),
                    tags={"series": "s" if i else "other"})
    out = tmp_path / "out"
    res = call_cli(["export", "series:s", "--parquet", str(out), "--json"], db)
    assert res.code == 0, res.stderr
    assert sorted(p.name for p in (out / "samples").iterdir()) == ["run_id=2", "run_id=3"]
    bad = call_cli(["export", "tag:nope=1", "--parquet", str(tmp_path / "o2")], db)
    assert bad.code == 2 and "no run has tag nope=1" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
