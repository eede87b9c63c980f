"""`irqlab show RUN --hist` and `compare --hist`: terminal histograms (issue 32)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from irqlab.reports.termhist import cumulative_share, edges_1_2_5, first_tick_at
from irqlab.stats import ticks_to_ns
from irqlab.store import Store
from tests.cli._percpu_store import make_percpu_store
from tests.unit.reports._runs import add_run
from tests.conftest import call_cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "import"


@pytest.fixture(scope="module")
def pdb(tmp_path_factory):
    return make_percpu_store(tmp_path_factory.mktemp("hist") / "h.duckdb")


@pytest.fixture(scope="module")
def idb(tmp_path_factory):
    """Imports that keep only histograms: cyclictest -h (an overflow bucket) and rtla
    timerlat hist (a bucket [0, 1 us))."""
    db = tmp_path_factory.mktemp("histimp") / "i.duckdb"
    res = call_cli(["import", "auto", str(FIXTURES / "cyclictest_h.json"),
                    str(FIXTURES / "rtla_timerlat_hist.txt")], db)
    assert res.code == 0, res.stderr
    return db


def test_edges_are_1_2_5_and_ticks_map_to_their_ns():
    assert edges_1_2_5(1, 12_000) == [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000,
                                      5000, 10_000, 20_000]
    assert edges_1_2_5(37, 37) == [20, 50] and edges_1_2_5(5000, 5000) == [5000, 10_000]
    for hz in (1_000_000_000, 2_596_146_000, 19_200_000):
        for ns in (1, 10, 5000, 123_457):
            tick = first_tick_at(ns, hz)
            # The first tick count shown at ns or more (ticks_to_ns rounds half away).
            assert ticks_to_ns(tick, hz) >= ns > ticks_to_ns(tick - 1, hz)
    assert cumulative_share(239_993, 240_004) == "  99.99%" and cumulative_share(5, 5) == "    100%"


def test_show_hist_counts_every_sample_exactly(pdb):
    res = call_cli(["show", "one-stream", "--hist"], pdb)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == ("run 3 one-stream: 2000 samples, from its raw samples; bar: "
                        "log10(1 + count)")
    assert max(len(x) for x in lines) <= 120
    # Samples 1..2000 ns: [1000, 2000) holds 1000 of them, [2000, 5000) the last one.
    rows = {x[:21].strip(): x[21:].split() for x in lines[2:]}
    assert rows["1000 ns –   2000 ns"][:3] == ["1000", "50%", "99.95%"]
    assert rows["2000 ns –   5000 ns"][:3] == ["1", "0.05%", "100%"]
    assert sum(int(r[0]) for r in rows.values()) == 2000
    # The tail bucket of one sample still has a bar (log10 scale).
    assert rows["2000 ns –   5000 ns"][3].startswith("█")


def test_show_hist_json(pdb):
    res = call_cli(["show", "two-cpu", "--hist", "--json"], pdb)
    (line,) = res.lines
    assert (line["type"], line["version"], line["from"]) == ("histogram", 1, "raw samples")
    counts = {(b["low_ns"], b["high_ns"]): b["count"] for b in line["buckets"]}
    # CPU 0: 1..4000 ns, CPU 1: 3, 6, .., 12000 ns.
    lat = np.concatenate([np.arange(1, 4001), np.arange(1, 4001) * 3])
    assert counts[(2000, 5000)] == int(np.count_nonzero((lat >= 2000) & (lat < 5000)))
    assert sum(counts.values()) == line["samples"] == 8000
    assert line["below"] is None and line["overflow"] is None


def test_show_hist_of_imported_histograms(idb):
    res = call_cli(["show", "cyclictest_h", "--hist"], idb)
    assert res.code == 0, res.stderr
    assert "from its stored histogram" in res.stdout
    assert "    >= 400.0 us         103" in res.stdout          # the overflow bucket
    rtla = call_cli(["show", "rtla_timerlat_hist/irq", "--hist", "--json"], idb)
    (line,) = rtla.lines
    assert line["from"] == "stored histogram"
    assert line["below"] == {"high_ns": 1000, "count": 235_531}   # rtla's [0, 1 us)
    assert line["samples"] == 240_004


def test_compare_hist_side_by_side(pdb, idb):
    res = call_cli(["compare", "two-cpu", "two-cpu-x4", "one-stream", "--hist"], pdb)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(x) for x in lines) <= 120
    start = lines.index("histogram (latency, then per run: count and log10 bar)")
    assert lines[start + 1].split() == ["latency", "#1", "#2", "#3"]
    rows = {x[:21].strip(): x[21:].split() for x in lines[start + 2:]
            if x.startswith(" ")}
    # Run #2's largest bucket has the full bar: (120 - 21 - 3 x 8) // 3 = 25 columns.
    assert rows["20.0 us –   50.0 us"] == ["0", "2334", "█" * 25, "0"]
    js = call_cli(["compare", "two-cpu", "one-stream", "--hist", "--json"], pdb)
    hists = [x for x in js.lines if x["type"] == "histogram"]
    assert [h["run_id"] for h in hists] == [1, 3]
    assert call_cli(["compare", "two-cpu", "--hist", "--format", "csv"], pdb).code == 2
    imp = call_cli(["compare", "1", "3", "--hist"], idb)
    assert imp.code == 0 and "#1: 103 samples >= 400.0 us" in imp.stdout


def test_hist_of_a_run_without_samples_is_one_line_exit_2(tmp_path):
    db = tmp_path / "e.duckdb"
    with Store(db) as st:
        add_run(st, "empty", None)
    res = call_cli(["show", "empty", "--hist"], db)
    assert res.code == 2 and res.stdout == ""
    assert res.stderr == ("irqlab show: error: run #1 empty has no histogram: neither raw "
                          "samples nor a stored histogram (show it without --hist)\n")
