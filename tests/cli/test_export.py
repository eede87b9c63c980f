"""`irqlab export --parquet` and irqlab.open_store: samples in ns read back equal."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import irqlab
from irqlab.stats import ticks_to_ns
from irqlab.store import Store
from tests.conftest import DEFAULT_PROBE, run_cli


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
    exp = run_cli(["export", str(run_id), "--parquet", str(out), "--json"], db)
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

    again = run_cli(["export", str(run_id), "--parquet", str(out)], db)
    assert again.code == 2 and "not an empty directory" in again.stderr
