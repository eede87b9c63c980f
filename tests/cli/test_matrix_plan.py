"""``irqlab matrix --dry-run / --set / --only``: the cells listed with their estimate and
arguments, nothing run, no store made; bad overrides and patterns are one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irqlab.cli.scenario import cell_id, load_scenario
from tests.conftest import call_cli

SCENARIOS = sorted((Path(__file__).parents[2] / "scenarios").glob("*.toml"))
SEED002 = next(p for p in SCENARIOS if p.name == "seed002-hlt-vs-poll.toml")

EXPECTED_SEED002 = """\
seed002-hlt-vs-poll: 4 cells, estimated 2 min 20 s run one after another (boot estimate: guest 5 s)
CELL                      ESTIMATE  CONFIGURATION (irqlab run ...)
idle=hlt,cpu_pm=off           35 s  --target guest --accel auto --period 1ms --window 10s --duration 30s --warmup 1 --pin 1 --idle hlt --cpu-pm off
idle=hlt,cpu_pm=on            35 s  --target guest --accel auto --period 1ms --window 10s --duration 30s --warmup 1 --pin 1 --idle hlt --cpu-pm on
idle=poll,cpu_pm=off          35 s  --target guest --accel auto --period 1ms --window 10s --duration 30s --warmup 1 --pin 1 --idle poll --cpu-pm off
idle=poll,cpu_pm=on           35 s  --target guest --accel auto --period 1ms --window 10s --duration 30s --warmup 1 --pin 1 --idle poll --cpu-pm on
"""


def test_dry_run_lists_the_cells_and_opens_no_store(tmp_path):
    db = tmp_path / "never.duckdb"
    res = call_cli(["matrix", str(SEED002), "--dry-run"], db)
    assert res.code == 0, res.stderr
    assert res.stdout == EXPECTED_SEED002
    assert not db.exists() and list(tmp_path.iterdir()) == []


def test_set_and_only_shorten_and_pick(tmp_path):
    res = call_cli(["matrix", str(SEED002), "--dry-run", "--set", "duration=5s",
                    "--set", "warmup=0", "--only", "idle=poll*", "--format", "json"],
                   tmp_path / "db")
    assert res.code == 0, res.stderr
    assert [r["name"] for r in res.lines] == ["idle=poll,cpu_pm=off", "idle=poll,cpu_pm=on"]
    row = res.lines[0]
    assert (row["run_s"], row["boot_estimate_s"], row["estimated_s"]) == (5.0, 5.0, 10.0)
    argv = " ".join(row["argv"])
    assert "--duration 5s" in argv and "--warmup 0" in argv and "30s" not in argv
    # Two patterns: the union, in the matrix's order.
    res = call_cli(["matrix", str(SEED002), "--dry-run", "--only", "*cpu_pm=on",
                    "--only", "idle=hlt,cpu_pm=off", "--format", "json"], tmp_path / "db")
    assert [r["name"] for r in res.lines] == ["idle=hlt,cpu_pm=off", "idle=hlt,cpu_pm=on",
                                              "idle=poll,cpu_pm=on"]


def test_set_changes_the_definition_only_picks():
    """--set is part of what --resume matches (another definition); --only is not."""
    base = load_scenario(SEED002)
    assert load_scenario(SEED002, only=("idle=hlt*",)).digest == base.digest
    assert load_scenario(SEED002, overrides={"duration": "5s"}).digest != base.digest
    # --set period replaces [run] period: the cell passes one --period.
    scn = load_scenario(SEED002, overrides={"period": "10ms"})
    assert scn.argv(scn.cells()[0]).count("--period") == 1


@pytest.mark.parametrize("args, words", [
    (["--set", "durration=5s"], ["--set durration=5s", "unknown key"]),
    (["--set", "duration=banana"], ["--set duration=banana", "not a duration"]),
    (["--set", "idle=poll"], ["idle varies in [matrix]", "--only '*idle=poll*'"]),
    (["--set", "db=x.duckdb"], ["--set db=x.duckdb", "pass --db"]),
    (["--set", "duration"], ["--set 'duration'", "KEY=VALUE"]),
    (["--only", "idle=wfi*"], ["--only idle=wfi*", "matches none of the 4 cells",
                               "idle=hlt,cpu_pm=off"]),
    (["--parallel", "2"], ["--lg-places"]),
])
def test_bad_set_and_only_exit_2_with_one_line(tmp_path, args, words):
    res = call_cli(["matrix", str(SEED002), "--dry-run", *args], tmp_path / "db")
    assert res.code == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert all(w in res.stderr for w in words), res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_dry_run_of_every_shipped_scenario(tmp_path, path):
    res = call_cli(["matrix", str(path), "--dry-run", "--format", "json"], tmp_path / "db")
    assert res.code == 0, res.stderr
    scn = load_scenario(path)
    assert [r["name"] for r in res.lines] == [cell_id(c) for c in scn.cells()]
    assert all(r["estimated_s"] > r["run_s"] > 0 for r in res.lines)
    text = call_cli(["matrix", str(path), "--dry-run"], tmp_path / "db")
    assert text.code == 0 and f"{scn.cell_count()} cells" in text.stdout.splitlines()[0]
    assert json.dumps(res.lines)          # plain JSON values only


def test_pool_of_a_scenario_not_on_labgrid_exits_2(tmp_path):
    """Checked before any store is opened or the coordinator asked."""
    res = call_cli(["matrix", str(SEED002), "--lg-places", "rig-*"], tmp_path / "db")
    assert res.code == 2 and "target is guest" in res.stderr and "labgrid" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_json_is_format_json(tmp_path):
    # issue 46: `matrix --json` was refused ("did you mean --only?").
    db = tmp_path / "never.duckdb"
    as_json = call_cli(["matrix", str(SEED002), "--dry-run", "--json"], db)
    as_format = call_cli(["matrix", str(SEED002), "--dry-run", "--format", "json"], db)
    assert as_json.code == 0, as_json.stderr
    assert as_json.stdout == as_format.stdout and as_json.stdout.startswith("{")
