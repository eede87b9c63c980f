"""The lab store on a real PostgreSQL server: push runs from two hosts' stores, read them
back with the ordinary commands (issue 18)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import irqlab

from tests.conftest import DEFAULT_PROBE, call_argv, run_cli
from irqlab.store.pgserver import PgServer


@pytest.fixture(scope="module")
def pg():
    server = PgServer()
    yield server
    server.stop()


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """``irqlab ARGV``: `run` in a child (its probe and signals), the others in this
    interpreter."""
    if argv[0] == "run":
        return subprocess.run([sys.executable, "-m", "irqlab.cli.main", *argv],
                              capture_output=True, text=True, timeout=120)
    return call_argv(list(argv))


def _jsonl(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def _measure(db: Path, name: str) -> dict:
    res = run_cli(["run", "--accel", "tcg", "--icount", "--period", "1ms", "--samples",
                   "400", "--window", "100ms", "--name", name, "--json"], db)
    assert res.code == 0, res.stderr
    return res.summary


@pytest.mark.emulated          # boots the guest probe under TCG
@pytest.mark.skipif(not DEFAULT_PROBE.exists(), reason="guest probe not built")
def test_push_from_two_stores_then_compare_from_the_lab(pg, tmp_path):
    lab = pg.database("lab")
    host_a, host_b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    a = _measure(host_a, "on-a")
    b = _measure(host_b, "on-b")
    assert a["run_id"] == b["run_id"] == 1          # both hosts' first run: same local id
    fixture = Path(__file__).parents[1] / "fixtures/import/cyclictest_h.txt"
    imp = _cli("import", "cyclictest", str(fixture), "--db", str(host_a), "--json")
    assert imp.returncode == 0, imp.stderr

    pushed = _jsonl(_cli("push", "1", "2", "--to", lab, "--db", str(host_a), "--json").stdout)
    pushed += _jsonl(_cli("push", "on-b", "--to", lab, "--db", str(host_b), "--json").stdout)
    assert [p["added"] for p in pushed] == [True, True, True]
    assert sorted(p["lab_run_id"] for p in pushed) == [1, 2, 3]      # no collision
    assert pushed[0]["samples"] == 400 and pushed[2]["samples"] == 400

    again = _cli("push", "1", "--to", lab, "--db", str(host_a), "--json")
    assert _jsonl(again.stdout)[0]["added"] is False                 # stored once

    listed = _jsonl(_cli("list", "--db", lab, "--json").stdout)
    assert [r["name"] for r in listed][0] == "on-a" and len(listed) == 3

    # The lab store's copy reads back as the local run: same exact figures from raw samples.
    local = _jsonl(_cli("compare", "1", "--db", str(host_a), "--json").stdout)
    lab_rows = _jsonl(_cli("compare", "on-a", "on-b", "--db", lab, "--json").stdout)
    row_local = [x for x in local if x["type"] == "compare_run"][0]
    rows_lab = [x for x in lab_rows if x["type"] == "compare_run"]
    for key in ("samples", "min_ns", "p50_ns", "p999_ns", "max_ns", "above_threshold"):
        assert rows_lab[0][key] == row_local[key], key
    assert rows_lab[1]["samples"] == 400

    shown = _cli("show", "on-b", "--db", lab, "--json")
    assert shown.returncode == 0 and '"type": "summary"' in shown.stdout


def test_push_refuses_what_is_not_a_lab_store_url(tmp_path):
    res = _cli("push", "1", "--to", str(tmp_path / "x.duckdb"), "--db",
               str(tmp_path / "a.duckdb"))
    assert res.returncode == 2 and "not a postgresql:// URL" in res.stderr


def test_a_server_that_is_not_there_is_one_line(tmp_path):
    res = _cli("list", "--db", f"postgresql://irqlab@/none?host={tmp_path}")
    assert res.returncode == 2
    assert "cannot connect to" in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.emulated          # boots the guest probe under TCG
@pytest.mark.skipif(not DEFAULT_PROBE.exists(), reason="guest probe not built")
def test_run_and_import_write_straight_into_the_lab_store(pg, tmp_path):
    lab = pg.database("direct")
    res = _cli("run", "--accel", "tcg", "--icount", "--samples", "300", "--window", "100ms",
               "--name", "direct", "--json", "--db", lab)
    assert res.returncode == 0, res.stderr
    summary = _jsonl(res.stdout)[-1]
    assert summary["samples"] == 300 and summary["status"] == "ok"
    fixture = Path(__file__).parents[1] / "fixtures/import/cyclictest_h.txt"
    imp = _cli("import", "cyclictest", str(fixture), "--db", lab, "--json")
    assert imp.returncode == 0, imp.stderr
    listed = _jsonl(_cli("list", "--db", lab, "--json").stdout)
    assert [r["name"] for r in listed][0] == "direct" and len(listed) == 2
    shown = _jsonl(_cli("show", "direct", "--db", lab, "--json").stdout)
    assert [x for x in shown if x["type"] == "summary"][0]["p50_ns"] == summary["p50_ns"]
    with irqlab.open_store(lab) as view:                 # the Python API reads it too
        assert view.windows("direct").num_rows == 3
        assert view.samples("direct").num_rows == 300
    # Exact figures from the lab store's raw samples equal the live summary's bounds.
    cmp_run = [x for x in _jsonl(_cli("compare", "direct", "--db", lab, "--json").stdout)
               if x["type"] == "compare_run"][0]
    assert (cmp_run["samples"], cmp_run["max_ns"]) == (300, summary["max_ns"])
    trace = _cli("run", "--trace", "--samples", "10", "--db", lab)
    assert trace.returncode == 2 and "beside a database file" in trace.stderr


def test_push_takes_selectors(pg, tmp_path):
    # issue 46: `push tag:K=V` failed with "no run 'tag:...'" while show and compare
    # took it; now every command that takes runs goes through one resolver.
    from irqlab.store import Store
    from tests.unit.reports._runs import add_run, latencies

    local = tmp_path / "local.duckdb"
    with Store(local) as st:
        for i, board in enumerate(("b1", "b2", "b1")):
            add_run(st, f"on-{board}-{i}", latencies("lognormal", 100, seed=i),
                    tags={"board": board})
    lab = pg.database("selectors")
    pushed = _jsonl(_cli("push", "tag:board=b1", "--to", lab, "--db", str(local),
                         "--json").stdout)
    assert [p["run_id"] for p in pushed] == [1, 3] and all(p["added"] for p in pushed)
    listed = _jsonl(_cli("list", "--db", lab, "--json").stdout)
    assert sorted(r["name"] for r in listed) == ["on-b1-0", "on-b1-2"]
