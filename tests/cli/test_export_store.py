"""`--db DIR` of a real `irqlab export` of runs of three targets (the host's native probe,
an imported kvm-unit-tests log, the guest probe under TCG): list, show, compare, report,
check and serve read it as a store and give the figures of the file it came from
(issue 43)."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import pytest

from irqlab.runner.native import NATIVE_PROBE
from tests.conftest import DEFAULT_PROBE, call_cli, run_cli
from tests.unit.store.test_export_dir import _json

with warnings.catch_warnings():
    warnings.simplefilter("ignore")         # starlette: httpx -> httpx2 notice
    from starlette.testclient import TestClient

from irqlab.serve.app import build_app

pytestmark = pytest.mark.emulated           # boots the guest probe under TCG

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"
FIGURES = ("run_id", "name", "status", "samples", "min_ns", "max_ns", "p50_ns", "p99_ns",
           "p999_ns", "p9999_ns")


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    """(the DuckDB file, the export of its three runs)."""
    if not DEFAULT_PROBE.exists():
        pytest.skip("guest probe not built")
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    tmp = tmp_path_factory.mktemp("export-store")
    db = tmp / "three.duckdb"
    for args in (["run", "--target", "native", "--rt-fallback", "--duration", "2s",
                  "--name", "native"],
                 ["import", "tscdeadline", str(FIXTURES / "tscdeadline_latency.txt"),
                  "--tick-hz", "2000000000", "--name", "imported"],
                 ["run", "--target", "guest", "--accel", "tcg", "--icount", "--samples",
                  "500", "--period", "1ms", "--name", "guest"]):
        res = run_cli([*args, "--json"], db)
        assert res.code == 0, res.stderr
    out = tmp / "export"
    res = call_cli(["export", "1", "2", "3", "--parquet", str(out)], db)
    assert res.code == 0, res.stderr
    return db, out


def _figures(lines: list[dict]) -> list[dict]:
    """Each run's figures (compare's warnings differ: an export keeps no params)."""
    return [{k: x.get(k) for k in FIGURES} for x in lines
            if x["type"] in ("run", "summary", "compare_run", "check")]


def test_list_shows_the_three_targets(exported):
    db, out = exported
    rows = _json(["list"], out)
    assert [r["target"] for r in rows] == ["native", "import", "guest"]
    assert _figures(rows) == _figures(_json(["list"], db))


@pytest.mark.parametrize("command", [["show", "1"], ["show", "2"], ["show", "3"],
                                     ["compare", "1", "2", "3"],
                                     ["check", "1", "2", "3", "--max", "10s"]])
def test_reads_give_the_files_figures(exported, command):
    db, out = exported
    assert _figures(_json(command, out)) == _figures(_json(command, db))


def test_report_runs_on_the_export(exported, tmp_path):
    # (trend needs four runs and more: tests/unit/store/test_export_dir.py)
    _db, out = exported
    res = call_cli(["report", "1", "2", "3", "-o", str(tmp_path / "r.html")], out)
    assert res.code == 0, res.stderr
    assert "<html" in (tmp_path / "r.html").read_text()[:2000].lower()


def test_serve_compares_the_export_as_compare_does(exported):
    _db, out = exported
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client = TestClient(build_app(out), base_url="http://127.0.0.1")
    assert client.get("/api/runs?per_page=50").json()["total"] == 3
    got = client.get("/api/compare?runs=1,2,3")
    assert got.status_code == 200
    cli = _json(["compare", "1", "2", "3"], out)
    assert got.json()["objects"] == json.loads(json.dumps(cli, default=str))
