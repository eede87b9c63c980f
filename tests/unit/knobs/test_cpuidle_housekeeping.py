"""--deepest-idle-state (cpuidle states disabled on the measured CPUs, journalled and
restored, refused on a host without cpuidle) and --housekeeping (irqlab's own threads
placed off the measured CPUs, restored)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from irqlab.journal import replay_stale
from irqlab.knobs import make_knob
from irqlab.knobs.cpuidle import DeepestIdleStateKnob
from tests.conftest import call_argv


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def cpu_root(tmp_path, monkeypatch) -> Path:
    """A copy of /sys/devices/system/cpu's cpuidle layout: 2 CPUs, states POLL, C1, C6."""
    root = tmp_path / "cpu"
    (root / "cpuidle").mkdir(parents=True)
    (root / "cpuidle" / "current_driver").write_text("intel_idle\n")
    for cpu in (0, 1):
        for k, name in enumerate(("POLL", "C1", "C6")):
            d = root / f"cpu{cpu}" / "cpuidle" / f"state{k}"
            d.mkdir(parents=True)
            (d / "name").write_text(name + "\n")
            (d / "disable").write_text("0\n")
    monkeypatch.setattr(DeepestIdleStateKnob, "root", root)
    return root


def _ctx(cpus):
    return SimpleNamespace(source=SimpleNamespace(ring_cpus=lambda: cpus),
                           process=SimpleNamespace(proc=None))


def _disabled(root, cpu):
    return [(root / f"cpu{cpu}/cpuidle/state{k}/disable").read_text().strip()
            for k in range(3)]


def test_states_deeper_than_n_are_disabled_on_the_measured_cpus_then_restored(
        state, cpu_root):
    knob = make_knob("deepest_idle_state", "0")
    knob.after_start(_ctx([1]))
    assert _disabled(cpu_root, 1) == ["0", "1", "1"]
    assert _disabled(cpu_root, 0) == ["0", "0", "0"]          # not measured: untouched
    assert knob.metadata()["disabled"] == {"1": ["C1", "C6"]}
    knob.stop()
    assert _disabled(cpu_root, 1) == ["0", "0", "0"]
    assert knob.metadata()["restored"] is True
    assert list(state.glob("journal/*.jsonl")) == []


def test_a_state_already_disabled_stays_so(state, cpu_root):
    (cpu_root / "cpu1/cpuidle/state2/disable").write_text("1\n")
    knob = make_knob("deepest_idle_state", "1")
    knob.after_start(_ctx([1]))
    knob.stop()
    assert _disabled(cpu_root, 1) == ["0", "0", "1"]


def test_after_a_kill_the_next_start_restores_the_states(state, cpu_root):
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from types import SimpleNamespace
        from irqlab.knobs.cpuidle import DeepestIdleStateKnob
        DeepestIdleStateKnob.root = Path({str(cpu_root)!r})
        knob = DeepestIdleStateKnob("0")
        knob.after_start(SimpleNamespace(source=SimpleNamespace(ring_cpus=lambda: [0, 1])))
        print("applied", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "IRQLAB_STATE_DIR": str(state)})
    try:
        assert proc.stdout.readline().strip() == "applied"
        assert _disabled(cpu_root, 0) == ["0", "1", "1"]
    finally:
        proc.kill()
        proc.wait()
    actions = replay_stale()
    assert len(actions) == 4, actions
    assert _disabled(cpu_root, 0) == _disabled(cpu_root, 1) == ["0", "0", "0"]


def test_a_host_without_cpuidle_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(DeepestIdleStateKnob, "root", tmp_path)     # no cpuidle/ at all
    with pytest.raises(ValueError, match="no cpuidle driver"):
        make_knob("deepest_idle_state", "1")
    res = call_argv(["run", "--target", "native", "--deepest-idle-state", "1", "-D", "1",
                     "--db", str(tmp_path / "x.duckdb")])
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "leave --deepest-idle-state out" in lines[0], res.stderr
    assert not (tmp_path / "x.duckdb").exists()                      # nothing started


@pytest.mark.parametrize("value, why", [("-1", "0..9"), ("10", "0..9"), ("c6", "integer")])
def test_bad_values_name_the_range(cpu_root, value, why):
    with pytest.raises(ValueError, match=why):
        make_knob("deepest_idle_state", value)


def test_housekeeping_places_irqlabs_own_threads_and_restores_them():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    before = os.sched_getaffinity(0)
    knob = make_knob("housekeeping", str(cpus[0]))
    knob.after_start(_ctx([]))
    try:
        assert os.sched_getaffinity(0) == {cpus[0]}
        assert knob.metadata()["irqlab_threads"] >= 1
    finally:
        knob.stop()
    assert os.sched_getaffinity(0) == before


def test_housekeeping_refuses_cpus_this_host_lacks():
    with pytest.raises(ValueError, match="not available here"):
        make_knob("housekeeping", "4095")
