"""`irqlab run --target noise` from the command line: its usage errors (one line, exit
2), a real second of the busy-loop probe on one CPU (the summary's versioned ``noise``
object, its per-CPU line laid out as rtla osnoise top's), and the stored run read back
by `show`, `list` and `check` as any run (the gaps are its samples)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from irqlab.cli.output.lines import osnoise_lines
from irqlab.runner.noise import NOISE_PROBE
from irqlab.stats.osnoise import noise_summary
from tests.conftest import call_cli, run_cli

# Each test here takes seconds (a measured or reported run as its fixture): out of the
# quick set (./run-tests.sh --quick), in the whole suite.
pytestmark = pytest.mark.slow

CPU = 0


@pytest.mark.parametrize("args, says", [
    (["--priority", "0"], "--priority 0 must be 1-99 (SCHED_FIFO), or leave it out"),
    (["--rt-fallback"], "--rt-fallback goes with --priority N"),
    (["--idle", "poll"], "--idle does not apply to --target noise"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path, args, says):
    res = call_cli(["run", "--target", "noise", "--duration", "1s", *args],
                   tmp_path / "runs.duckdb")
    assert res.code == 2 and says in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


@pytest.fixture(scope="module")
def noise_run(tmp_path_factory):
    if not NOISE_PROBE.exists():
        pytest.skip("irqlab-noise is not built (make -C probes/native)")
    db = tmp_path_factory.mktemp("noise-cli") / "runs.duckdb"
    res = run_cli(["run", "--target", "noise", "--cpus", str(CPU), "--duration", "1s",
                   "--json"], db)
    assert res.code == 0, res.stderr
    (summary,) = [x for x in res.lines if x.get("type") == "summary"]
    return db, summary


def test_the_summary_has_the_noise_object(noise_run):
    _db, s = noise_run
    n = s["noise"]
    assert s["status"] == "ok" and s["threshold_ns"] == 5_000 and s["overruns"] == 0
    assert n["version"] == 1 and n["threshold_ns"] == 5_000 and n["cpus"] == 1
    assert n["classified"] is False and "by_kind" not in n
    (cpu,) = n["per_cpu"]
    assert cpu["cpu"] == CPU and 0 < cpu["runtime_ns"] <= 1_100_000_000
    assert cpu["gaps"] == s["samples"] + s["lost"]
    assert cpu["noise_ns"] >= 5_000 * s["samples"]
    if s["samples"]:
        assert cpu["max_gap_ns"] == s["max_ns"] >= s["min_ns"] >= 5_000


def test_the_summary_line_validates_against_its_schema(noise_run):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[2] / "docs" / "schema" /
                         "summary.schema.json").read_text())
    _db, s = noise_run
    jsonschema.Draft202012Validator(schema).validate(s)
    # ... and the schema holds the noise object to its keys (a key missing fails).
    broken = {**s, "noise": {k: v for k, v in s["noise"].items() if k != "runtime_ns"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(broken)


def test_show_prints_it_as_rtla_osnoise_top(noise_run):
    db, s = noise_run
    res = call_cli(["show", str(s["run_id"])], db)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    heading = next(i for i, x in enumerate(lines) if "%CPU Aval" in x)
    assert lines[heading].split() == ["CPU", "Runtime", "Noise", "Noise/s", "%CPU", "Aval",
                                      "Max", "Single", "Gaps"]
    assert lines[heading + 1].split()[0] == str(CPU)
    assert f"{s['noise']['gaps']:,}" == lines[heading + 1].split()[-1]
    assert any(x.startswith("noise: gaps >= 5 us") for x in lines)
    assert "run with --trace to name each gap's cause" in res.stdout


def test_check_gates_a_noise_run_on_its_gaps(noise_run):
    db, s = noise_run
    over = max(s["max_ns"] or 0, 5_000) + 1_000_000_000
    ok = call_cli(["check", str(s["run_id"]), "--max", f"{over}ns"], db)
    assert ok.code == 0, ok.stdout + ok.stderr
    if s["samples"]:
        bad = call_cli(["check", str(s["run_id"]), "--max", "1ns"], db)
        assert bad.code == 1


def test_a_classified_run_prints_rtla_s_class_columns_and_its_classes():
    kinds = np.array(["softirq", "thread", "outside"], dtype=object)
    names = np.array(["NET_RX", "ping:7", "outside the kernel: hypervisor, SMI or hardware"],
                     dtype=object)
    gaps = np.array([30_000, 10_000, 6_000])
    s = {"noise": noise_summary(5_000, 10**9, [{"cpu": 1, "busy_tick": 10**9,
                                                "noise_tick": 46_000, "written": 3,
                                                "lost": 0}],
                                np.ones(3), gaps, (kinds, names))}
    lines = osnoise_lines(s)
    assert lines[1].split()[-5:] == ["HW", "NMI", "IRQ", "Softirq", "Thread"]
    assert lines[2].split()[-5:] == ["1", "0", "0", "1", "1"]
    assert lines[3].strip() == ("top class: softirq NET_RX: 1 gaps, 30.0 us (65.2% of the "
                                "gaps' time)")
    assert lines[5].strip().startswith("class: outside the kernel: hypervisor")
