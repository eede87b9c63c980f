"""lava/: the test definition and the job templates pass LAVA's own schemas (Debian's
lava-common, unpacked by lava/fetch-schema.sh, never installed); the fields LAVA needs
are checked without it too; the job-log glue renders templates and finds the console."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest
import yaml

from irqlab.samples.console import ConsoleReader, frame_line

LAVA = Path(__file__).resolve().parents[3] / "lava"
TESTDEF = LAVA / "irqlab-latency.yaml"
JOBS = sorted((LAVA / "jobs").glob("*.yaml"))
SCHEMA_DIR = (Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
              / "irqlab" / "lava" / "usr" / "lib" / "python3" / "dist-packages")
EXAMPLE = {"DEVICE_TYPE": "zynqmp-zcu102", "PERIOD_NS": "1000000", "SAMPLES": "600000",
           "PROBE_URL": "https://example.invalid/irqlab-probe.bin",
           "DTB_URL": "https://example.invalid/zcu102.dtb",
           "XEN_URL": "https://example.invalid/xen"}


def _glue():
    spec = importlib.util.spec_from_file_location("lava_import", LAVA / "lava_import.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


glue = _glue()


def rendered(path: Path) -> dict:
    return yaml.safe_load(glue.render(path.read_text(), EXAMPLE))


@pytest.fixture
def lava_schemas(monkeypatch):
    if not (SCHEMA_DIR / "lava_common").is_dir():
        pytest.skip(f"LAVA's schemas are not unpacked in {SCHEMA_DIR}: run "
                    f"lava/fetch-schema.sh (./setup.sh does)")
    monkeypatch.syspath_prepend(str(SCHEMA_DIR))
    from lava_common.schemas import validate
    from lava_common.schemas.test import testdef
    return validate, testdef.validate


def test_job_templates_pass_lavas_job_schema(lava_schemas):
    validate_job, _ = lava_schemas
    assert len(JOBS) == 2
    for job in JOBS:
        validate_job(rendered(job), strict=True)         # raises voluptuous.Invalid


def test_test_definition_passes_lavas_testdef_schema(lava_schemas):
    _, validate_testdef = lava_schemas
    validate_testdef(yaml.safe_load(TESTDEF.read_text()))


def test_a_broken_job_is_refused_by_the_schema(lava_schemas):
    """The schema check is real: a job without timeouts fails it."""
    import voluptuous
    validate_job, _ = lava_schemas
    job = rendered(JOBS[0])
    del job["timeouts"]
    with pytest.raises(voluptuous.Invalid):
        validate_job(job, strict=True)


def test_required_fields_without_lava():
    """What LAVA requires, checked with no LAVA package at all."""
    td = yaml.safe_load(TESTDEF.read_text())
    assert td["metadata"]["format"] == "Lava-Test Test Definition 1.0"
    assert re.fullmatch(r"[-_a-zA-Z0-9.]+", td["metadata"]["name"])
    assert td["run"]["steps"] and all(isinstance(s, str) for s in td["run"]["steps"])
    assert "sink=console" in " ".join(td["run"]["steps"])
    for path in JOBS:
        job = rendered(path)
        for key in ("job_name", "device_type", "timeouts", "visibility", "actions"):
            assert key in job, (path.name, key)
        assert "job" in job["timeouts"]
        kinds = [next(iter(a)) for a in job["actions"]]
        assert kinds == ["deploy", "boot", "test"], path.name
        boot = job["actions"][1]["boot"]
        assert boot["method"] == "u-boot" and boot["commands"]
        monitor = job["actions"][2]["test"]["monitors"][0]
        assert {"name", "start", "end", "pattern"} <= set(monitor)


def test_monitor_pattern_matches_the_probes_last_lines():
    """The monitor's regex (Python re, as LAVA's pexpect uses) on the probe's output."""
    job = rendered(JOBS[0])
    mon = job["actions"][2]["test"]["monitors"][0]
    line = "irqlab-probe: done samples=600000 overruns=3 injected=0 missed=0"
    m = re.search(mon["pattern"], line)
    assert m and m.groupdict() == {"result": "done", "test_case_id": "samples",
                                   "measurement": "600000"}
    assert mon["fixupdict"]["done"] == "pass"
    assert not re.search(mon["end"], line)      # the end comes on the next line
    assert re.search(mon["end"], "irqlab-probe: latency ns min=1 mean=2 max=3")


def test_render_needs_every_placeholder():
    with pytest.raises(ValueError, match="DTB_URL"):
        glue.render(JOBS[0].read_text(), {k: v for k, v in EXAMPLE.items()
                                          if k != "DTB_URL"})
    assert not re.search(r"@[A-Z_]+@", glue.render(JOBS[0].read_text(), EXAMPLE))


def test_console_text_keeps_the_target_lines_of_a_job_log():
    frames = [frame_line("H", 0, ["1", "2", "3b9aca0", "5", "3", "f4240", "1", "0", "0",
                                  "10000", "0", "irqlab-probe-x"]),
              frame_line("T", 1, ["1", "0", "0", "0", ""]),
              frame_line("S", 2, ["0", "0", "1;2;3"])]
    entries = [{"dt": "2026-11-23T20:00:00", "lvl": "info", "msg": "~IQ in a LAVA line"}]
    entries += [{"dt": "2026-11-23T20:00:01", "lvl": "target",
                 "msg": f.decode().rstrip("\r\n")} for f in frames]
    entries.append({"dt": "2026-11-23T20:00:02", "lvl": "results",
                    "msg": {"case": "samples", "result": "pass"}})
    log = "".join(f"- {yaml.safe_dump(e, default_flow_style=True).strip()}\n"
                  for e in entries)
    text = glue.console_text(log)
    assert text.count("\n") == 3 and "LAVA line" not in text
    r = ConsoleReader()
    r.feed(text.encode())
    assert len(r.poll()) == 3 and r.bad_frames == 0 and r.lost == 0
