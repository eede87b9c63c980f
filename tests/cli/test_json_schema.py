"""Every JSON line of every command has a `type` and a `version` and validates against its
schema in docs/schema/ (docs/formats.md section 4).

The lines are real output: a suite of the guest probe (TCG, icount, 300 samples) and the
native probe, a one-cell matrix, list, show, compare, check, report, import of the
fixtures, explain of a stored real capture, bench stats, model and xentrace (a capture
recorded under TCG). One QEMU boot at a time.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from irqlab.store import Store
from tests.conftest import call_argv, call_cli, run_cli
from tests.unit.reports._runs import add_run, latencies
from tests.unit.stats._tails import synthetic

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).parents[2]
SCHEMAS = ROOT / "docs" / "schema"
FIXTURES = ROOT / "tests" / "fixtures" / "import"
CAPTURE = ROOT / "tests" / "unit" / "explain" / "data" / "idle_exit_unrecorded.irqtrace.gz"
XENTRACE = ROOT / "tests" / "fixtures" / "xen" / "dom0-cpu.xentrace.xz"   # recorded under TCG
# Types no test here can produce: push needs a lab store (PostgreSQL; tests/cli/test_push.py).
NOT_PRODUCED_HERE = {"push"}

# One fixture per import format (rt-eval's own fixtures are another engineer's current
# work; the kernel-log variant stands for it).
IMPORTED = ["cyclictest_q.txt", "cyclictest_h.json", "irqlab_console_arm64.log",
            "jitterdebugger_results.json", "net_rtt_seed003.txt", "rt_eval_tmu.txt",
            "rtla_timerlat_hist.txt", "stress-ng_cyclic.txt", "tbm_live.txt",
            "tbm_tables.txt", "tscdeadline_latency.txt"]

MATRIX = """\
name = "schema"
[run]
accel = "tcg"
icount = true
samples = 200
window = "100ms"
[matrix]
idle = ["hlt"]
"""


def _cli(args: list[str], db: Path, ok: tuple[int, ...] = (0,)) -> list[dict[str, Any]]:
    # `run` and `matrix` in a child (their probes, signals and the process's own output);
    # the readers in this interpreter: their lines are what is checked.
    res = (run_cli if args[0] in ("run", "matrix") else call_cli)(args, db)
    assert res.code in ok, (args, res.stdout[-2000:], res.stderr[-2000:])
    # Every stdout line of --json output is JSON: nothing else may be mixed in.
    lines = [x for x in res.stdout.splitlines() if x.strip()]
    assert len(lines) == len(res.lines), (args, res.stdout[:2000])
    return res.lines


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, probe_built) -> dict[str, list[dict[str, Any]]]:
    """command -> its JSON lines."""
    tmp = tmp_path_factory.mktemp("schema")
    db = tmp / "irqlab.duckdb"
    out: dict[str, list[dict[str, Any]]] = {}
    out["run (suite)"] = _cli(["run", "--target", "guest,native", "--rt-fallback",
                               "--accel", "tcg", "--icount", "--samples", "300",
                               "--window", "100ms", "--name", "s", "--json"], db)
    scn = tmp / "m.toml"
    scn.write_text(MATRIX)
    out["matrix"] = _cli(["matrix", str(scn), "--format", "json"], db)
    out["matrix --dry-run"] = _cli(["matrix", str(scn), "--dry-run", "--format", "json"], db)
    out["list"] = _cli(["list", "--json"], db)
    out["show"] = _cli(["show", "1", "--json"], db)
    out["show --hist"] = _cli(["show", "1", "--hist", "--json"], db)
    out["compare"] = _cli(["compare", "1", "2", "3", "--json"], db)
    out["check"] = _cli(["check", "1", "2", "--max", "30us", "--json"], db, ok=(0, 1))
    # Run 2 is the native one: per-CPU samples.
    out["compare --per-cpu"] = _cli(["compare", "1", "2", "--per-cpu", "--json"], db)
    out["check --per-cpu"] = _cli(["check", "2", "--max", "30us", "--per-cpu", "--json"],
                                  db, ok=(0, 1))
    out["report"] = _cli(["report", "1", "2", "-o", str(tmp / "r.html"), "--json"], db)
    # Every importer once, in one command (each file gives its own import line).
    files = [str(FIXTURES / f) for f in IMPORTED]
    out["import"] = _cli(["import", "auto", *files, "--tick-hz", "2000000000", "--json"], db)
    out["list (imported)"] = _cli(["list", "--json"], db)
    xdb = tmp / "explain.duckdb"
    with Store(xdb) as st:
        add_run(st, "traced", latencies("ramp", 100),
                extra_meta={"hooks": {"trace": {"file": str(CAPTURE)}}})
    out["explain"] = _cli(["explain", "1", "--top", "3", "--json"], xdb)
    # A trend with a change: summaries of a series, doubled from run 9 (16 runs: 8 and 8
    # give the permutation test room to reach p <= 0.01, which 5 and 5 do not).
    tdb = tmp / "trend.duckdb"
    with Store(tdb) as st:
        for i in range(16):
            add_run(st, "nightly", latencies("ramp", 100) * (1 + i // 8), raw=False,
                    tags={"series": "nightly-000001"})
    out["trend"] = _cli(["trend", "series:nightly-000001", "--json"], tdb)
    # An extreme-value fit of a stationary synthetic tail (irqlab tail).
    edb = tmp / "tail.duckdb"
    with Store(edb) as st:
        add_run(st, "tail", np.round(synthetic(np.random.default_rng(5), 100_000))
                .astype(np.int64))
    out["tail"] = _cli(["tail", "1", "--json"], edb)
    if "export" in _commands():       # the Parquet export (a newer command)
        out["export"] = _cli(["export", "1", "2", "--parquet", str(tmp / "pq"), "--json"], db)
    if "doctor" in _commands():       # the machine check (a newer command)
        out["doctor"] = _no_db(["doctor", "--json"], ok=(0, 1))
    out["model"] = _no_db(["model", "rtds", "--period", "10ms", "--budget", "4ms", "--json"])
    out["xentrace"] = _no_db(["xentrace", str(XENTRACE), "--tsc-hz", "2596146000", "--json"])
    out["bench"] = _no_db(["bench", "stats", "--stats-samples", "100000", "--json"])
    # A --repeat series (native, fast; after the runs the others select by id).
    out["run (series)"] = _cli(["run", "--target", "native", "--rt-fallback", "--samples",
                                "100", "--window", "50ms", "--repeat", "2", "--name", "rep",
                                "--json"], db)
    # Run management last: tag the series' runs, then remove one of them.
    out["tag"] = _cli(["tag", "rep", "kernel=rt", "--json"], db)
    out["rm"] = _cli(["rm", "rep", "--yes", "--json"], db)
    return out


def _commands() -> set[str]:
    from irqlab.cli.main import COMMANDS
    return {name for name, _r, _f in COMMANDS}


def _no_db(args: list[str], ok: tuple[int, ...] = (0,)) -> list[dict[str, Any]]:
    """A command without --db."""
    proc = call_argv(args)
    assert proc.returncode in ok, (args, proc.stderr)
    return [json.loads(x) for x in proc.stdout.splitlines()]


def _schema(kind: str) -> dict[str, Any]:
    path = SCHEMAS / f"{kind}.schema.json"
    assert path.exists(), f"no schema for JSON line type {kind!r}: add {path}"
    return json.loads(path.read_text())


def test_every_schema_is_a_valid_json_schema():
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["type"]["const"] == path.name.split(".")[0]


@pytest.mark.emulated          # its outputs fixture runs the guest under TCG
def test_every_line_of_every_command_validates_against_its_schema(outputs):
    seen: dict[str, set[str]] = defaultdict(set)
    for command, lines in outputs.items():
        assert lines, f"{command} printed no JSON line"
        for line in lines:
            assert isinstance(line.get("type"), str), (command, line)
            assert isinstance(line.get("version"), int), (command, line)
            assert list(line)[:2] == ["type", "version"], (command, list(line)[:4])
            validator = jsonschema.Draft202012Validator(_schema(line["type"]))
            errors = [f"{'/'.join(map(str, e.path))}: {e.message}"
                      for e in validator.iter_errors(line)]
            assert not errors, (command, line["type"], errors[:5])
            seen[line["type"]].add(command)
    produced = set(seen)
    # The run was a suite: windows, summaries and the suite line; and the others.
    assert {"window", "summary", "suite", "cell", "run", "compare", "compare_run", "check",
            "report", "import", "explain", "bench", "model", "runstate", "hypercall",
            "series", "histogram", "tail"} <= produced
    schemas = {p.name.split(".")[0] for p in SCHEMAS.glob("*.schema.json")}
    absent = {"export", "doctor"} - _commands()       # a command this checkout does not have
    assert schemas - produced - NOT_PRODUCED_HERE - absent == set(), "a schema no output uses"


@pytest.mark.emulated          # its outputs fixture runs the guest under TCG
def test_a_cell_line_has_its_own_version_not_the_summary_s(outputs):
    (cell,) = outputs["matrix"]
    assert cell["type"] == "cell" and cell["version"] == 1 and cell["idle"] == "hlt"
    assert cell["samples"] == 200 and cell["resumed"] is False
