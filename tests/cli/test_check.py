"""`irqlab check`: exit 0/1/2, which limit or gate failed and by how much, JUnit XML."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from irqlab.store import Store
from tests.cli._report_store import make_store
from tests.conftest import call_cli as run_cli   # in-process: output and exit codes
from tests.unit.reports._runs import add_run, latencies

ROOT = Path(__file__).parents[2]
CYCLICTEST = ROOT / "tests" / "fixtures" / "import" / "cyclictest_q.txt"


@pytest.fixture(scope="module")
def rdb(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("chk") / "k.duckdb")


def test_pass_exits_0(rdb, tmp_path):
    junit = tmp_path / "ok.xml"
    res = run_cli(["check", "base", "--max", "30us", "--p99.9", "10us",
                   "--above-threshold", "0", "--junit", str(junit)], rdb)
    assert res.code == 0, res.stdout + res.stderr
    assert res.stdout.startswith("PASS run 1 base: 3/3 limits met")
    root = ET.parse(junit).getroot()
    # The gates status, lost and samples (a percentile limit), then the 3 limits.
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("6", "0", "0")


def test_fail_exits_1_and_says_by_how_much(rdb, tmp_path):
    junit = tmp_path / "fail.xml"
    res = run_cli(["check", "double", "--max", "30us", "--p99.9", "10us", "--junit",
                   str(junit)], rdb)
    assert res.code == 1
    # Values as the run summary prints them (format_ns 'fixed': 19980 ns is 20.0 us).
    assert "FAIL p99.9 20.0 us > 10.0 us: over by 9980 ns (+99.8%)" in res.stdout
    assert "PASS max 20.0 us <= 30.0 us" in res.stdout
    case = ET.parse(junit).getroot().find("testsuite").findall("testcase")[-1]
    assert case.get("name") == "p99.9" and case.find("failure") is not None
    assert "> 10.0 us" in case.find("failure").get("message")


def test_json_and_hostile_name(rdb, tmp_path):
    junit = tmp_path / "x.xml"
    res = run_cli(["check", "3", "--max", "1us", "--json", "--junit", str(junit)], rdb)
    assert res.code == 1 and res.lines[0]["type"] == "check"
    assert res.lines[0]["limits"][0]["excess"] == 39_000
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("name").endswith("<script>alert(1)</script>")


def test_usage_and_data_errors_exit_2(rdb, tmp_path):
    assert run_cli(["check", "base"], rdb).code == 2                      # no limit
    assert run_cli(["check", "base", "--max", "fast"], rdb).code == 2     # bad duration
    junit = tmp_path / "err.xml"
    res = run_cli(["check", "nope", "--max", "1us", "--junit", str(junit)], rdb)
    assert res.code == 2 and "irqlab list" in res.stderr
    assert ET.parse(junit).getroot().get("errors") == "1"


@pytest.fixture(scope="module")
def gdb(tmp_path_factory):
    """Runs that pass every limit below and are failed (or not) by a gate."""
    path = tmp_path_factory.mktemp("gates") / "g.duckdb"
    with Store(path) as st:
        add_run(st, "stopped", latencies("ramp", 5_000), status="interrupted")   # 1
        add_run(st, "lossy", latencies("ramp", 5_000), lost=3)                   # 2
        add_run(st, "emu", latencies("ramp", 5_000), accel="tcg", emulated=True)  # 3
        add_run(st, "short", latencies("ramp", 500))                             # 4
        add_run(st, "broken", None, status="failed")                             # 5
        # Two runs of one configuration each: named, and irqlab's default names.
        for name in ("nightly", "nightly", "guest-20261126-101010", "guest-20261126-121212"):
            add_run(st, name, latencies("ramp", 5_000), tags={"cfg": "a"})       # 6-9
    assert run_cli(["import", "cyclictest", str(CYCLICTEST), "--name", "imp"],
                   path).code == 0                                              # 10
    return path


def _junit(tmp_path, db, args, name="j.xml"):
    junit = tmp_path / name
    res = run_cli(["check", *args, "--junit", str(junit)], db)
    return res, ET.parse(junit).getroot()


def _cases(root):
    return {c.get("name"): c for c in root.iter("testcase")}


def test_interrupted_run_fails_unless_allowed(gdb, tmp_path):
    res, root = _junit(tmp_path, gdb, ["stopped", "--max", "1ms"])
    assert res.code == 1, res.stdout + res.stderr
    assert res.stdout.startswith("FAIL run 1 stopped: 1/1 limits met; failed: status")
    assert "--allow-interrupted" in res.stdout
    assert _cases(root)["status"].find("failure") is not None
    assert _cases(root)["max"].find("failure") is None
    res = run_cli(["check", "stopped", "--max", "1ms", "--allow-interrupted"], gdb)
    assert res.code == 0, res.stdout
    assert "judged on the samples it has" in res.stdout


def test_lost_samples_over_max_lost_fail(gdb, tmp_path):
    res, root = _junit(tmp_path, gdb, ["lossy", "--max", "1ms", "--max-lost", "0"])
    assert res.code == 1 and "FAIL lost 3 > 0" in res.stdout
    assert "lost 3 > 0" in _cases(root)["lost"].find("failure").get("message")
    assert run_cli(["check", "lossy", "--max", "1ms"], gdb).code == 1      # default 0
    assert run_cli(["check", "lossy", "--max", "1ms", "--max-lost", "3"], gdb).code == 0


def test_imported_run_unknown_lost_is_skipped_not_failed(gdb, tmp_path):
    res, root = _junit(tmp_path, gdb, ["imp", "--max", "1s"])
    assert res.code == 0, res.stdout + res.stderr
    assert "SKIP lost unknown" in res.stdout
    assert _cases(root)["lost"].find("skipped") is not None and root.get("skipped") == "1"
    # Nobody said it ran on hardware: --require-hardware does not take it on trust.
    assert run_cli(["check", "imp", "--max", "1s", "--require-hardware"], gdb).code == 1


def test_emulated_run_is_marked_and_fails_require_hardware(gdb, tmp_path):
    res, root = _junit(tmp_path, gdb, ["emu", "--max", "1ms"])
    assert res.code == 0 and res.stdout.startswith("PASS run 3 emu [emulated: tcg]:")
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["emulated"] == "true" and props["accel"] == "tcg"
    line = run_cli(["check", "emu", "--max", "1ms", "--json"], gdb).lines[0]
    assert line["emulated"] is True and line["accel"] == "tcg" and line["passed"]
    res, root = _junit(tmp_path, gdb, ["emu", "--max", "1ms", "--require-hardware"])
    assert res.code == 1 and "FAIL hardware: the run was emulated (tcg)" in res.stdout
    assert _cases(root)["hardware"].find("failure") is not None
    assert run_cli(["check", "lossy", "--max", "1ms", "--max-lost", "3",
                    "--require-hardware"], gdb).code == 0


def test_too_few_samples_for_a_percentile_fail_naming_the_number(gdb, tmp_path):
    res, root = _junit(tmp_path, gdb, ["short", "--p99.9", "1ms"])
    assert res.code == 1, res.stdout
    assert "FAIL samples 500 < 1000: p99.9 needs at least 1000" in res.stdout
    assert "1000" in _cases(root)["samples"].find("failure").get("message")
    # p99 needs 100: 500 samples are enough.
    assert run_cli(["check", "short", "--p99", "1ms"], gdb).code == 0


def test_failed_run_without_samples_is_a_failed_check(gdb):
    res = run_cli(["check", "broken", "--max", "1ms"], gdb)
    assert res.code == 1 and "FAIL status failed" in res.stdout
    # Allowed, it still has nothing to judge: a data error.
    assert run_cli(["check", "broken", "--max", "1ms", "--allow-interrupted"], gdb).code == 2


def _ids(root):
    return [(s.get("name"), [(c.get("classname"), c.get("name")) for c in s.iter("testcase")])
            for s in root.iter("testsuite")]


@pytest.mark.parametrize("first,second,suite", [
    ("6", "7", "nightly"),
    ("8", "9", "guest (period=1ms, window=1000ms, cfg=a)"),
])
def test_junit_ids_are_stable_across_runs_of_one_configuration(gdb, tmp_path, first,
                                                               second, suite):
    _, a = _junit(tmp_path, gdb, [first, "--p99.9", "20us", "--max", "1ms"], "a.xml")
    _, b = _junit(tmp_path, gdb, [second, "--p99.9", "3us", "--max", "2ms"], "b.xml")
    assert _ids(a) == _ids(b)
    (name, cases), = _ids(a)
    assert name == suite
    assert cases == [(f"irqlab.check.{suite}", n)
                     for n in ("status", "lost", "samples", "max", "p99.9")]
    # The run id is a property only; the limit's value is in the message.
    assert [p.get("value") for p in b.iter("property") if p.get("name") == "run_id"] == \
        [second]
    assert "> 3000 ns" in _cases(b)["p99.9"].find("failure").get("message")
    assert a.find("testsuite").get("failures") == "0"


def test_bad_gate_options_exit_2_with_one_line(gdb):
    for args in (["--max-lost", "-1"], ["--max-lost", "few"]):
        res = run_cli(["check", "emu", "--max", "1ms", *args], gdb)
        assert res.code == 2 and res.stdout == ""
        assert len(res.stderr.strip().splitlines()) == 1 and "--max-lost" in res.stderr


def test_check_lines_validate_against_their_schema(gdb, rdb):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "schema" / "check.schema.json").read_text())
    lines = run_cli(["check", "1", "2", "3", "4", "5", "10", "--p99.9", "1ms",
                     "--require-hardware", "--json"], gdb).lines
    lines += run_cli(["check", "4", "--p99.9", "1ms", "--json"], rdb).lines  # summary only
    assert len(lines) == 7
    for line in lines:
        jsonschema.validate(line, schema)
        assert line["version"] == 2 and list(line)[:8] == [
            "type", "version", "run_id", "name", "passed", "error", "limits", "notes"]
