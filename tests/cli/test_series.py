"""Replicates through the CLI: `irqlab run --repeat N` and `repeat = N` in a matrix on the
native target (fast, no QEMU); the series: selector in compare and show; bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from irqlab.runner.native import NATIVE_PROBE
from irqlab.store import Store
from tests.conftest import call_cli, run_cli
from tests.unit.reports._runs import add_run

MATRIX = """\
name = "rep"
[run]
target = "native"
samples = 100
window = "50ms"
repeat = 2
[matrix]
priority = [80, 90]
"""


@pytest.fixture(scope="module")
def native_built():
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    return NATIVE_PROBE


def _one_line_usage_error(res) -> None:
    assert res.code == 2, (res.stdout, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.slow
def test_repeat_3_makes_a_series_of_stored_runs(db, native_built):
    res = run_cli(["run", "--target", "native", "--repeat", "3", "--duration", "1s",
                   "--window", "500ms", "--name", "nat", "--json"], db)
    assert res.code == 0, res.stderr
    summaries = [x for x in res.lines if x["type"] == "summary"]
    (series,) = [x for x in res.lines if x["type"] == "series"]
    assert res.lines[-1] == series
    assert [s["name"] for s in summaries] == ["nat"] * 3
    assert series["version"] == 1 and series["name"] == "nat" and series["count"] == 3
    assert series["run_ids"] == [s["run_id"] for s in summaries]
    assert series["statuses"] == ["ok"] * 3
    sid = series["id"]
    assert sid.startswith("nat-")
    with Store(db, read_only=True) as st:
        runs = st.runs()
    assert [r.run_id for r in runs] == series["run_ids"]
    assert [r.tags for r in runs] == [{"series": sid}] * 3
    assert [r.metadata["series"] for r in runs] == [
        {"id": sid, "index": i, "count": 3} for i in (1, 2, 3)]

    # A single run next to it, then the selector by id and by the runs' name.
    assert run_cli(["run", "--target", "native", "--samples", "100", "--name", "nat"],
                   db).code == 0
    for ref in (f"series:{sid}", "series:nat"):
        cmp = call_cli(["compare", ref, "--json"], db)
        assert cmp.code == 0, cmp.stderr
        shown = [x["run_id"] for x in cmp.lines if x["type"] == "compare_run"]
        assert shown == series["run_ids"], (ref, cmp.lines[:3])
    show = call_cli(["show", f"series:{sid}", "--json"], db)
    assert show.code == 0, show.stderr
    assert [x["run_id"] for x in show.lines] == series["run_ids"]
    listed = call_cli(["list", "--json"], db)
    assert [x["series"] for x in listed.lines] == [sid] * 3 + [None]

    # Human output: the series line names the selector.
    human = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "show",
                            f"series:{sid}", "--db", str(db)], capture_output=True,
                           text=True, timeout=60)
    assert human.returncode == 0 and f"series: {sid} (run 3 of 3)" in human.stdout


@pytest.mark.slow
def test_series_line_for_people(db, native_built):
    proc = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                           "native", "--repeat", "2", "--samples", "100", "--window",
                           "50ms", "--db", str(db)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("series native-") and ": 2 runs (ok 2)" in last
    sid = last.split()[1].rstrip(":")
    assert f"compare with: irqlab compare series:{sid} ..." in last
    with Store(db, read_only=True) as st:
        names = {r.name for r in st.runs()}
    assert len(names) == 1      # the default name, one for the whole series


def test_unknown_series_is_one_line(db):
    # A stored run named "single", of no series: what selects it is the point, not how it
    # was measured (a native run here cost a child and a FIFO probe on the host).
    with Store(db) as st:
        add_run(st, "single", np.arange(1, 51, dtype=np.int64) * 1000, raw=False)
    for ref, words in (("series:nope", "no series 'nope'"),
                       ("series:single", "no series (made without --repeat)"),
                       ("series:", "write series:ID")):
        res = call_cli(["compare", ref], db)
        _one_line_usage_error(res)
        assert words in res.stderr, res.stderr


@pytest.mark.slow
def test_matrix_repeat_interleaves_cells_and_resumes_a_series(db, tmp_path, native_built):
    scn = tmp_path / "rep.toml"
    scn.write_text(MATRIX)
    res = run_cli(["matrix", str(scn), "--format", "json"], db)
    assert res.code == 0, res.stderr
    with Store(db, read_only=True) as st:
        runs = st.runs()
    a, b = "rep/priority=80", "rep/priority=90"
    # A1 B1 A2 B2: round 1 of every cell, then round 2.
    assert [r.name for r in runs] == [a, b, a, b]
    assert [r.metadata["series"]["index"] for r in runs] == [1, 1, 2, 2]
    sa, sb = runs[0].tags["series"], runs[1].tags["series"]
    assert sa != sb and runs[2].tags["series"] == sa and runs[3].tags["series"] == sb
    # The table: one line per run, cells in order, each cell's runs by index.
    assert [(x["priority"], x["series"], x["index"], x["run_id"]) for x in res.lines] == [
        (80, sa, 1, 1), (80, sa, 2, 3), (90, sb, 1, 2), (90, sb, 2, 4)]

    # Run 3 (cell A, index 2) did not end ok: --resume runs that one again, in A's series.
    with Store(db) as st:
        st.update_run(3, status="failed")
    res = run_cli(["matrix", str(scn), "--format", "json", "--resume"], db)
    assert res.code == 0, res.stderr
    assert "3 of 4 runs" in res.stderr
    with Store(db, read_only=True) as st:
        runs = st.runs()
    assert len(runs) == 5
    new = runs[-1]
    assert (new.name, new.status, new.tags["series"], new.metadata["series"]) == \
        (a, "ok", sa, {"id": sa, "index": 2, "count": 2})
    assert [(x["run_id"], x["resumed"]) for x in res.lines] == [
        (1, True), (5, False), (2, True), (4, True)]
    # Everything done: a second resume runs nothing.
    res = run_cli(["matrix", str(scn), "--format", "json", "--resume"], db)
    assert res.code == 0 and all(x["resumed"] for x in res.lines)
    with Store(db, read_only=True) as st:
        assert len(st.runs()) == 5


@pytest.mark.parametrize("args, words", [
    (["--repeat", "0"], "--repeat"),
    (["--repeat", "x"], "--repeat"),
    (["--repeat", "-2"], "--repeat"),
])
def test_bad_repeat_is_one_line(db, args, words):
    res = run_cli(["run", "--target", "native", "--samples", "5", *args], db)
    _one_line_usage_error(res)
    assert words in res.stderr


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("repeat = 2", 'repeat = "x"'), "[run] key 'repeat'"),
    (lambda t: t.replace("repeat = 2", "repeat = 0"), "[run] key 'repeat'"),
    (lambda t: t.replace("repeat = 2\n", "") + "repeat = [1, 2]\n",
     "put repeat = N in [run]"),
])
def test_bad_scenario_repeat_is_one_line(db, tmp_path: Path, edit, words):
    scn = tmp_path / "bad.toml"
    scn.write_text(edit(MATRIX))
    res = run_cli(["matrix", str(scn)], db)
    _one_line_usage_error(res)
    assert words in res.stderr and f"{scn}:" in res.stderr


def test_matrix_cli_repeat_replaces_the_file_s(db, tmp_path):
    scn = tmp_path / "rep.toml"
    scn.write_text(MATRIX)
    _one_line_usage_error(run_cli(["matrix", str(scn), "--repeat", "0"], db))


@pytest.mark.slow
def test_ctrl_c_stops_the_whole_series(db, native_built):
    """SIGINT during the second run: exit 130, the series line lists what is stored."""
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                             "native", "--repeat", "5", "--duration", "2s", "--window",
                             "500ms", "--name", "cc", "--json", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = []
    for text in proc.stdout:          # the first run's summary: the second run starts
        lines.append(json.loads(text))
        if lines[-1]["type"] == "summary":
            proc.send_signal(signal.SIGINT)
            break
    rest, err = proc.communicate(timeout=120)
    lines += [json.loads(x) for x in rest.splitlines()]
    assert proc.returncode == 130, err
    summaries = [x for x in lines if x["type"] == "summary"]
    found = [x for x in lines if x["type"] == "series"]
    assert len(found) == 1, (err, lines[-1])
    series = found[0]
    assert series["run_ids"] == [s["run_id"] for s in summaries]
    assert 1 <= len(series["run_ids"]) < 5 and series["statuses"][0] == "ok"
    assert series["statuses"][1:] in ([], ["interrupted"])
    with Store(db, read_only=True) as st:
        assert [r.run_id for r in st.runs()] == series["run_ids"]


@pytest.mark.slow
def test_sigterm_stops_a_matrix_of_short_runs(db, tmp_path: Path, native_built):
    """Runs of one sample end before they look at a stop request: the SIGTERM that came
    during one must still stop the matrix (issue 30: a 10^6-cell matrix went on through
    every SIGTERM). Exit 130, the runs before kept."""
    nums = ", ".join(str(i) for i in range(1, 101))
    scn = tmp_path / "short.toml"
    scn.write_text(f'name = "short"\n[run]\ntarget = "native"\nperiod = "1ms"\n'
                   f'[matrix]\nsamples = [1]\nwarmup = [{nums}]\npriority = [80, 90]\n')
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "matrix", str(scn),
                             "--db", str(db), "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:            # cell lines go to stderr
        if ": run 3 ok" in line:
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted; continue with" in err
    cells = [json.loads(x) for x in out.splitlines()]
    assert 3 <= len(cells) < 200


@pytest.mark.parametrize("args, words", [
    (["run", "--target", "native", "--repeat", "auto"], "two or more targets"),
    (["run", "--target", "native,guest", "--repeat", "auto", "--max-repeat", "2"],
     "too few for --repeat auto"),
    (["run", "--target", "native", "--repeat", "often"], "often"),
])
def test_repeat_auto_refusals_are_one_line(tmp_path, args, words):
    from tests.conftest import call_cli
    res = call_cli(args, tmp_path / "x.duckdb")
    assert res.code == 2 and words in res.stderr and "Traceback" not in res.stderr
