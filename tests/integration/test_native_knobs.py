"""--deepest-idle-state and --housekeeping on a real native run (issue 44, item 4): the
measured CPU's deeper cpuidle states are disabled while it runs and as they were after;
irqlab's own threads are placed on the housekeeping CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from irqlab.knobs.cpuidle import CPU_ROOT, cpuidle_driver, idle_states
from irqlab.store import Store

pytestmark = [pytest.mark.integration]
XDIST_GROUP = "host"          # changes a host setting (cpuidle) and runs SCHED_FIFO

CPU = 1


def test_idle_states_disabled_during_the_run_and_restored(tmp_path, probe_built):
    if os.geteuid() != 0 or (os.cpu_count() or 1) < 2:
        pytest.skip("needs root (cpuidle, SCHED_FIFO) and 2 CPUs")
    if cpuidle_driver(CPU_ROOT) is None or len(idle_states(CPU_ROOT, CPU)) < 2:
        pytest.skip("this host has no cpuidle state deeper than state0")
    states = idle_states(CPU_ROOT, CPU)
    before = [Path(s / "disable").read_text() for s in states]
    db = tmp_path / "k.duckdb"
    run = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                          "native", "--cpus", str(CPU), "-D", "2", "--deepest-idle-state",
                          "0", "--housekeeping", "0", "--json", "-q", "--name", "k",
                          "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["status"] == "ok"
    with Store(db, read_only=True) as st:
        hooks = st.resolve("k").metadata["hooks"]
    idle = hooks["knob:deepest_idle_state"]
    names = [Path(s / "name").read_text().strip() for s in states[1:]]
    assert idle["status"] == "applied" and idle["cpus"] == [CPU]
    assert idle["disabled"] == {str(CPU): names}
    assert [Path(s / "disable").read_text() for s in states] == before
    hk = hooks["knob:housekeeping"]
    assert hk["status"] == "applied" and hk["cpus"] == "0" and hk["irqlab_threads"] >= 1
