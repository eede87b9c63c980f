"""The net target's run flow with the real sender and responder on loopback (no QEMU):
every packet sent is a sample or lost, a run ended by the clock still accounts for the
packets in flight, the self-check marks exactly the held replies, a late reply is a lost
packet, and the sender times in user space when asked to, saying so. Also the sender's
own refusals: a destination that is neither loopback nor inside a namespace of its own,
and bad options."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from irqlab.measure import RunConfig, config_for_target, run
from irqlab.runner.net import NETSEND
from irqlab.samples.net import FLAG_USER_TS
from irqlab.samples.record import FLAG_INJECTED
from irqlab.store import Store
from irqlab.targets import TARGETS
from tests.unit.measure.fake_net_target import LoopbackNetTarget, build_net_programs
from tests.unit.measure.test_run_flow import Recorder

PERIOD_NS = 1_000_000


@pytest.fixture
def loopnet(monkeypatch):
    build_net_programs()

    def register(**kwargs) -> LoopbackNetTarget:
        target = LoopbackNetTarget(**kwargs)
        monkeypatch.setitem(TARGETS, "loopnet", target)   # one registry line
        return target
    return register


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.duckdb") as s:
        yield s


def _cfg(given=None, **common) -> RunConfig:
    common.setdefault("period_ns", PERIOD_NS)
    common.setdefault("window_ns", 200 * PERIOD_NS)
    common.setdefault("threshold_ns", 2_000_000)
    return config_for_target("loopnet", {"rt_fallback": True, **(given or {})}, **common)


def _net_meta(store: Store, run_id: int) -> dict:
    return store.resolve(str(run_id)).metadata["net"]


def _samples(store: Store, run_id: int) -> dict[str, np.ndarray]:
    batches = list(store.iter_samples(run_id))
    return {k: np.concatenate([b.column(k).to_numpy() for b in batches])
            for k in ("seq", "deadline_tick", "entry_tick", "flags")}


def test_bounded_run_every_packet_is_a_sample(loopnet, store):
    loopnet()
    res = run(_cfg(samples=400, duration_ns=None), store, Recorder())
    s, net = res.summary, _net_meta(store, res.run_id)
    assert res.status == "ok", s["message"]
    assert (s["samples"], s["lost"], net["sent"], net["replied"]) == (400, 0, 400, 400)
    assert s["tick_hz"] == 1_000_000_000 and 0 < s["min_ns"] <= s["max_ns"]
    assert net["loopback"] and not net["own_netns"] and net["timeout_ns"] > 0
    # Kernel software timestamps on loopback: every round trip timed by them.
    assert net["kernel_timestamps"] and net["kernel_ts"] == 400 and net["user_ts"] == 0
    recs = _samples(store, res.run_id)
    assert recs["seq"].tolist() == list(range(400))
    assert np.all(np.diff(recs["deadline_tick"].astype(np.int64)) > 0)   # send order
    assert "per_cpu" not in s                   # one stream of packets, no CPU rings


@pytest.mark.slow
def test_run_ended_by_the_clock_accounts_for_packets_in_flight(loopnet, store):
    loopnet()
    res = run(_cfg(duration_ns=1_500_000_000), store, Recorder())
    s, net = res.summary, _net_meta(store, res.run_id)
    assert res.status == "ok", s["message"]
    # The packets sent after the duration's end (until the sender heard to stop) are
    # resolved too, and not counted: they are named in the run's duration_bound.
    bound = store.resolve(str(res.run_id)).metadata["duration_bound"]
    assert bound["ended_by"] == "deadline" and bound["samples_after_end"] > 0
    assert s["samples"] + s["lost"] + bound["samples_after_end"] == net["sent"]
    assert s["lost"] == 0 and net["sender"]["state"] == "done"
    # Send times (the deadlines) within 1.5 s of the first: 1,500 periods of 1 ms, fewer
    # only for sends the sender skipped (its overruns).
    recs = _samples(store, res.run_id)
    span = recs["deadline_tick"].astype(np.int64) - int(recs["deadline_tick"][0])
    assert span.max() < 1_500_000_000
    assert s["samples"] + s["overruns"] >= 1499


def test_self_check_exactly_the_held_replies_exceed_the_threshold(loopnet, store):
    # Held 20 ms against a 15 ms threshold: a loopback round trip on a 2-core host busy
    # with other tests once took more than the 2 ms a 3 ms hold was checked against.
    loopnet()
    res = run(_cfg({"inject_delay": 20_000_000, "inject_every": 50}, samples=1000,
                   duration_ns=None, threshold_ns=15_000_000), store, Recorder())
    s = res.summary
    assert res.status == "ok", s["message"]
    assert s["injected"] == 20 and s["lost"] == 0
    recs = _samples(store, res.run_id)
    lat = recs["entry_tick"].astype(np.int64) - recs["deadline_tick"].astype(np.int64)
    held = (recs["flags"] & FLAG_INJECTED) != 0
    # Flagged per sample: exactly the replies the responder held (every 50th), no
    # other, whatever the noise; each shows the 20 ms, and any sample above the
    # threshold that is not flagged would be a natural round trip, told apart.
    assert np.array_equal(held, (recs["seq"] + 1) % 50 == 0)
    assert lat[held].min() >= 20_000_000
    assert s["above_threshold"] == np.count_nonzero(lat > 15_000_000) >= s["injected"]


def test_a_reply_after_its_timeout_is_a_lost_packet(loopnet, store):
    # Every 10th reply is held 150 ms, the sender waits 50 ms: those packets are lost.
    loopnet(sender_extra=["--timeout-ns", "50000000"])
    res = run(_cfg({"inject_delay": 150_000_000, "inject_every": 10}, samples=200,
                   duration_ns=None), store, Recorder())
    s, net = res.summary, _net_meta(store, res.run_id)
    assert res.status == "ok", s["message"]
    assert (s["samples"], s["lost"], s["injected"]) == (180, 20, 0)
    assert net["sent"] == 200 and net["timed_out"] == 20 and net["replied"] == 180
    recs = _samples(store, res.run_id)
    assert not np.any((recs["seq"] + 1) % 10 == 0)      # the gaps are the held ones


def test_user_space_timestamps_are_flagged_and_announced(loopnet, store):
    loopnet(sender_extra=["--no-kernel-ts"])
    obs = Recorder()
    res = run(_cfg(samples=200, duration_ns=None), store, obs)
    net = _net_meta(store, res.run_id)
    assert res.status == "ok" and res.summary["samples"] == 200
    assert not net["kernel_timestamps"] and net["user_ts"] == 200
    assert np.all(_samples(store, res.run_id)["flags"] & FLAG_USER_TS)
    assert any("timed in user space" in n for n in obs.notices)


def _sender(tmp_path, *args: str) -> subprocess.CompletedProcess:
    shm = tmp_path / "shm"
    with open(shm, "wb") as f:
        f.truncate(4 << 20)
    return subprocess.run([str(NETSEND), "--shm", str(shm), *args], capture_output=True,
                          text=True, timeout=10)


@pytest.mark.parametrize("dest", ["10.77.0.2", "192.0.2.1", "2001:db8::1"])
def test_the_sender_refuses_non_loopback_from_the_host_namespace(tmp_path, dest):
    build_net_programs()
    res = _sender(tmp_path, "--dest", dest, "--count", "5", "--rt-fallback")
    assert res.returncode == 1
    assert f"refusing to send to {dest}: not a loopback address" in res.stderr


@pytest.mark.parametrize("args, needle", [
    (["--dest", "127.0.0.1", "--count", "1", "--period-ns", "5000"], "--period-ns 5000"),
    (["--dest", "127.0.0.1"], "the traffic must be bounded"),
    (["--dest", "localhost", "--count", "1"], "not an IPv4 or IPv6 address"),
    (["--dest", "127.0.0.1", "--count", "1", "--payload", "16"], "--payload 16"),
])
def test_sender_usage_errors_exit_2(tmp_path, args, needle):
    build_net_programs()
    res = _sender(tmp_path, *args)
    assert res.returncode == 2 and needle in res.stderr, res.stderr

