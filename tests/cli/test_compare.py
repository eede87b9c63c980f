"""`irqlab compare`: markdown / csv / json on deterministic runs, errors, a real run."""

import csv

import pytest

from tests.cli._report_store import make_store
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def rdb(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("cmp") / "c.duckdb")


def test_markdown_table(rdb):
    res = run_cli(["compare", "base", "double", "summary-only", "--format", "markdown"], rdb)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("| run | samples | min | p50 | p99 | p99.9 | p99.99 | max |")
    assert lines[2].startswith("| 1 base | 10000 | 1 ns | 5.00 us | 9.90 us | 9.99 us |")
    assert "| 2 | 2 | beyond noise (p50 p&lt;0.001) | raw |" in lines[3]
    assert lines[4].endswith("| 1 | 1 | n/a | summary |")
    assert "- 4 summary-only vs 1 base: n/a (no raw samples for #4 summary-only)" in lines


def test_csv_and_json_by_tag(rdb):
    res = run_cli(["compare", "tag:cfg=a", "--format", "csv"], rdb)
    rows = list(csv.DictReader(res.stdout.splitlines()))
    assert [(r["name"], r["p50_ns"], r["p50_ratio"]) for r in rows] == [
        ("base", "5000", "1"), ("double", "10000", "2")]
    res = run_cli(["compare", "1", "3", "--json", "--threshold", "35us"], rdb)
    assert res.code == 0, res.stderr
    assert [x["type"] for x in res.lines][:3] == ["compare", "compare_run", "compare_run"]
    assert {x["type"] for x in res.lines[3:]} == {"compare_warning"}
    assert res.lines[2]["name"] == "<script>alert(1)</script>"
    assert res.lines[2]["above_threshold"] == 250 and res.lines[0]["threshold_override_ns"] \
        == 35000


def test_human_table_and_errors(rdb):
    res = run_cli(["compare", "base", "double"], rdb)
    assert res.code == 0 and "baseline" in res.stdout and "beyond" in res.stdout
    assert "95% CI" in res.stdout and "percentile bootstrap" in res.stdout
    bad = run_cli(["compare", "base", "nope"], rdb)
    assert bad.code == 2 and "irqlab list" in bad.stderr
    assert run_cli(["compare", "base", "--format", "xml"], rdb).code == 2


@pytest.mark.integration
def test_compare_a_real_icount_run(tmp_path, probe_built):
    """A real TCG+icount run (deterministic latencies) against a stored synthetic run."""
    db = tmp_path / "real.duckdb"
    res = run_cli(["run", "--accel", "tcg", "--icount", "--samples", "2000", "--window",
                   "1s", "--inject-irqoff", "100us", "--inject-every", "500", "--name",
                   "real", "--json"], db)
    assert res.code == 0, res.stderr
    from irqlab.store import Store
    from tests.unit.reports._runs import add_run, latencies
    with Store(db) as st:
        add_run(st, "synthetic", latencies("ramp", 2000), hostname="elsewhere")
    res = run_cli(["compare", "real", "synthetic", "--json"], db)
    real, synth = (x for x in res.lines if x["type"] == "compare_run")
    assert real["percentiles_from"] == "raw" and real["samples"] == 2000
    assert real["above_threshold"] == 4 and real["max_ns"] >= 100_000   # the injections
    assert real["p50_ns"] < 1_000 and real["accel"] == "tcg+icount"
    assert synth["noise"]["test"] == "bootstrap"
    kinds = {x["kind"] for x in res.lines if x["type"] == "compare_warning"}
    assert {"host", "accel", "emulated", "tick source"} <= kinds
