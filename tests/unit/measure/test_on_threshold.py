"""--on-threshold (issue 44) through the run flow with the fake target, whose every
50th sample is 80 us late (tests/unit/measure/fake_target.py): each spike is told to the
run's SpikeListener hooks and runs the actions; `stop` is --break-at."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from irqlab.cli.common import UsageError
from irqlab.cli.recorder_options import on_threshold, ring_size_kb
from tests.unit.measure.fake_target import SPIKE_EVERY, SPIKE_NS
from tests.unit.measure.test_run_flow import (Recorder, _cfg, fake,  # noqa: F401
                                              store)


class Listener:
    """A run hook that keeps the spikes it is told (irqlab.runconfig.SpikeListener)."""

    name = "listener"
    requires = None
    keeps_trace = True         # so the run prints how to explain a kept window

    def __init__(self) -> None:
        self.spikes: list[dict[str, int]] = []

    def qemu_args(self):
        return []

    def before_start(self):
        pass

    def after_start(self, ctx):
        pass

    def stop(self):
        pass

    def metadata(self):
        return {}

    def on_spike(self, spike):
        self.spikes.append(spike)


def _run(store, **common):
    from irqlab.measure import run
    obs = Recorder()
    return run(_cfg(samples=240, duration_ns=None, **common), store, obs), obs


def test_every_spike_is_told_and_printed(fake, store):
    fake()
    hook = Listener()
    res, obs = _run(store, on_threshold_ns=50_000, hooks=[hook])
    assert res.status == "ok"
    seqs = [s["seq"] for s in hook.spikes]
    # Armed after the first read (as --break-at): the spikes read later, every one.
    assert seqs and all(q % SPIKE_EVERY == SPIKE_EVERY - 1 for q in seqs)
    assert seqs == list(range(seqs[0], 240, SPIKE_EVERY))
    assert {s["latency_ns"] for s in hook.spikes} == {SPIKE_NS}
    told = [n for n in obs.notices if n.startswith("spike: ")]
    assert len(told) == len(seqs)
    assert f"irqlab explain {res.run_id} --spike {seqs[0]}" in told[0]
    meta = store.resolve(str(res.run_id)).metadata["on_threshold"]
    assert meta["spikes"] == len(seqs) and meta["limit_ns"] == 50_000


def test_a_shell_action_gets_the_spike_in_its_environment(fake, store, tmp_path):
    fake()
    out = tmp_path / "spikes.txt"
    res, _obs = _run(store, on_threshold_ns=50_000, on_threshold_actions=[
        f'shell:echo "$IRQLAB_RUN_ID $IRQLAB_SPIKE_SEQ $IRQLAB_SPIKE_LATENCY_NS" >> {out}'])
    deadline = time.monotonic() + 10
    want = store.resolve(str(res.run_id)).metadata["on_threshold"]["spikes"]
    assert want >= 2
    while time.monotonic() < deadline and (not out.exists()
                                           or len(out.read_text().splitlines()) < want):
        time.sleep(0.05)
    lines = sorted(out.read_text().splitlines(), key=lambda x: int(x.split()[1]))
    assert len(lines) == want
    run_id, seq, lat = lines[0].split()
    assert int(run_id) == res.run_id and int(seq) % SPIKE_EVERY == SPIKE_EVERY - 1
    assert int(lat) == SPIKE_NS


def test_a_signal_action_sends_sigusr1(fake, store, tmp_path):
    fake()
    mark = tmp_path / "got"
    child = subprocess.Popen([sys.executable, "-c", (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGUSR1, lambda *a: open({str(mark)!r}, 'a').write('x'))\n"
        "print('ready', flush=True)\n"
        "time.sleep(20)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        _run(store, on_threshold_ns=50_000, on_threshold_actions=[f"signal:{child.pid}"])
        deadline = time.monotonic() + 5
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists() and len(mark.read_text()) >= 1
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()


def test_the_options_parse_and_refuse_in_one_line():
    class Args:
        on_threshold: list[str] = []
    a = Args()
    a.on_threshold = ["500us", "stop", "signal:1", "shell:true"]
    assert on_threshold(a) == (500_000, ["signal:1", "shell:true"], True)
    a.on_threshold = ["signal:1"]
    with pytest.raises(UsageError, match="need a latency"):
        on_threshold(a)
    a.on_threshold = ["1ms", "2ms"]
    with pytest.raises(UsageError, match="one latency"):
        on_threshold(a)
    assert ring_size_kb("8M") == 8192 and ring_size_kb("512K") == 512
    for bad in ("8", "8T", "12K"):
        with pytest.raises(Exception):
            ring_size_kb(bad)


@pytest.mark.parametrize("argv, says", [
    (["monitor", "--trace"], "--trace needs --on-threshold LAT"),
    (["run", "--target", "guest", "--trace", "--on-threshold", "1ms"],
     "only --target native has today"),
    # Each target whose capture cannot be cut around a spike, by its capture's kind; net's
    # is on the samples' clock, but its explainer reads only a whole run's capture.
    (["run", "--target", "linux-guest", "--trace", "--on-threshold", "1ms"],
     "--target linux-guest's capture, kind linux-guest, cannot be cut"),
    (["run", "--target", "net", "--trace", "--on-threshold", "1ms"],
     "--target net's capture, kind net-path, cannot be cut"),
    (["run", "--target", "kvm-arm64", "--trace", "--on-threshold", "1ms"],
     "only --target native has today"),
    (["run", "--target", "xen", "--trace", "--on-threshold", "1ms"],
     "--target xen's capture, kind host-vcpu"),
    (["run", "--target", "native", "--on-threshold", "shell:true"], "need a latency"),
    (["run", "--target", "native", "--on-threshold", "1ms", "--on-threshold", "stop",
      "--break-at", "2ms"], "give one of them"),
    (["run", "--target", "native", "--trace-ring", "8M"], "add --trace and"),
])
def test_the_cli_refuses_what_cannot_be_recorded(tmp_path, argv, says):
    from tests.conftest import call_argv
    res = call_argv([*argv, "--db", str(tmp_path / "x.duckdb")])
    assert res.returncode == 2, res.stderr
    assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
