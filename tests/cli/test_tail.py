"""`irqlab tail` and `check --max-exceed` on stored runs of known tail (issue 45)."""

import json
import math

import numpy as np
import pytest

from irqlab.store import Store
from tests.conftest import call_cli
from tests.unit.reports._runs import add_run
from tests.unit.stats._tails import synthetic, true_p, true_x


@pytest.fixture(scope="module")
def tdb(tmp_path_factory):
    """Run 1: a stationary synthetic tail (100,000 samples); run 2: its tail three
    times longer in the second half (refused); run 3: 1,000 samples (too few)."""
    path = tmp_path_factory.mktemp("tail") / "t.duckdb"
    rng = np.random.default_rng(45)
    with Store(path) as st:
        add_run(st, "steady", np.round(synthetic(rng, 100_000)).astype(np.int64))
        moved = np.concatenate([synthetic(rng, 60_000), synthetic(rng, 60_000, tail_scale=3)])
        add_run(st, "moved", np.round(moved).astype(np.int64))
        add_run(st, "short", np.round(synthetic(rng, 1_000)).astype(np.int64))
    return path


def test_tail_json_gives_intervals_checks_and_pwcet(tdb):
    at = int(true_x(1e-5))
    res = call_cli(["tail", "steady", "--at", f"{at}ns,1ms", "--json"], tdb)
    assert res.code == 0, res.stderr
    (m,) = res.lines
    assert m["type"] == "tail" and m["refused"] is None and m["run_ids"] == [1]
    assert [c["name"] for c in m["checks"]] == ["independence",
                                                "identical distribution (rate)",
                                                "identical distribution (shape)",
                                                "goodness of fit"]
    assert all(c["passed"] and c["p_value"] is not None for c in m["checks"])
    edge, far = m["exceedance"]
    assert edge["latency_ns"] == at and edge["p_low"] < edge["p"] < edge["p_high"]
    assert edge["p_low"] < 3 * true_p(at) and edge["p_high"] > true_p(at) / 3
    assert far["latency_ns"] == 1_000_000 and far["p_high"] < 1e-6
    assert far["samples_for_width"] > m["samples"]      # 10x needs more samples there
    per = {(w["per"], w["probability"]): w for w in m["pwcet"]}
    assert set(per) == {("sample", 1e-6), ("sample", 1e-9), ("hour", 1e-6), ("hour", 1e-9)}
    w = per[("sample", 1e-6)]
    assert w["latency_low_ns"] < w["latency_ns"] < (w["latency_high_ns"] or math.inf)
    assert per[("sample", 1e-9)]["latency_ns"] > w["latency_ns"]
    # One sample a ms: an hour holds 3.6 M samples, so 1e-6 an hour is rarer per sample.
    assert m["rate_per_s"] == pytest.approx(1000, rel=0.01)
    assert per[("hour", 1e-6)]["per_sample"] < 1e-9


def test_tail_human_lines(tdb):
    res = call_cli(["tail", "1"], tdb)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("tail of #1 steady: 100,000 samples, max ")
    assert sum(x.startswith("  ok   ") for x in lines) == 4
    assert any(x.startswith("P(latency > ") and "per sample" in x for x in lines)
    assert any(x.startswith("pWCET at 1e-09 per hour: ") for x in lines)
    assert lines[-1].startswith("method: peaks over threshold")


def test_a_moved_tail_and_too_few_samples_are_refused_with_exit_1(tdb):
    res = call_cli(["tail", "moved", "--json"], tdb)
    assert res.code == 1
    (m,) = res.lines
    assert "identical distribution" in m["refused"] and m["exceedance"] == []
    text = call_cli(["tail", "moved"], tdb)
    assert text.code == 1 and "REFUSED: " in text.stdout and "FAIL identical" in text.stdout
    short = call_cli(["tail", "short", "--json"], tdb)
    assert short.code == 1 and "needs at least" in short.lines[0]["refused"]


@pytest.mark.slow
def test_check_max_exceed_gates_on_the_upper_bound(tdb):
    ok = call_cli(["check", "steady", "--max-exceed", "1ms:1e-6", "--json"], tdb)
    assert ok.code == 0, ok.stdout + ok.stderr
    gate = next(g for g in ok.lines[0]["gates"] if g["gate"].startswith("max-exceed"))
    assert gate["passed"] and gate["value"] < 1e-6 and gate["allowed"] == 1e-6
    at = int(true_x(1e-4))
    bad = call_cli(["check", "steady", "--max-exceed", f"{at}ns:1e-6", "--json"], tdb)
    assert bad.code == 1
    gate = next(g for g in bad.lines[0]["gates"] if g["gate"].startswith("max-exceed"))
    assert not gate["passed"] and gate["value"] > 1e-6
    refused = call_cli(["check", "moved", "--max-exceed", "1ms:1e-6"], tdb)
    assert refused.code == 1 and "tail fit refused" in refused.stdout


@pytest.mark.parametrize("args, words", [
    (["tail", "steady", "--at", "abc"], "is not a duration"),
    (["tail", "steady", "--at", "0ns"], "above 0"),
    (["tail", "steady", "--width", "1"], "no interval width"),
    (["check", "steady", "--max-exceed", "1ms"], "LATENCY:PROBABILITY"),
    (["check", "steady", "--max-exceed", "1ms:2"], "between 0 and 1"),
    (["tail", "nosuch"], "no run"),
])
def test_bad_input_is_one_line_and_exit_2(tdb, args, words):
    res = call_cli(args, tdb)
    assert res.code == 2 and words in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.slow
def test_split_check_predicts_the_second_half_of_a_steady_run(tdb):
    res = call_cli(["tail", "steady", "--split-check", "--json"], tdb)
    assert res.code == 0, res.stderr
    check = res.lines[0]["split_check"]
    assert check["samples_first"] == check["samples_second"] == 50_000
    assert check["expected_low"] <= check["expected"] <= check["expected_high"]
    assert check["inside"] is True, check
    text = call_cli(["tail", "steady", "--split-check"], tdb)
    assert "split check: the first half's p99.99" in text.stdout and "inside" in text.stdout


@pytest.mark.slow
def test_the_dashboard_and_the_report_show_the_tail_as_the_cli_prints_it(tdb, tmp_path):
    """Issue 45: the tail is shown in report and serve, from the one formatter."""
    import html
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from irqlab.serve.app import build_app

    cli = call_cli(["tail", "1"], tdb).stdout.splitlines()
    client = TestClient(build_app(tdb), base_url="http://127.0.0.1")
    page = client.get("/runs/1/tail")
    assert page.status_code == 200
    shown = html.unescape(page.text.split('<pre id="tail">')[1].split("</pre>")[0])
    assert shown.splitlines() == cli
    assert 'href="/runs/1/tail"' in client.get("/runs/1").text
    moved = html.unescape(client.get("/runs/2/tail").text)
    assert "refused: identical distribution" in moved
    out = tmp_path / "r.html"
    res = call_cli(["report", "1", "-o", str(out)], tdb)
    assert res.code == 0, res.stderr
    text = html.unescape(out.read_text())
    assert 'id="tail"' in text and cli[-1] in text and cli[1] in text
