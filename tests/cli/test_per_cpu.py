"""compare, check and report --per-cpu on stored runs with per-CPU samples (issue 32)."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

import pytest

from tests.cli._percpu_store import make_percpu_store
from tests.conftest import call_cli


@pytest.fixture(scope="module")
def pdb(tmp_path_factory):
    return make_percpu_store(tmp_path_factory.mktemp("percpu") / "p.duckdb")


def test_compare_per_cpu_table(pdb):
    res = call_cli(["compare", "two-cpu", "two-cpu-x4", "one-stream", "--per-cpu"], pdb)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(x) for x in lines) <= 120
    head = lines.index("per CPU")
    assert lines[head + 1].split() == ["run", "samples", "min", "p50", "p99", "p99.9",
                                       "p99.99", "max", "warm", "max", "above", "thr",
                                       "lost"]
    rows = [x.split() for x in lines[head + 3:head + 7]]
    # cyclictest's T:N: each CPU's own count, percentiles and max (CPU 1 is 3x CPU 0).
    assert [r[:3] for r in rows] == [["#1", "T:0", "4,000"], ["#1", "T:1", "4,000"],
                                     ["#2", "T:0", "4,000"], ["#2", "T:1", "4,000"]]
    assert rows[0][5:7] == ["2000", "ns"] and rows[1][5:7] == ["6000", "ns"]
    assert " ".join(rows[3]).endswith("48.0 us 48.0 us 1,500 (37.5%) 0")
    assert "#3 one-stream: no per-CPU samples (one stream)" in res.stdout
    # Without the option: no per-CPU table.
    plain = call_cli(["compare", "two-cpu", "two-cpu-x4"], pdb)
    assert "per CPU" not in plain.stdout and "T:0" not in plain.stdout


def test_compare_per_cpu_json_equals_the_stored_per_cpu_summary(pdb):
    res = call_cli(["compare", "two-cpu", "one-stream", "--per-cpu", "--json"], pdb)
    assert res.code == 0, res.stderr
    head, first, second = res.lines[:3]
    assert head["per_cpu"] is True
    assert set(first["per_cpu"]) == {"0", "1"} and second["per_cpu"] == {}
    shown = call_cli(["show", "two-cpu", "--json"], pdb).summary
    for entry in shown["per_cpu"]:
        fig = first["per_cpu"][str(entry["cpu"])]
        # One definition of each number: compare's per-CPU figures are the run's stored
        # per-CPU summary (exact nearest rank) for the same samples.
        for key in ("samples", "min_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns",
                    "warm_max_ns", "above_threshold", "lost"):
            assert fig[key] == entry[key], key
    assert first["per_cpu"]["1"]["p99_ns"] == 11_880          # rank 3960 of 3..12000
    plain = call_cli(["compare", "two-cpu", "--json"], pdb)
    assert "per_cpu" not in plain.lines[1] and "per_cpu" not in plain.lines[0]


def test_compare_per_cpu_csv_and_markdown(pdb):
    res = call_cli(["compare", "two-cpu", "one-stream", "--per-cpu", "--format", "csv"], pdb)
    rows = list(csv.DictReader(res.stdout.splitlines()))
    assert [(r["name"], r["cpu"], r["max_ns"]) for r in rows] == [
        ("two-cpu", "", "12000"), ("one-stream", "", "2000"), ("two-cpu", "0", "4000"),
        ("two-cpu", "1", "12000")]
    md = call_cli(["compare", "two-cpu", "--per-cpu", "--format", "markdown"], pdb)
    assert "**Per CPU**" in md.stdout
    assert "| #1 T:1 | 4,000 | 3 ns | 6000 ns | 11.9 us |" in md.stdout
    plain = call_cli(["compare", "two-cpu", "--format", "csv"], pdb)
    assert "cpu" not in plain.stdout.splitlines()[0].split(",")


def test_check_per_cpu_names_the_failing_cpu(pdb, tmp_path):
    # The whole run's p99 (11.76 us) holds; CPU 1's (11.88 us) does not.
    junit = tmp_path / "j.xml"
    res = call_cli(["check", "two-cpu", "--p99", "11.8us", "--per-cpu", "--junit",
                    str(junit)], pdb)
    assert res.code == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "FAIL run 1 two-cpu: 1/1 limits met over all CPUs; not met on cpu 1"
    assert "  cpu 0: PASS 1/1 limits met (4000 samples)" in lines
    assert "  cpu 1: FAIL 0/1 limits met (4000 samples)" in lines
    assert "    FAIL p99 11.9 us > 11.8 us: over by 80 ns (+0.678%)" in lines
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases["cpu1 p99"].find("failure") is not None
    assert cases["cpu0 p99"].find("failure") is None
    assert cases["p99"].find("failure") is None
    # Without --per-cpu the same limit passes: it judges the whole run.
    assert call_cli(["check", "two-cpu", "--p99", "11.8us"], pdb).code == 0


def test_check_per_cpu_json_and_runs_without_cpus(pdb):
    res = call_cli(["check", "two-cpu-x4", "one-stream", "--max", "30us", "--per-cpu",
                    "--json"], pdb)
    assert res.code == 1
    two, one = res.lines
    assert two["passed"] is False and two["per_cpu"]["0"]["passed"] is True
    cpu1 = two["per_cpu"]["1"]
    assert (cpu1["cpu"], cpu1["samples"], cpu1["passed"]) == (1, 4000, False)
    assert cpu1["limits"][0]["value"] == 48_000 and cpu1["limits"][0]["allowed"] == 30_000
    # A run of one stream is judged as a whole, and says so.
    assert one["passed"] is True and one["per_cpu"] == {}
    assert any("no per-CPU samples" in n for n in one["notes"])
    # A percentile limit needs its samples on each CPU: 4000 per CPU < 10000 for p99.99.
    few = call_cli(["check", "two-cpu", "--p99.99", "1ms", "--per-cpu", "--json"], pdb)
    gate = few.lines[0]["per_cpu"]["0"]["gates"][0]
    assert few.code == 1 and gate["gate"] == "samples" and gate["passed"] is False


@pytest.mark.slow
def test_report_per_cpu_table(pdb, tmp_path):
    out = tmp_path / "r.html"
    res = call_cli(["report", "two-cpu", "--per-cpu", "-o", str(out)], pdb)
    assert res.code == 0, res.stderr
    html = out.read_text()
    assert html.count("<h3>Per CPU</h3>") == 1
    assert '<table class="per-cpu">' in html
    assert ('<td class="l">1</td><td class="">4,000</td><td class="">3 ns</td>'
            '<td class="">6000 ns</td>') in html
    # The CPUs' curves overlaid, among the run's plots.
    assert html.count('data-plot="run1-per-cpu"') == 1


def test_report_per_cpu_section_of_a_run_without_cpus(pdb):
    from irqlab.reports.data import load_runs
    from irqlab.reports.html import _per_cpu_section
    from irqlab.store import Store

    with Store(pdb, read_only=True) as st:
        (run,) = load_runs(st, [r for r in st.runs() if r.name == "one-stream"])
    section, plot = _per_cpu_section(run, None)
    assert plot is None
    assert section == ["<h3>Per CPU</h3>", "<p>no per-CPU samples (one stream): its "
                                           "figures are the whole run&#x27;s.</p>"]


def test_per_cpu_figures_of_a_run_kept_in_the_store_equal_in_memory(pdb):
    """A big run's samples stay in the store (read CPU by CPU in batches): the same
    per-CPU figures as when read whole."""
    from irqlab.reports.data import load_runs
    from irqlab.reports.percpu import per_cpu_figures
    from irqlab.store import Store

    with Store(pdb, read_only=True) as st:
        rows = [r for r in st.runs() if r.name == "two-cpu-x4"]
        (whole,) = load_runs(st, rows)
        (kept,) = load_runs(st, rows, in_memory_samples=0)
        assert kept.stored is not None and whole.stored is None
        got = per_cpu_figures(kept, 40_000)           # CPU 1: 12 ns * k > 40 us: k > 3333
        assert got == per_cpu_figures(whole, 40_000)
        assert got["1"]["above_threshold"] == 667 and got["1"]["max_ns"] == 48_000


def test_junit_ids_of_series_per_cpu_are_unique_and_stable(tmp_path):
    # issue 46: `check series:X --per-cpu --junit` wrote one <testsuite name="idle"> per
    # run with the same (classname, name) pairs: duplicate ids CI systems merge.
    from irqlab.store import Store
    from tests.cli._percpu_store import add_two_cpu_run

    db = tmp_path / "series.duckdb"
    with Store(db) as st:
        for sid in ("idle-aaaaaa", "idle-bbbbbb"):      # two series of one configuration
            for index in (1, 2, 3):
                add_two_cpu_run(st, "idle", series=(sid, index, 3))

    def ids(selector: str) -> list[tuple[str, str, str]]:
        junit = tmp_path / f"{selector.replace(':', '_')}.xml"
        res = call_cli(["check", selector, "--max", "30us", "--per-cpu", "--junit",
                        str(junit)], db)
        assert res.code == 0, res.stdout + res.stderr
        root = ET.parse(junit).getroot()
        return [(s.get("name"), c.get("classname"), c.get("name"))
                for s in root.iter("testsuite") for c in s.iter("testcase")]

    first, second = ids("series:idle-aaaaaa"), ids("series:idle-bbbbbb")
    assert len(first) == len(set(first)) > 6
    assert first == second                                   # stable across builds
    assert {s for s, _, _ in first} == {"idle #1", "idle #2", "idle #3"}
    assert ("idle #2", "irqlab.check.idle #2", "cpu1 max") in first
