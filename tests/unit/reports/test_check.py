"""Limits for CI: pass/fail with the excess, data errors, JUnit XML."""

import xml.etree.ElementTree as ET

from irqlab.reports.check import evaluate, junit_xml, result_lines
from irqlab.reports.data import load_run


def test_pass_and_fail_say_which_limit_and_by_how_much(store):
    run = load_run(store, store.resolve("base"))   # ramp: max 10000, p99.9 9990
    ok = evaluate(run, [("max", 10_000), ("above-threshold", 0)])
    assert ok.passed and ok.outcomes[0]["text"] == "PASS max 10.0 us <= 10.0 us (margin 0 ns)"
    bad = evaluate(run, [("max", 30_000), ("p99.9", 5_000)])
    assert not bad.passed
    assert [o["passed"] for o in bad.outcomes] == [True, False]
    assert bad.outcomes[1]["excess"] == 4990
    assert bad.outcomes[1]["text"] == "FAIL p99.9 9.99 us > 5.00 us: over by 4.99 us (+99.8%)"
    assert result_lines(bad)[0] == "FAIL run 1 base: 1/2 limits met"


def test_above_threshold_counts_against_an_override(store):
    run = load_run(store, store.resolve("base"))
    res = evaluate(run, [("above-threshold", 10)], threshold_ns=9_980)
    assert res.outcomes[0]["value"] == 20 and not res.passed


def test_summary_only_and_empty_runs(store, tmp_path):
    res = evaluate(load_run(store, store.resolve("summary-only")), [("p50", 5_000)])
    assert not res.passed and res.outcomes[0]["value"] == 5023   # from the histogram
    from irqlab.store import Store
    from tests.unit.reports._runs import add_run
    with Store(tmp_path / "e.duckdb") as st:
        add_run(st, "empty", None, status="failed")
        err = evaluate(load_run(st, st.resolve("empty")), [("max", 1)])
    assert err.error and "failed" in err.error and not err.passed


def test_junit_xml_is_valid_and_escapes_run_names(store):
    runs = [load_run(store, store.resolve(r)) for r in ("base", "5")]
    results = [evaluate(r, [("max", 30_000), ("p99", 1_000)]) for r in runs]
    root = ET.fromstring(junit_xml(results, 0.5))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "3", "0")
    suites = root.findall("testsuite")
    assert suites[1].get("name") == "irqlab check run 5 <script>alert(1)</script>"
    cases = suites[0].findall("testcase")
    assert [c.get("name") for c in cases] == ["max <= 30.0 us", "p99 <= 1.00 us"]
    assert cases[0].find("failure") is None
    assert "over by" in cases[1].find("failure").get("message")
