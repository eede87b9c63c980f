"""`irqlab import irqlab-console LOG --xentrace FILE`: a board's probe console log and
dom0's xentrace file (tests/fixtures/xen/README.md: both made here from one traced arm64
Xen run) become a run `irqlab explain` explains exactly as it explained the live run;
bad input is one line, exit 2, and nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import call_cli

FIX = Path(__file__).parents[1] / "fixtures" / "xen"
CONSOLE = FIX / "arm64-board-console.log"
XENTRACE = FIX / "arm64-board.xentrace.xz"
EXPECTED = json.loads((FIX / "arm64-board.explain.json").read_text())


def test_board_files_explain_as_the_live_run(tmp_path) -> None:
    db = tmp_path / "b.duckdb"
    res = call_cli(["import", "irqlab-console", str(CONSOLE), "--xentrace", str(XENTRACE),
                    "--name", "board", "--json"], db)
    assert res.code == 0, res.stderr
    (info,) = res.lines
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(info, json.loads((Path(__file__).parents[2] / "docs" / "schema"
                                          / "import.schema.json").read_text()))
    assert info["xentrace"]["records"] == 8740 and info["xentrace"]["domid"] == 1
    assert Path(info["xentrace"]["file"]).is_file()
    ex = call_cli(["explain", "board", "--threshold", "0", "--json"], db)
    assert ex.code == 0, ex.stderr
    (js,) = ex.lines
    assert js["source"] == "xentrace" and js["probe_vcpu"] == "d1v0"
    assert js["clock"]["offset_tick"] == EXPECTED["clock_offset_tick"]
    assert js["clock"]["error_bound_ns"] == 48            # 3 ticks at 62.5 MHz
    assert js["clock"]["causality"] == {"checked": 120, "violations": 0, "samples": []}
    assert {str(s["seq"]): s["causes"] for s in js["samples"]} == EXPECTED["samples"]
    human = call_cli(["import", "irqlab-console", str(CONSOLE), "--xentrace",
                      str(XENTRACE), "--xen-domid", "1"], tmp_path / "h.duckdb")
    assert human.code == 0 and "xentrace: 8740 records kept with it (probe domain 1)" \
        in human.stdout


@pytest.mark.parametrize("args, says", [
    (["--xentrace", "/nonexistent/run.xentrace"], "no such file"),
    (["--xentrace", str(CONSOLE)], "is not a xentrace file"),
    (["--xen-domid", "2"], "--xen-domid goes with --xentrace FILE"),
    ([str(CONSOLE), "--xentrace", str(XENTRACE)], "goes with one irqlab-console log"),
])
def test_bad_xentrace_input_is_one_line_and_stores_nothing(tmp_path, args, says) -> None:
    db = tmp_path / "b.duckdb"
    res = call_cli(["import", "irqlab-console", str(CONSOLE), *args], db)
    assert res.code == 2, (res.stdout, res.stderr)
    assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "Traceback" not in res.stderr
    listed = call_cli(["list", "--json"], db)
    assert not [line for line in listed.lines if line.get("run_id")], listed.stdout


def test_other_formats_refuse_xentrace(tmp_path) -> None:
    res = call_cli(["import", "cyclictest", str(FIX.parent / "import" / "cyclictest.json"),
                    "--xentrace", str(XENTRACE)], tmp_path / "c.duckdb")
    assert res.code == 2 and "goes with one irqlab-console log" in res.stderr
