"""`irqlab compare`: markdown / csv / json on deterministic runs, errors, a real run."""

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from irqlab.store import Store
from tests.unit.reports._runs import add_run

from tests.cli._report_store import make_store
from tests.conftest import call_cli, run_cli


@pytest.fixture(scope="module")
def rdb(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("cmp") / "c.duckdb")


def test_markdown_table(rdb):
    res = call_cli(["compare", "base", "double", "summary-only", "--format", "markdown"], rdb)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("| run | samples | min | p50 | p99 | p99.9 | p99.99 | max |")
    assert lines[2].startswith("| 1 base | 10,000 | 1 ns | 5000 ns | 9900 ns | 9990 ns |")
    assert "| 2 | 2 | unknown (single runs) | raw |" in lines[3]
    assert lines[4].endswith("| 1 | 1 | n/a | summary |")
    assert "- 4 summary-only vs 1 base: n/a (no raw samples for #4 summary-only)" in lines


def test_csv_and_json_by_tag(rdb):
    res = call_cli(["compare", "tag:cfg=a", "--format", "csv"], rdb)
    rows = list(csv.DictReader(res.stdout.splitlines()))
    assert [(r["name"], r["p50_ns"], r["p50_ratio"]) for r in rows] == [
        ("base", "5000", "1"), ("double", "10000", "2")]
    res = call_cli(["compare", "1", "3", "--json", "--threshold", "35us"], rdb)
    assert res.code == 0, res.stderr
    assert [x["type"] for x in res.lines][:3] == ["compare", "compare_run", "compare_run"]
    assert {x["type"] for x in res.lines[3:]} == {"compare_warning"}
    assert res.lines[2]["name"] == "<script>alert(1)</script>"
    assert res.lines[2]["above_threshold"] == 250 and res.lines[0]["threshold_override_ns"] \
        == 35000


def test_human_table_and_errors(rdb):
    res = call_cli(["compare", "base", "double"], rdb)
    assert res.code == 0 and "baseline" in res.stdout and "unknown: --repeat" in res.stdout
    assert "block bootstrap" in res.stdout
    # Prose lines wrap at 120 columns (issue 32): continuation lines are indented.
    logical = re.sub(r"\n  (?=\S)", " ", res.stdout).splitlines()
    (line,) = [x for x in logical if x.startswith("2 double vs 1 base: ")]
    assert line.endswith("[block bootstrap, "
                         "blocks of 292/292 samples; run-to-run variation unknown from one "
                         "run each: ratios only, the within-run intervals are in --json]") \
        and "different" not in line
    # Single runs (issue 45): ratios only; a within-run interval or p beside them would
    # read as evidence about the configurations. The JSON keeps them, labelled.
    assert re.match(r"2 double vs 1 base: unknown: p50 ×[0-9.]+; p99\.9 ×[0-9.]+ \[", line), line
    assert "CI" not in line and "p=" not in line and "p_adj" not in line
    js = call_cli(["compare", "base", "double", "--json"], rdb)
    (row,) = [x for x in js.lines if x.get("type") == "compare_run" and not x["baseline"]]
    assert row["noise"]["scope"] == "within-run" and row["noise"]["results"][0]["ci_low"]
    bad = call_cli(["compare", "base", "nope"], rdb)
    assert bad.code == 2 and "irqlab list" in bad.stderr
    assert call_cli(["compare", "base", "--format", "xml"], rdb).code == 2


def _series_store(path: Path) -> Path:
    """Series of 3 runs each (tag series=..., as `irqlab run --repeat 3` stores them):
    A and B of one configuration (each run its own level, sd 3 %: run-to-run variation),
    C 30 % slower; the runs interleaved A B C A B C A B C as a suite would measure them."""
    rng = np.random.default_rng(27)
    with Store(path) as st:
        for index in range(1, 4):
            for series, shift in (("A", 1.0), ("B", 1.0), ("C", 1.3)):
                level = shift * float(np.exp(rng.normal(0, 0.03)))
                lat = np.round(rng.lognormal(np.log(5_000), 0.4, 20_000) * level)
                add_run(st, f"cfg-{series}", lat.astype(np.int64),
                        tags={"series": series},
                        extra_meta={"series": {"id": series, "index": index, "count": 3}})
    return path


@pytest.fixture(scope="module")
def sdb(tmp_path_factory):
    return _series_store(tmp_path_factory.mktemp("series") / "s.duckdb")


def _noise_rows(res):
    return [x for x in res.lines if x["type"] == "compare_run"]


def test_series_are_compared_run_by_run(sdb):
    res = call_cli(["compare", "series:A", "series:B", "series:C", "--json"], sdb)
    assert res.code == 0, res.stderr
    head, rows = res.lines[0], _noise_rows(res)
    assert head["groups"] == 3 and len(rows) == 9          # one row per run, as before
    assert [r["series"] for r in rows] == ["A"] * 3 + ["B"] * 3 + ["C"] * 3
    assert [r["group"] for r in rows] == [0] * 3 + [1] * 3 + [2] * 3
    assert all(r["noise"] is None for r in rows[:3]) and rows[0]["baseline"]
    b, c = rows[3]["noise"], rows[6]["noise"]
    assert b == rows[4]["noise"] == rows[5]["noise"]        # one verdict for the group
    assert b["test"] == c["test"] == "run-t" and b["replicates"] == [3, 3]
    assert b["scope"] == c["scope"] == "between-runs"
    # Issue 45: three words. B is A's configuration: its intervals include 1; C is 30 %
    # slower: p50's interval excludes 1, so the row is `different` and says why.
    assert b["beyond_noise"] is False and b["verdict"] in ("same", "unknown")
    assert c["beyond_noise"] is True and c["verdict"] == "different"
    assert "p50 interval" in c["reason"] and "excludes 1" in c["reason"]
    p50 = next(r for r in c["results"] if r["quantile"] == "p50")
    assert 1.2 < p50["ratio"] < 1.4 and p50["ci_low"] > 1 and p50["df"] > 1
    assert p50["verdict"] == "different" and p50["margin"] == 0.10
    assert b["block_len"] is None and "Welch" in b["method"]
    assert head["version"] == 2 and head["margins"] == {"p50": 0.10, "p99.9": 0.25}


def test_identical_series_are_same_within_a_wide_margin(sdb):
    """Issue 45: two series of one configuration with --margin 50% are `same` (every
    quantile's interval inside ±50 %), and a margin too tight to show is `unknown`."""
    wide = _noise_rows(call_cli(["compare", "series:A", "series:B", "--json",
                                 "--margin", "50%"], sdb))[3]["noise"]
    assert wide["verdict"] == "same", wide
    assert all(r["verdict"] == "same" and r["margin"] == 0.5 for r in wide["results"])
    tight = _noise_rows(call_cli(["compare", "series:A", "series:B", "--json",
                                  "--margin", "p50=0.1%,p99.9=0.1%"], sdb))[3]["noise"]
    assert tight["verdict"] == "unknown" and "more runs would tell" in tight["reason"]
    bad = call_cli(["compare", "series:A", "series:B", "--margin", "-3%"], sdb)
    assert bad.code == 2 and "margin" in bad.stderr and "Traceback" not in bad.stderr
    bad = call_cli(["compare", "series:A", "series:B", "--margin", "p75=3%"], sdb)
    assert bad.code == 2 and "p50, p99.9" in bad.stderr


def test_a_series_name_compares_the_series(sdb):
    """Issue 45: `compare cfg-A cfg-C` (names that `run --repeat 3 --name` gave three
    runs each) compared the last run of each; it compares the series now. An id is one
    run still."""
    res = call_cli(["compare", "cfg-A", "cfg-C", "--json"], sdb)
    assert res.code == 0, res.stderr
    rows = _noise_rows(res)
    assert [r["run_id"] for r in rows] == [1, 4, 7, 3, 6, 9]
    assert rows[3]["noise"]["test"] == "run-t" and rows[3]["noise"]["replicates"] == [3, 3]
    assert rows[3]["noise"]["verdict"] == "different"
    ids = call_cli(["compare", "7", "9", "--json"], sdb)
    assert [r["run_id"] for r in _noise_rows(ids)] == [7, 9]
    assert _noise_rows(ids)[1]["noise"]["test"] == "bootstrap"
    shown = call_cli(["show", "cfg-A", "--json"], sdb)     # show: still the latest run
    assert shown.code == 0 and shown.lines[0]["run_id"] == 7


def test_a_suite_s_interleaved_series_are_grouped_and_verdicts_are_short(sdb):
    # Run-id order is A B C A B C ...: the groups still gather each series' runs.
    res = call_cli(["compare", "1", "2", "3", "4", "5", "6", "7", "8", "9"], sdb)
    assert res.code == 0, res.stderr
    assert "series B (3 runs: #2, #5, #8) vs series A (3 runs: #1, #4, #7)" in res.stdout
    logical = re.sub(r"\n  (?=\S)", " ", res.stdout).splitlines()
    b_line = next(x for x in logical if x.startswith("series B"))
    c_line = next(x for x in logical if x.startswith("series C"))
    assert b_line.endswith("[t over runs: 3 vs 3]") and "different" not in b_line
    assert re.search(r"vs series A \(3 runs: #1, #4, #7\): different \(p50 interval "
                     r"×[0-9.]+–[0-9.]+ excludes 1", c_line), c_line
    md = call_cli(["compare", "series:A", "series:C", "--format", "markdown"], sdb)
    assert "| different (p50 p" in md.stdout and "| baseline group |" in md.stdout


@pytest.mark.slow
def test_single_runs_of_one_configuration_are_never_beyond_noise(sdb):
    # A/A: single runs of A against single runs of B (same configuration).
    for a, b in (("1", "2"), ("4", "5"), ("7", "8")):
        res = call_cli(["compare", a, b, "--json"], sdb)
        nz = _noise_rows(res)[1]["noise"]
        assert nz["test"] == "bootstrap" and nz["replicates"] == [1, 1]
        assert nz["beyond_noise"] is not True
        assert nz["verdict"] == "unknown"
        assert all(r["verdict"] == "unknown" for r in nz["results"])
        assert all(isinstance(x, int) and x >= 1 for x in nz["block_len"])
    # A series against one run: the single run decides, so the block bootstrap.
    res = call_cli(["compare", "series:A", "3", "--json"], sdb)
    nz = _noise_rows(res)[3]["noise"]
    assert nz["test"] == "bootstrap" and nz["replicates"] == [3, 1]
    assert nz["verdict"] == "unknown" and "single runs" in nz["reason"]


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
    res = call_cli(["compare", "real", "synthetic", "--json"], db)
    real, synth = (x for x in res.lines if x["type"] == "compare_run")
    assert real["percentiles_from"] == "raw" and real["samples"] == 2000
    assert real["above_threshold"] == 4 and real["max_ns"] >= 100_000   # the injections
    assert real["p50_ns"] < 1_000 and real["accel"] == "tcg+icount"
    assert synth["noise"]["test"] == "bootstrap"
    kinds = {x["kind"] for x in res.lines if x["type"] == "compare_warning"}
    assert {"accel", "emulated", "tick source"} <= kinds
    differs = {d["fact"] for d in res.lines[0]["differs"]}
    assert {"host.hostname", "run.accel"} <= differs
