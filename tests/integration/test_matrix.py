"""A 2x2 matrix runs, is resumed after being killed mid-way, and tabulates one row per cell
with the cell's tags."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import pytest

from irqlab.store import Store
from tests.conftest import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

SCENARIO = """\
# test matrix: 2 periods x 2 loads, deterministic TCG
name = "t2x2"
[run]
accel = "tcg"
icount = true
samples = 300
window = "100ms"
[matrix]
period = ["1ms", "500us"]
load = ["none", "cpu:cpus=1"]
"""


def test_matrix_killed_midway_then_resumed(tmp_path, db, probe_built):
    scn = tmp_path / "t.toml"
    scn.write_text(SCENARIO)
    env = {**os.environ, "IRQLAB_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "matrix", str(scn),
                             "--db", str(db), "--format", "json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Kill it hard once the first cell is stored (cell lines go to stderr).
    for line in proc.stderr:
        if ": run 1 ok" in line:
            break
    proc.kill()
    proc.wait()
    with Store(db, read_only=True) as st:
        ok_before = [r for r in st.runs() if r.status == "ok"]
    assert 1 <= len(ok_before) < 4

    res = run_cli(["matrix", str(scn), "--resume", "--format", "json"], db)
    assert res.code == 0, res.stderr
    rows = [x for x in res.lines if x.get("type") == "cell"]
    assert [(r["period"], r["load"]) for r in rows] == [
        ("1ms", "none"), ("1ms", "cpu:cpus=1"), ("500us", "none"), ("500us", "cpu:cpus=1")]
    assert rows[0]["resumed"] is True and rows[-1]["resumed"] is False
    assert all(r["status"] == "ok" and r["samples"] == 300 for r in rows)
    assert {"mean_ns", "min_ns", "max_ns", "warm_max_ns", "p999_ns",
            "above_threshold"} <= set(rows[0])
    with Store(db, read_only=True) as st:
        runs = {r.run_id: r for r in st.runs()}
    for row in rows:
        run = runs[row["run_id"]]
        assert run.suite == "t2x2"
        assert run.cell == {"period": row["period"], "load": row["load"]}
        assert run.tags["period"] == row["period"] and run.tags["load"] == row["load"]
        if row["load"] != "none":
            assert run.metadata["hooks"]["load:cpu"]["cpu_s"] > 0

    # The same results as a table, CSV: one row per cell.
    table = run_cli(["matrix", str(scn), "--resume", "--format", "csv"], db)
    parsed = list(csv.reader(io.StringIO(table.stdout)))
    assert parsed[0][:2] == ["PERIOD", "LOAD"] and "WARM MAX" in parsed[0]
    assert len(parsed) == 5
    human = run_cli(["matrix", str(scn), "--resume"], db)
    assert human.code == 0 and "AVG" in human.stdout and "p99.9" in human.stdout
