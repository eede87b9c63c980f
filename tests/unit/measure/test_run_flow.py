"""The run flow (irqlab.measure.run) with a fake target: no QEMU, a real ring and store.

What is checked here once needed a real boot: the accelerator fallback, the watchdog, an
interrupted run, a failed run that keeps its data, hooks entered and left in order with
the run context, and the run's record when nothing boots.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import numpy as np
import pytest

from irqlab.measure import RunConfig, config_for_target, run
from irqlab.store import Store
from irqlab.targets import TARGETS
from tests.unit.measure.fake_target import (EARLY_NS, LATENCY_NS, SPIKE_EVERY, SPIKE_NS,
                                            FakeTarget)

PERIOD_NS = 1_000_000


class Recorder:
    """An Observer that keeps what the run told it."""

    def __init__(self, on_started=None) -> None:
        self.started: list[dict[str, Any]] = []
        self.windows: list[dict[str, Any]] = []
        self.notices: list[str] = []
        self._on_started = on_started

    def on_started(self, info):
        self.started.append(info)
        if self._on_started:
            self._on_started()

    def on_window(self, window, line):
        self.windows.append(window)

    def on_progress(self, fraction, detail):
        pass

    def on_notice(self, text):
        self.notices.append(text)


class OrderHook:
    """A run hook that records when it is entered, started and left."""

    requires = None

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log
        self.ctx = None

    def qemu_args(self):
        return [f"-{self.name}"]

    def before_start(self):
        self.log.append(("before", self.name))

    def after_start(self, ctx):
        self.ctx = ctx
        self.log.append(("after", self.name))

    def metadata(self):
        return {"seen_run_id": self.ctx.run_id if self.ctx else None}

    def stop(self):
        self.log.append(("stop", self.name))


@pytest.fixture
def fake(monkeypatch):
    made: list[FakeTarget] = []

    def register(**kwargs) -> FakeTarget:
        target = FakeTarget(**kwargs)
        monkeypatch.setitem(TARGETS, "fake", target)   # one registry line
        made.append(target)
        return target
    yield register
    for t in made:
        t.close()


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.duckdb") as s:
        yield s


def _cfg(behaviour: str = "ok", **common) -> RunConfig:
    common.setdefault("period_ns", PERIOD_NS)
    common.setdefault("window_ns", 100 * PERIOD_NS)
    common.setdefault("threshold_ns", 30_000)
    given = {} if behaviour == "ok" else {"fake_behaviour": behaviour}
    return config_for_target("fake", given, **common)


def test_bounded_run_measures_every_sample(fake, store):
    fake()
    obs = Recorder()
    res = run(_cfg(samples=300, duration_ns=None), store, obs)
    s = res.summary
    assert res.status == "ok", s["message"]
    assert (s["samples"], s["lost"], s["target"]) == (300, 0, "fake")
    assert s["min_ns"] == LATENCY_NS and s["max_ns"] == SPIKE_NS
    assert s["above_threshold"] == 300 // SPIKE_EVERY
    assert [w["samples"] for w in obs.windows] == [100, 100, 100]
    assert store.sample_count(res.run_id) == 300


@pytest.mark.parametrize("lost_at, lost_in_run", [(range(100, 107), 7),
                                                    (range(305, 312), 0)])
def test_a_run_by_count_counts_only_its_own_losses(fake, store, lost_at, lost_in_run):
    # 320 samples wait in the ring, 7 of them lost: before the 300th they are the run's,
    # after it (the probe ran on while the run stopped) they are not. Either way every
    # lost record is a gap in the stored sequence (the labgrid matrix test saw 7 lost
    # beside a stored sequence without a gap).
    fake(backlog=320, lost_backlog=tuple(lost_at))
    res = run(_cfg(samples=300, duration_ns=None), store, Recorder())
    s = res.summary
    assert (res.status, s["samples"], s["lost"]) == ("ok", 300, lost_in_run), s["message"]
    seqs = sorted(int(q) for b in store.iter_samples(res.run_id)
                  for q in b.column("seq").to_pylist())
    assert len(seqs) == 300 and seqs[-1] + 1 - seqs[0] - len(seqs) == s["lost"]
    after = store.resolve(str(res.run_id)).metadata.get("lost_after_end", 0)
    assert after == 7 - lost_in_run


def test_duration_keeps_the_deadlines_within_it_of_the_first(fake, store):
    # 150 samples wait in the ring when the host starts reading (a probe that ran while
    # it booted): a wall-clock duration counted them on top. The duration bounds
    # deadlines: [first, first + 300 ms) is 300 periods.
    fake(backlog=150)
    obs = Recorder()
    res = run(_cfg(duration_ns=300 * PERIOD_NS), store, obs)
    s = res.summary
    assert res.status == "ok", s["message"]
    assert (s["samples"], s["lost"]) == (300, 0)
    assert [w["samples"] for w in obs.windows] == [100, 100, 100]
    assert store.sample_count(res.run_id) == 300
    deadlines = np.concatenate([d for d, _, _ in store.iter_samples_by_deadline(
        res.run_id)])
    assert np.array_equal(deadlines, np.arange(1, 301) * PERIOD_NS)


def test_a_guest_clock_slower_than_the_host_is_ended_by_the_wall_clock(fake, store):
    # Deadlines advance 1 ms per 5 ms of host time: 300 ms of them would take 1.5 s, so
    # the host's clock (duration + stall timeout = 0.7 s) ends the run first, and says so.
    fake(slowdown=5)
    obs = Recorder()
    res = run(_cfg(duration_ns=300 * PERIOD_NS, stall_timeout_s=0.4), store, obs)
    assert res.status == "ok", res.summary["message"]
    assert 0 < res.summary["samples"] < 300
    bound = store.resolve(str(res.run_id)).metadata["duration_bound"]
    assert bound["ended_by"] == "wall clock" and bound["samples_after_end"] == 0
    assert any(n.startswith("stopped by the wall clock") for n in obs.notices)


def test_an_entry_before_its_deadline_is_invalid_never_a_latency(fake, store):
    # Every 30th sample fired 1.75 ms early (issue 27): 10 of 300 are invalid, counted
    # in their windows and the summary, in no latency figure and not among the samples.
    fake(early_every=30)
    obs = Recorder()
    res = run(_cfg(samples=300, duration_ns=None), store, obs)
    s = res.summary
    assert res.status == "ok", s["message"]
    assert (s["samples"], s["invalid"], s["lost"]) == (290, 10, 0)
    assert s["min_ns"] == LATENCY_NS and s["max_ns"] == SPIKE_NS
    assert [w["invalid"] for w in obs.windows] == [3, 3, 4]
    assert [w["samples"] for w in obs.windows] == [97, 97, 96]
    assert store.sample_count(res.run_id) == 290
    lat = np.concatenate(list(store.iter_latency(res.run_id)))
    assert lat.min() == LATENCY_NS
    assert s["percentiles_from"] == "exact" and s["p50_ns"] == LATENCY_NS
    meta = store.resolve(str(res.run_id)).metadata
    early = meta["invalid_samples"]
    assert [r["seq"] for r in early] == list(range(29, 300, 30))
    assert all(r["entry_tick"] - r["deadline_tick"] == -EARLY_NS for r in early)
    stored = store.windows(res.run_id)
    assert [w["extra"]["invalid"] for w in stored] == [3, 3, 4]


def test_accelerator_fallback_records_the_failed_attempt(fake, store):
    fake(broken_accels=("kvm",))
    obs = Recorder()
    res = run(_cfg(samples=50, duration_ns=None), store, obs)
    assert res.status == "ok"
    assert res.summary["accel"] == "tcg" and res.summary["emulated"] is True
    meta = store.resolve(str(res.run_id)).metadata
    first, second = meta["accel_attempts"]
    assert first["accel"] == "kvm" and "QEMU exited with code 1" in first["error"]
    assert first["exit_code"] == 1
    assert second == {"accel": "tcg", "error": None, "qemu_argv": ["fake-probe", "tcg"]}
    assert any("trying the next accelerator" in n for n in obs.notices)


def test_no_accelerator_boots_is_a_failed_run_on_record(fake, store):
    fake(broken_accels=("kvm", "tcg"))
    log: list = []
    hook = OrderHook("knob", log)
    res = run(_cfg(samples=50, duration_ns=None, hooks=[hook]), store, Recorder())
    assert res.status == "failed"
    assert "before the probe ran" in res.summary["message"]
    assert res.summary["samples"] == 0 and res.summary["arch"] == "x86_64"
    row = store.resolve(str(res.run_id))
    assert row.status == "failed" and len(row.metadata["accel_attempts"]) == 2
    # Entered hooks are always left, and their metadata is kept.
    assert log == [("before", "knob"), ("stop", "knob")]
    assert row.metadata["hooks"] == {"knob": {"seen_run_id": None}}


def test_watchdog_fails_the_run_and_keeps_the_data(fake, store):
    fake(after=120)
    res = run(_cfg("hang", duration_ns=20_000_000_000, stall_timeout_s=0.4), store,
              Recorder())
    assert res.status == "failed"
    assert res.summary["message"].startswith("watchdog: no sample for")
    assert res.summary["samples"] == 120
    assert store.sample_count(res.run_id) == 120


def test_process_exit_mid_run_fails_with_its_code_and_keeps_the_data(fake, store):
    fake(after=80)
    res = run(_cfg("crash", duration_ns=20_000_000_000), store, Recorder())
    assert res.status == "failed"
    assert "QEMU exited with code 3 after 80 samples" in res.summary["message"]
    assert res.summary["samples"] == 80 and store.sample_count(res.run_id) == 80
    meta = store.resolve(str(res.run_id)).metadata
    # The hosting process's exit code under its neutral name and its older alias.
    assert meta["process_exit_code"] == meta["qemu_exit_code"] == 3
    assert meta["process_stderr_tail"] == meta["qemu_stderr_tail"]


@pytest.mark.parametrize("behaviour", ["ok", "crash"])
def test_big_windows_keep_their_samples_in_files(fake, store, behaviour):
    # window / period >= FILES_MIN_SAMPLES_PER_WINDOW: the run's samples go to sample
    # files (store/sample_files.py), every one of them, also when the probe dies
    from irqlab.store.sample_files import FILES_MIN_SAMPLES_PER_WINDOW
    fake(after=80)
    res = run(_cfg(behaviour, window_ns=FILES_MIN_SAMPLES_PER_WINDOW * PERIOD_NS,
                   samples=300 if behaviour == "ok" else None,
                   duration_ns=None if behaviour == "ok" else 20_000_000_000),
              store, Recorder())
    want = 300 if behaviour == "ok" else 80
    assert res.summary["samples"] == want
    assert store.sample_count(res.run_id) == want
    assert store._query("SELECT count(*) FROM samples WHERE run_id = ?",
                        [res.run_id]).fetchone() == (0,)
    assert store._files(res.run_id)
    lat = np.concatenate(list(store.iter_latency(res.run_id, in_sequence=True)))
    assert lat.size == want and int(lat.max()) == SPIKE_NS and int(lat.min()) == LATENCY_NS


def test_small_windows_keep_the_table(fake, store):
    fake()
    res = run(_cfg(samples=300, duration_ns=None), store, Recorder())
    assert store._files(res.run_id) == [] and store.sample_count(res.run_id) == 300


def test_probe_error_state_fails_the_run(fake, store):
    fake(after=30)
    res = run(_cfg("probe-error", duration_ns=20_000_000_000), store, Recorder())
    assert res.status == "failed"
    assert res.summary["message"].startswith("probe error 7")
    assert res.summary["samples"] == 30


def test_sigint_interrupts_and_keeps_the_data(fake, store):
    fake()

    def interrupt_soon():
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    res = run(_cfg(duration_ns=20_000_000_000), store, Recorder(on_started=interrupt_soon))
    assert res.status == "interrupted"
    assert "SIGINT" in res.summary["message"]
    n = res.summary["samples"]
    assert 50 < n < 2000
    assert store.sample_count(res.run_id) == n


def test_hooks_get_the_run_context_and_are_left_in_reverse(fake, store):
    target = fake()
    log: list = []
    hooks = [OrderHook("knob", log), OrderHook("load", log)]
    res = run(_cfg(samples=20, duration_ns=None, hooks=hooks), store, Recorder())
    assert res.status == "ok"
    assert log == [("before", "knob"), ("before", "load"), ("after", "knob"),
                   ("after", "load"), ("stop", "load"), ("stop", "knob")]
    ctx = hooks[0].ctx
    assert ctx.run_id == res.run_id and ctx.plan.accel == "kvm"
    assert ctx.process is target.processes[-1]
    # The context's source may be peeked by another thread (trace anchors).
    peek = ctx.source.peek()
    try:
        head, entry = peek.latest()
    finally:
        peek.close()
    assert head == 20 and entry == 20 * PERIOD_NS + LATENCY_NS
    meta = store.resolve(str(res.run_id)).metadata
    assert meta["hooks"]["load"] == {"seen_run_id": res.run_id}


def test_a_hook_failing_at_start_fails_the_run_and_leaves_every_hook(fake, store):
    fake()
    log: list = []

    class Broken(OrderHook):
        def after_start(self, ctx):
            raise OSError("cannot pin")
    hooks = [OrderHook("knob", log), Broken("trace", log)]
    res = run(_cfg(samples=20, duration_ns=None, hooks=hooks), store, Recorder())
    assert res.status == "failed" and res.summary["message"] == "cannot pin"
    assert log[-2:] == [("stop", "trace"), ("stop", "knob")]


def test_the_target_option_reaches_the_target_typed(fake):
    fake()
    cfg = _cfg("hang")
    assert cfg.options.behaviour == "hang"
    assert cfg.params()["behaviour"] == "hang" and cfg.params()["target"] == "fake"
