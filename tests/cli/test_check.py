"""`irqlab check`: exit 0/1/2, which limit failed and by how much, JUnit XML."""

import xml.etree.ElementTree as ET

import pytest

from tests.cli._report_store import make_store
from tests.conftest import run_cli


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
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "0", "0")


def test_fail_exits_1_and_says_by_how_much(rdb, tmp_path):
    junit = tmp_path / "fail.xml"
    res = run_cli(["check", "double", "--max", "30us", "--p99.9", "10us", "--junit",
                   str(junit)], rdb)
    assert res.code == 1
    assert "FAIL p99.9 20.0 us > 10.0 us: over by 9.98 us (+99.8%)" in res.stdout
    assert "PASS max 20.0 us <= 30.0 us" in res.stdout
    case = ET.parse(junit).getroot().find("testsuite").findall("testcase")[1]
    assert case.get("name") == "p99.9 <= 10.0 us" and case.find("failure") is not None


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
