"""An `irqlab export` directory opened as a read-only store (irqlab.store.export_dir):
the same runs, the same samples in ns, the same figures as the file it came from; never
written. The runs are the report tests' real runs (real statistics and store code)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from irqlab.store import StoreError, open_store
from irqlab.store.export_dir import ExportStore
from tests.conftest import call_cli
from tests.unit.reports._runs import add_run, latencies

with warnings.catch_warnings():
    warnings.simplefilter("ignore")         # starlette: httpx -> httpx2 notice
    from starlette.testclient import TestClient

from irqlab.serve.app import build_app
from irqlab.store import Store


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    """(the DuckDB file, its export of runs 1-4): runs of different shapes."""
    tmp = tmp_path_factory.mktemp("export-dir")
    db = tmp / "src.duckdb"
    with Store(db) as store:
        add_run(store, "lognormal", latencies("lognormal", 4_000, seed=1))
        add_run(store, "ramp", latencies("ramp", 4_000), accel="tcg", emulated=True,
                hostname="h2")
        add_run(store, "wider", latencies("lognormal", 4_000, seed=3) * 2, suite="s")
        add_run(store, "again", latencies("lognormal", 4_000, seed=4))
    out = tmp / "export"
    res = call_cli(["export", "1", "2", "3", "4", "--parquet", str(out)], db)
    assert res.code == 0, res.stderr
    return db, out


def _json(args: list[str], db: Path) -> list[dict]:
    res = call_cli([*args, "--json"], db)
    assert res.code == 0, res.stderr
    return res.lines


def test_open_store_gives_the_export_store_by_its_registry_line(exported):
    _db, out = exported
    with open_store(out, read_only=True) as store:
        assert isinstance(store, ExportStore)
        assert [r.name for r in store.runs()] == ["lognormal", "ramp", "wider", "again"]
        assert store.path == out


def test_samples_read_back_as_the_exported_ns(exported):
    _db, out = exported
    want = pq.read_table(out / "samples" / "run_id=2").column("latency_ns").to_numpy()
    with open_store(out, read_only=True) as store:
        got = np.concatenate([
            b.column("entry_tick").to_numpy().astype(np.int64)
            - b.column("deadline_tick").to_numpy().astype(np.int64)
            for b in store.iter_samples(2)])
        assert store.sample_count(2) == len(want) == 4_000
    assert np.array_equal(got, want)


def test_an_export_is_never_written(exported):
    _db, out = exported
    before = sorted((p.name, p.stat().st_size) for p in out.rglob("*"))
    with pytest.raises(StoreError, match="read only"):
        open_store(out)
    res = call_cli(["tag", "1", "board=x"], out)
    assert res.code == 2 and "read only" in res.stderr and "\n" not in res.stderr.strip()
    assert sorted((p.name, p.stat().st_size) for p in out.rglob("*")) == before


@pytest.mark.parametrize("command", [["list"], ["show", "2"], ["compare", "1", "2", "3"],
                                     ["check", "1", "--max", "1s"]])
@pytest.mark.slow
def test_commands_give_the_files_figures(exported, command):
    db, out = exported
    keys = ("run_id", "name", "status", "samples", "min_ns", "max_ns", "p50_ns", "p99_ns",
            "p999_ns", "p9999_ns")
    src, exp = _json(command, db), _json(command, out)
    assert len(src) == len(exp)
    for a, b in zip(src, exp):
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}


def test_trend_over_the_export(exported):
    db, out = exported
    src = _json(["trend", "1", "2", "3", "4", "--metric", "p99.9", "--min-size", "2"], db)
    exp = _json(["trend", "1", "2", "3", "4", "--metric", "p99.9", "--min-size", "2"], out)
    points = lambda lines: [(x.get("run_id"), x.get("value")) for x in lines]  # noqa: E731
    assert points(exp) == points(src)


@pytest.mark.slow
def test_serve_pages_the_export(exported):
    _db, out = exported
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client = TestClient(build_app(out), base_url="http://127.0.0.1")
    runs = client.get("/api/runs?per_page=50&order=asc").json()
    assert [r["name"] for r in runs["runs"]] == ["lognormal", "ramp", "wider", "again"]
    got = client.get("/api/compare?runs=1,2,3")
    assert got.status_code == 200
    cli = _json(["compare", "1", "2", "3"], out)
    assert got.json()["objects"] == json.loads(json.dumps(cli, default=str))
