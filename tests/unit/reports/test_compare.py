"""The compare model and its formatters (markdown, csv, json) on deterministic runs."""

import csv
import json

from irqlab.reports.compare import build_compare
from irqlab.reports.data import load_runs
from irqlab.reports.select import select_runs
from irqlab.reports.tables import csv_lines, json_objects, markdown_lines


def _model(store, refs, **kw):
    return build_compare(load_runs(store, select_runs(store, refs)), **kw)


def test_rows_ratios_and_noise_against_the_baseline(store):
    m = _model(store, ["base", "double", "summary-only"])
    base, double, summ = m["rows"]
    assert base["baseline"] and base["noise"] is None and base["p50_ratio"] == 1.0
    assert (double["p50_ns"], double["p999_ns"], double["max_ns"]) == (10000, 19980, 20000)
    assert double["p50_ratio"] == 2.0 and double["p999_ratio"] == 2.0
    assert double["noise"]["test"] == "bootstrap" and double["noise"]["beyond_noise"]
    assert summ["noise"] == {"test": "n/a", "reason": "no raw samples for #4 summary-only"}
    assert summ["percentiles_from"] == "summary"
    # Same host, kernel, accel, period and tick source: only the sample-count advice.
    assert {w["kind"] for w in m["warnings"]} == {"few samples"}


def test_comparability_warnings_say_what_differs_and_what_to_do(store):
    m = _model(store, ["base", "elsewhere"])
    kinds = {w["kind"]: w["text"] for w in m["warnings"]}
    assert set(kinds) == {"host", "kernel", "emulated", "accel", "period", "tick source",
                          "threshold", "few samples"}
    assert "measure at least 100000 samples" in kinds["few samples"]
    assert "compare runs from one host" in kinds["host"]
    assert "emulated" in kinds["emulated"] and "hardware-assisted" in kinds["emulated"]
    assert "--accel" in kinds["accel"] and "--period" in kinds["period"]
    assert "calibrated-pit" in kinds["tick source"]
    assert "--threshold" in kinds["threshold"]
    assert "threshold" not in {w["kind"] for w in
                               _model(store, ["base", "elsewhere"],
                                      threshold_ns=5000)["warnings"]}


def test_markdown_is_a_table_with_notes_noise_and_escaped_names(store):
    lines = markdown_lines(_model(store, ["base", "double", "5"]))
    assert lines[0] == ("| run | samples | min | p50 | p99 | p99.9 | p99.99 | max | warm max"
                        " | above thr | above % | p50 × | p99.9 × | noise | from |")
    assert lines[2] == ("| 1 base | 10000 | 1 ns | 5.00 us | 9.90 us | 9.99 us | 10.0 us | "
                        "10.0 us | 10.0 us | 0 | 0% | 1 | 1 | baseline | raw |")
    assert lines[3].startswith("| 2 double | 10000 | 2 ns | 10.0 us | 19.8 us | 20.0 us |")
    assert "beyond noise (p50 p&lt;0.001)" in lines[3]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in lines[4] and "<script>" not in lines[4]
    text = "\n".join(lines)
    assert "- percentiles: exact, from the raw samples (nearest rank)" in text
    assert "**Noise**" in text and "percentile bootstrap" in text


def test_csv_has_integer_ns_and_numeric_noise_fields(store):
    rows = list(csv.DictReader(csv_lines(_model(store, ["base", "double", "4"]))))
    assert [r["run_id"] for r in rows] == ["1", "2", "4"]
    assert rows[0]["p999_ns"] == "9990" and rows[0]["noise_test"] == "baseline"
    assert rows[1]["p999_ratio"] == "2" and rows[1]["beyond_noise"] == "True"
    assert float(rows[1]["noise_p50_ci_low"]) > 1.9 and float(rows[1]["noise_p50_p"]) < 1e-3
    assert rows[2]["noise_test"] == "n/a" and rows[2]["noise_p50_p"] == ""


def test_json_lines_are_versioned_objects(store):
    objs = json_objects(_model(store, ["base", "elsewhere"]))
    assert [o["type"] for o in objs[:3]] == ["compare", "compare_run", "compare_run"]
    assert all(o["version"] == 1 for o in objs)
    assert objs[0]["baseline_run_id"] == 1 and objs[0]["runs"] == 2
    assert {o["type"] for o in objs[3:]} == {"compare_warning"}
    json.dumps(objs)   # JSON-ready, no numpy scalars
