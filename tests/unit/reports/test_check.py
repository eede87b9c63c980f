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
    # Printed as the run summary and `irqlab show` print it (format_ns 'fixed').
    assert bad.outcomes[1]["text"] == "FAIL p99.9 9990 ns > 5000 ns: over by 4990 ns (+99.8%)"
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
    assert err.gate_failed and err.gates[0]["gate"] == "status"


def test_junit_xml_is_valid_and_escapes_run_names(store):
    runs = [load_run(store, store.resolve(r)) for r in ("base", "5")]
    results = [evaluate(r, [("max", 30_000), ("p99", 1_000)]) for r in runs]
    root = ET.fromstring(junit_xml(results, 0.5))
    assert root.tag == "testsuites"
    # Per run: the gates status, lost and samples (a percentile limit), then the limits.
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("10", "3", "0")
    suites = root.findall("testsuite")
    assert suites[1].get("name") == "<script>alert(1)</script>"
    cases = suites[0].findall("testcase")
    assert [c.get("name") for c in cases] == ["status", "lost", "samples", "max", "p99"]
    assert {c.get("classname") for c in cases} == {"irqlab.check.base"}
    assert all(c.find("failure") is None for c in cases[:4])
    assert "over by" in cases[4].find("failure").get("message")
    props = {p.get("name"): p.get("value") for p in suites[0].iter("property")}
    assert props["run_id"] == "1" and props["emulated"] == "false" and props["accel"] == "kvm"
