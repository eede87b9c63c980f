"""`irqlab trend`: a series of real stored runs (RunStats and the store's own code, as
`irqlab run` stores them), its text and JSON output, bad input, and the lab store."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from irqlab.stats.changepoint import find_change_points
from irqlab.store import Store
from tests.conftest import call_cli
from tests.unit.reports._runs import add_run

SCHEMAS = Path(__file__).parents[2] / "docs" / "schema"
T0 = dt.datetime(2026, 11, 1, 3, 0, 0)
# The max of latencies 1..1000 ns times the scale is 1000 x scale, exactly: a doubling
# from the 7th nightly run on.
SCALES = [9, 10, 9, 8, 9, 10, 18, 20, 18, 16, 18, 20]
SERIES = "series:nightly-0a1b2c"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trend") / "trend.duckdb"
    with Store(path) as st:
        for day, scale in enumerate(SCALES):
            # Kernel 6.9 for the first 6 nights, then 6.10 (a text sort puts 6.10 first).
            kernel = "6.9" if day < 6 else "6.10"
            rid = add_run(st, "nightly", np.arange(1, 1001, dtype=np.int64) * scale,
                          tags={"series": "nightly-0a1b2c", "kernel": kernel}, raw=False)
            st.update_run(rid, started_at=T0 + dt.timedelta(days=day))
        add_run(st, "other", np.arange(1, 101, dtype=np.int64), raw=False)
    return path


def _one_line_error(res, words: str) -> None:
    assert res.code == 2, (res.stdout, res.stderr)
    assert res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert words in line and "Traceback" not in res.stderr


def test_text_lists_each_run_marks_the_change_and_says_it(store_path):
    res = call_cli(["trend", SERIES, "--metric", "max"], store_path)
    assert res.code == 0, res.stderr
    p = find_change_points([1000.0 * s for s in SCALES])[0].p_value
    assert res.stdout.splitlines() == [
        "max of 12 runs (series:nightly-0a1b2c) by start time; change points: E-divisive "
        "means, p <= 0.01, 199 permutations, >= 5 runs a segment, log scale",
        "  2026-11-01 03:00:00  #1      9000 ns  nightly",
        "  2026-11-02 03:00:00  #2      10.0 us  nightly",
        "  2026-11-03 03:00:00  #3      9000 ns  nightly",
        "  2026-11-04 03:00:00  #4      8000 ns  nightly",
        "  2026-11-05 03:00:00  #5      9000 ns  nightly",
        "  2026-11-06 03:00:00  #6      10.0 us  nightly",
        "* 2026-11-07 03:00:00  #7      18.0 us  nightly   <- change point",
        "  2026-11-08 03:00:00  #8      20.0 us  nightly",
        "  2026-11-09 03:00:00  #9      18.0 us  nightly",
        "  2026-11-10 03:00:00  #10     16.0 us  nightly",
        "  2026-11-11 03:00:00  #11     18.0 us  nightly",
        "  2026-11-12 03:00:00  #12     20.0 us  nightly",
        # Segment means to the ns: 55000/6 and 110000/6.
        f"change at run #7 nightly (2026-11-07 03:00:00): max 9167 ns -> 18.3 us (x2, "
        f"segment means), p = {p:.3g}",
    ]
    assert p <= 0.01


def test_by_tag_shows_the_tag_and_orders_by_version(store_path):
    res = call_cli(["trend", SERIES, "--metric", "max", "--by", "kernel"], store_path)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("max of 12 runs (series:nightly-0a1b2c) by tag kernel, then "
                               "start time; change points")
    assert lines[1] == "  2026-11-01 03:00:00  #1   kernel=6.9      9000 ns  nightly"
    assert lines[7] == ("* 2026-11-07 03:00:00  #7   kernel=6.10     18.0 us  nightly   "
                        "<- change point")
    _one_line_error(call_cli(["trend", SERIES, "--by", "compiler"], store_path),
                    "0 runs with a p99.9 value and tag compiler in series:nightly-0a1b2c")


def test_json_lines_follow_their_schemas_and_show_s_numbers(store_path):
    jsonschema = pytest.importorskip("jsonschema")
    res = call_cli(["trend", SERIES, "--json"], store_path)
    assert res.code == 0, res.stderr
    for line in res.lines:
        assert list(line)[:2] == ["type", "version"]
        schema = json.loads((SCHEMAS / f"{line['type']}.schema.json").read_text())
        jsonschema.validate(line, schema)
    head, *runs = res.lines
    assert head["type"] == "trend" and head["metric"] == "p99.9" and head["runs"] == 12
    assert head["skipped_run_ids"] == [] and head["selectors"] == [SERIES]
    assert [r["type"] for r in runs[:12]] == ["trend_run"] * 12
    # Each value is the stored summary's p99.9, the number `irqlab show --json` prints.
    shown = call_cli(["show", SERIES, "--json"], store_path)
    by_id = {x["run_id"]: x["p999_ns"] for x in shown.lines if x["type"] == "summary"}
    assert [r["value_ns"] for r in runs[:12]] == [by_id[r["run_id"]] for r in runs[:12]]
    changes = runs[12:]
    assert [(c["type"], c["run_id"], c["before_run_id"]) for c in changes] == [
        ("trend_change", 7, 6)]
    assert changes[0]["ratio"] == pytest.approx(2.0, rel=0.02)


def test_the_parser_s_defaults_are_the_method_s():
    from irqlab.cli import cmd_trend
    from irqlab.stats import changepoint

    assert (cmd_trend.P_MAX, cmd_trend.PERMUTATIONS, cmd_trend.MIN_SIZE) == (
        changepoint.DEFAULT_P_MAX, changepoint.DEFAULT_PERMUTATIONS,
        changepoint.DEFAULT_MIN_SIZE)


@pytest.mark.parametrize("args, words", [
    (["--metric", "p99.8"], "unknown metric 'p99.8': choose one of min, mean"),
    (["--min-size", "7"], "12 runs with a p99.9 value in series:nightly-0a1b2c: no change "
                          "can be found with fewer than 14 runs"),
    (["--min-size", "1"], "--min-size must be at least 2"),
    (["--p-max", "1.5"], "'1.5' is no p-value"),
    (["--permutations", "0"], "--permutations must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(store_path, args, words):
    _one_line_error(call_cli(["trend", SERIES, *args], store_path), words)


def test_too_few_runs_and_no_runs_are_one_line(store_path):
    _one_line_error(call_cli(["trend", "other"], store_path),
                    "1 runs with a p99.9 value in other: no change can be found with "
                    "fewer than 10 runs")
    _one_line_error(call_cli(["trend", "series:nope"], store_path), "no series 'nope'")


@pytest.mark.slow
def test_the_lab_store_gives_the_same_trend(store_path, pg_server, tmp_path):
    lab = pg_server.database("trend")
    ids = [str(i) for i in range(1, len(SCALES) + 1)]       # push takes ids and names
    pushed = call_cli(["push", *ids, "--to", lab, "--json"], store_path)
    assert pushed.code == 0, pushed.stderr
    local = call_cli(["trend", SERIES, "--json"], store_path).lines
    res = call_cli(["trend", SERIES, "--json"], lab)      # a URL: no Path (it folds //)
    assert res.code == 0, res.stderr
    strip = ("run_id", "before_run_id")
    assert ([{k: v for k, v in x.items() if k not in strip} for x in res.lines]
            == [{k: v for k, v in x.items() if k not in strip} for x in local])
