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
    # Single runs: a doubling is outside the block bootstrap's interval, but one run each
    # cannot tell run-to-run variation, so the verdict is never "beyond noise".
    nz = double["noise"]
    assert nz["test"] == "bootstrap" and nz["beyond_noise"] is None
    assert nz["verdict"] == "unknown" and nz["reason"].startswith("single runs")
    assert nz["replicates"] == [1, 1] and all(b >= 1 for b in nz["block_len"])
    assert all(r["ci_low"] > 1 and r["ratio"] == 2.0 for r in nz["results"])
    assert summ["noise"]["test"] == "n/a"
    assert summ["noise"]["reason"] == "no raw samples for #4 summary-only"
    assert [r["group"] for r in m["rows"]] == [0, 1, 2]
    assert all(r["series"] is None and r["group_runs"] == 1 for r in m["rows"])
    assert summ["percentiles_from"] == "summary"
    # Same host, kernel, accel, period and tick source: only the sample-count advice.
    assert {w["kind"] for w in m["warnings"]} == {"few samples"}


def test_comparability_warnings_say_what_differs_and_what_to_do(store):
    m = _model(store, ["base", "elsewhere"])
    kinds = {w["kind"]: w["text"] for w in m["warnings"]}
    assert set(kinds) == {"emulated", "accel", "period", "tick source",
                          "threshold", "few samples"}
    assert "measure at least 100,000 samples" in kinds["few samples"]
    # Host and kernel are facts of "what differs" (issue 31), with both runs' values.
    diff = {d["fact"]: d["values"] for d in m["differs"]}
    assert diff["host.hostname"] == ["h1", "h2"] and diff["host.kernel"] == ["6.1.0", "6.6"]
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
    assert lines[2] == ("| 1 base | 10,000 | 1 ns | 5000 ns | 9900 ns | 9990 ns | 9999 ns | "
                        "10.0 us | 10.0 us | 0 | 0% | 1 | 1 | baseline | raw |")
    assert lines[3].startswith("| 2 double | 10,000 | 2 ns | 10.0 us | 19.8 us | 20.0 us |")
    assert "| unknown (single runs) |" in lines[3]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in lines[4] and "<script>" not in lines[4]
    text = "\n".join(lines)
    assert "- percentiles: exact, from the raw samples (nearest rank)" in text
    assert "**Noise**" in text and "block bootstrap" in text
    assert "run-to-run variation unknown" in text


def test_csv_has_integer_ns_and_numeric_noise_fields(store):
    rows = list(csv.DictReader(csv_lines(_model(store, ["base", "double", "4"]))))
    assert [r["run_id"] for r in rows] == ["1", "2", "4"]
    assert rows[0]["p999_ns"] == "9990" and rows[0]["noise_test"] == "baseline"
    assert rows[1]["p999_ratio"] == "2" and rows[1]["beyond_noise"] == ""
    assert rows[1]["noise_verdict"] == "unknown"
    assert float(rows[1]["noise_p50_ci_low"]) > 1 and float(rows[1]["noise_p50_p"]) < 0.01
    assert rows[1]["group"] == "1" and rows[1]["series"] == ""
    assert rows[2]["noise_test"] == "n/a" and rows[2]["noise_p50_p"] == ""


def test_json_lines_are_versioned_objects(store):
    objs = json_objects(_model(store, ["base", "elsewhere"]))
    assert [o["type"] for o in objs[:3]] == ["compare", "compare_run", "compare_run"]
    assert all(o["version"] == 2 for o in objs)
    assert objs[0]["baseline_run_id"] == 1 and objs[0]["runs"] == 2
    assert {o["type"] for o in objs[3:]} == {"compare_warning"}
    json.dumps(objs)   # JSON-ready, no numpy scalars


def test_rtds_runs_show_their_max_against_the_periodic_server_bound(tmp_path):
    import numpy as np

    from irqlab.store import Store
    from tests.unit.reports._runs import add_run

    def hooks(period: str, budget: str, status: str = "applied") -> dict:
        return {"hooks": {"knob:rtds_period": {"requested": period, "status": status},
                          "knob:rtds_budget": {"requested": budget, "status": status}}}
    with Store(tmp_path / "r.duckdb") as st:
        add_run(st, "within", np.full(200, 5_000_000, np.int64),
                extra_meta=hooks("10ms", "4ms"))              # max 5 ms < 12 ms
        add_run(st, "beyond", np.r_[np.full(199, 1000), 40_000_000].astype(np.int64),
                extra_meta=hooks("10ms", "4ms"))              # max 40 ms > 12 ms
        add_run(st, "credit2", np.full(200, 1000, np.int64),
                extra_meta=hooks("10ms", "4ms", "not applicable here: credit2"))
        m = _model(st, ["within", "beyond", "credit2"])
    within, beyond, credit2 = m["rows"]
    assert (within["rtds_period_ns"], within["rtds_budget_ns"],
            within["rtds_bound_ns"]) == (10_000_000, 4_000_000, 12_000_000)
    assert "rtds_bound_ns" not in credit2          # knobs not applied: no bound to show
    notes = {w["run_id"]: w for w in m["warnings"] if w["kind"] == "rtds bound"}
    assert set(notes) == {within["run_id"], beyond["run_id"]}
    assert "12 ms" in notes[within["run_id"]]["text"]
    assert notes[within["run_id"]]["text"].endswith("is within the bound")
    assert "3.33x the bound" in notes[beyond["run_id"]]["text"]
