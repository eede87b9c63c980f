"""How a run was made, shown back (issue 31): `show --json` carries the loads, knobs,
pinning and priority of a real native run with what was read back; `compare` names
exactly the knob two runs differ in; the Python API has the facts as columns."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import irqlab
from irqlab.runner.native import NATIVE_PROBE
from tests.conftest import call_cli, run_cli

HALT_POLL = "/sys/module/kvm/parameters/halt_poll_ns"
RUN = ["run", "--target", "native", "--cpus", "0", "--samples", "200", "--window",
       "100ms", "--json"]


@pytest.fixture(scope="module")
def native_built():
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    return NATIVE_PROBE


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="the cpu load needs stress-ng")
def test_show_json_carries_load_knobs_pin_prio_with_read_back(db, native_built):
    res = run_cli(RUN + ["--load", "cpu:cpus=1", "--halt-poll-global", "0",
                         "--cpu-pm", "on", "--pin", "1", "--prio", "80",
                         "--priority", "70", "--tag", "kernel=rt", "--name", "loaded"], db)
    assert res.code == 0, res.stderr
    show = call_cli(["show", "loaded", "--json"], db)
    assert show.code == 0, show.stderr
    [line] = show.lines
    conf = line["configuration"]
    [load] = conf["loads"]
    assert load["kind"] == "cpu" and load["params"] == {"cpus": "1"}
    assert load["status"] == "ok" and load["proof"]["argv"][0] == "stress-ng"
    assert load["proof"]["cpu_s"] > 0            # proof that the load ran
    knobs = {k["key"]: k for k in conf["knobs"]}
    assert {k: v["requested"] for k, v in knobs.items()} == {
        "halt_poll_global": "0", "cpu_pm": "on", "pin": "1", "prio": "80"}
    # Each says what happened: applied, or not applicable here with the reason.
    assert all(k["status"] == "applied" or k["status"].startswith("not applicable here:")
               for k in knobs.values())
    try:
        with open(HALT_POLL) as f:
            before = f.read().strip()
    except OSError:
        before = None
    if before is not None:        # read before writing: the host's value
        assert knobs["halt_poll_global"]["original"] == before
    # The native probe reads its scheduling back after setting it.
    sched = conf["scheduling"]
    assert sched["pin_requested"] == "1" and sched["prio_requested"] == "80"
    assert sched["priority_requested"] == 70 and sched["probe_cpus"] == [0]
    assert sched["probe_policy"] in ("SCHED_FIFO", "SCHED_OTHER")
    if sched["probe_policy"] == "SCHED_FIFO":
        assert sched["probe_priority"] == 70
    assert line["host"]["clocksource"] != "" and "thp" in line["host"]
    assert conf["tags"] == {"kernel": "rt"}
    # People see the same: a configuration block and a host block.
    text = call_cli(["show", "loaded"], db).stdout
    assert "configuration:" in text and "load cpu: cpus=1: ok" in text
    assert "knob halt_poll_global: 0:" in text and "clocksource:" in text
    # The HTML report's run section has both blocks.
    html = db.with_name("loaded.html")
    rep = call_cli(["report", "loaded", "--no-explain", "-o", str(html)], db)
    assert rep.code == 0, rep.stderr
    page = html.read_text()
    assert "<h3>Configuration</h3>" in page and "<h3>Host</h3>" in page
    assert '<td class="l">load cpu</td><td class="l">cpus=1: ok' in page
    assert '<td class="l">knob prio</td><td class="l">80: ' in page
    # The API: the facts as columns, and the record itself.
    with irqlab.open_store(db) as lab:
        runs = lab.runs()
        assert runs.column("load.cpu").to_pylist() == ["cpus=1"]
        assert runs.column("knob.prio").to_pylist() == ["80"]
        assert lab.provenance("loaded")["configuration"]["knobs"] == conf["knobs"]


@pytest.mark.slow
def test_compare_names_exactly_the_knob_two_runs_differ_in(db, native_built):
    for name, value in (("a", "0"), ("b", "100us")):
        res = run_cli(RUN + ["--halt-poll-global", value, "--name", name], db)
        assert res.code == 0, res.stderr
    res = call_cli(["compare", "a", "b", "--json"], db)
    assert res.code == 0, res.stderr
    assert res.lines[0]["differs"] == [{"fact": "knob.halt_poll_global",
                                        "values": ["0", "100us"]}]
    text = call_cli(["compare", "a", "b"], db).stdout
    assert "what differs (1): knob.halt_poll_global (0 | 100us)" in text
