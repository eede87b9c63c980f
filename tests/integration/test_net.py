"""``--target net`` under TCG: Debian's kernel with irqlab's responder on virtio-net, the
host sender beside it (issue 16). 10 s at 1 ms in user and in tap mode with every packet
accounted for, the self-check, and no namespace, tap or bridge left behind after a run
or after ``kill -9`` followed by any irqlab command. The two modes, the self-check and
the explain along the packet's path also run with an arm64 guest (issue 42: Debian's
arm64 kernel on QEMU virt, the responder cross-compiled)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from irqlab.knobs.net import vhost_net_missing
from irqlab.knobs.netns import BRIDGE, NETNS_DIR, TAP
from irqlab.runner.linux_guest import find_kernel
from irqlab.runner.net import NETSEND, net_modules_dir
from irqlab.samples.record import FLAG_INJECTED
from irqlab.store import Store
from tests.conftest import run_cli
from tests.integration._helpers import latency_ticks, stored_samples

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

# Debian's kernel boots in ~10 s under TCG on a quiet host, past the default 30 s boot
# timeout on a loaded one (seen: the responder up, the run failed at 30 s): how fast TCG
# boots is not what these tests check.
TCG = ("--accel", "tcg", "--boot-timeout", "120s")


ARCHES = ("x86_64", "arm64")


def _kernel(arch: str) -> Path:
    """The guest kernel of ``arch`` with its virtio-net modules (skips without them)."""
    if os.geteuid() != 0:
        pytest.skip("the sender runs SCHED_FIFO and tap mode makes a namespace: root")
    kernel = find_kernel(arch)
    if kernel is None or not kernel.exists():
        pytest.skip(f"no {arch} Linux guest kernel: ./setup.sh --install-only fetches it")
    if not (net_modules_dir(kernel, arch) / "load-order").exists():
        pytest.skip("no virtio-net modules: scripts/fetch-linux-net.sh fetches them")
    subprocess.run(["make", "-s", "-C", str(NETSEND.parents[1])], check=True)
    return kernel


@pytest.fixture(scope="module")
def guest_kernel():
    return _kernel("x86_64")


def _env(state: Path) -> dict[str, str]:
    return {**os.environ, "IRQLAB_STATE_DIR": str(state)}


def _meta(db: Path, name: str) -> dict:
    with Store(db, read_only=True) as st:
        return st.resolve(name).metadata


def _host_has_link(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def _run_10s(db: Path, name: str, *extra: str) -> tuple[dict, dict]:
    # (timeout: a hang guard only; how long TCG takes to boot is not this test's business)
    res = run_cli(["run", "--target", "net", *TCG, "--duration", "10s",
                   "--window", "2s", "--json", "--name", name, *extra], db, timeout=120)
    assert res.code == 0, res.stderr + res.stdout[-2000:]
    return res.summary, _meta(db, name)


def _every_packet_accounted_for(db: Path, name: str, s: dict, meta: dict) -> None:
    net = meta["net"]
    assert (s["status"], s["target"], s["accel"], s["emulated"]) == \
        ("ok", "net", "tcg", True)
    # --duration keeps the packets sent within 10 s of the first; those sent after it
    # (until the host stopped the sender) are resolved too, and named, not counted.
    after_end = meta["duration_bound"]["samples_after_end"]
    assert s["samples"] + s["lost"] + after_end == net["sent"]
    # Every packet sent was answered or timed out (1 s), none vanished or came back
    # garbled; a lost sample is a timed-out packet. How many time out is the host's load,
    # not the run's: TCG starved beside stress-ng and the suite answered 103 of 10,580
    # after the timeout (round trips up to 1.0 s; `late` counts their replies).
    assert net["replied"] + net["timed_out"] == net["sent"]
    assert net["send_errors"] == 0 and net["bad"] == 0
    assert s["lost"] <= net["timed_out"] and net["late"] <= net["timed_out"]
    # The sender keeps its absolute 1 ms schedule from before the run's 10 s (it starts
    # with the guest) until after them (the host stops it): each of those 10,000 periods
    # is a packet sent or an overrun the sender counted, however slowly TCG answers. If
    # the run ended before a packet past the 10 s was read (the wall-clock backstop, seen
    # at load 8), the periods after the last packet kept are neither: count to it.
    bound = meta["duration_bound"]
    periods = 10_000
    if bound["ended_by"] != "deadline":
        with Store(db, read_only=True) as st:
            run_id = st.resolve(name).run_id
        last = int(stored_samples(db, run_id)["deadline_tick"].max())
        periods = (last - bound["first_deadline_tick"]) // 1_000_000 + 1
    assert net["sent"] + s["overruns"] >= periods - 1, (net, s["overruns"], bound)
    assert s["tick_hz"] == 1_000_000_000 and 0 < s["min_ns"] <= s["p50_ns"] <= s["max_ns"]


@pytest.mark.parametrize("arch", ARCHES)
def test_user_mode_10s_every_packet_accounted_for(db, arch):
    _kernel(arch)
    s, meta = _run_10s(db, "user", "--arch", arch)
    assert s["arch"] == arch
    _every_packet_accounted_for(db, "user", s, meta)
    assert meta["net"]["loopback"] and meta["network"]["mode"] == "user"
    assert meta["network"]["sender_dest"].startswith("127.0.0.1:")


@pytest.mark.parametrize("arch", ARCHES)
def test_tap_mode_10s_self_check_and_nothing_left(db, tmp_path, arch):
    # The responder holds every 100th reply for 20 ms: exactly those exceed 20 ms. (With
    # 5 ms, as the example, TCG on a busy 2-core host sometimes gives a natural
    # round trip above 5 ms: 113 above against 100 held once.)
    _kernel(arch)
    s, meta = _run_10s(db, "tap", "--arch", arch, "--net", "tap", "--vhost", "on",
                       "--inject-delay", "20ms", "--inject-every", "100",
                       "--threshold", "20ms")
    assert s["arch"] == arch
    _every_packet_accounted_for(db, "tap", s, meta)
    assert meta["net"]["own_netns"] and meta["net"]["dest"] == "10.77.0.2"
    # Each held reply comes back marked (netproto.h NET_F_HELD), and the sender flags
    # its sample injected (FLAG_INJECTED): exactly the replies the responder holds (every
    # 100th packet), no other, whatever the noise; each of them shows the 20 ms.
    recs = stored_samples(db, s["run_id"])
    held = (recs["flags"] & FLAG_INJECTED) != 0
    assert np.array_equal(held, (recs["seq"] + 1) % 100 == 0)
    assert s["injected"] == np.count_nonzero(held) >= 90
    assert s["injected"] <= meta["net"]["held"]      # the sender's count: after the end too
    lat = latency_ticks(recs)
    assert lat[held].min() >= 20_000_000
    # The self-check: the injected samples exceed the threshold; an unflagged sample
    # above it would be a natural round trip as long (TCG on a busy host), told apart.
    assert s["above_threshold"] == np.count_nonzero(lat > 20_000_000) >= s["injected"]
    # vhost: applied on a host with /dev/vhost-net, else said why, never dropped.
    vhost = meta["hooks"]["knob:vhost"]["status"]
    missing = vhost_net_missing()
    assert vhost == (f"not applicable here: {missing}" if missing else "applied")
    # Nothing of the run's network is left: the namespace (and with it tap and bridge).
    ns = meta["network"]["namespace"]
    assert ns.startswith("irqlab-") and not (NETNS_DIR / ns).exists()
    assert not _host_has_link(TAP) and not _host_has_link(BRIDGE)


def test_kill_9_then_any_command_removes_the_namespace(tmp_path, guest_kernel):
    state = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                             "net", "--net", "tap", *TCG, "--duration", "60s",
                             "--json", "--db", str(tmp_path / "a.duckdb")],
                            env=_env(state), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    ns = NETNS_DIR / f"irqlab-{proc.pid}-1"
    try:
        end = time.monotonic() + 30
        while not ns.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "the run's namespace never appeared"
            time.sleep(0.05)
        time.sleep(2.0)                 # QEMU and the sender are inside it now
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert ns.exists(), "SIGKILL leaves the namespace: the journal must remove it"
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "list",
                          "--db", str(tmp_path / "other.duckdb")],
                         env=_env(state), capture_output=True, text=True, timeout=60)
    assert not ns.exists()
    said = [ln for ln in res.stderr.splitlines() if "network namespace" in ln]
    assert len(said) == 1 and f"removed network namespace {ns.name}" in said[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not list((state / "journal").glob("*.jsonl"))


def test_net_flood_runs_in_the_namespace_and_reaches_the_guest(db, guest_kernel):
    res = run_cli(["run", "--target", "net", "--net", "tap", *TCG, "--samples",
                   "2000", "--window", "1s", "--load", "net-flood:tool=ping", "--json",
                   "--name", "flood"], db, timeout=60)
    assert res.code == 0, res.stderr + res.stdout[-2000:]
    s, meta = res.summary, _meta(db, "flood")
    assert s["status"] == "ok" and s["samples"] + s["lost"] == meta["net"]["sent"] == 2000
    load = meta["hooks"]["load:net-flood"]
    assert load["status"] == "ok" and load["dest"] == "10.77.0.2" and load["cpu_s"] > 0
    assert load["argv"][:5] == ["ping", "-q", "-n", "-f", "-s"]
    # The flood went through the run's tap to the guest, and the guest answered it. How
    # many packets ping -f sends depends on how fast TCG answers (a loaded host: 2800
    # beside the 2000 round trips, where > 3 x 2000 was asked), so the flood is what the
    # tap carried beyond the measured traffic, and its two directions are compared with
    # each other: nearly every request answered (ping -f has few in flight at its stop).
    # At least 100: ping -f sends one every 10 ms without replies, over >= 2 s here.
    tap = meta["network"]["tap_counters"]
    flood_in = tap["to_guest_packets"] - meta["net"]["sent"]
    flood_out = tap["from_guest_packets"] - s["samples"]
    assert flood_in >= 100 and flood_out >= 0.9 * flood_in, (tap, meta["net"])
    assert not (NETNS_DIR / meta["network"]["namespace"]).exists()


def test_guest_disk_load_through_the_aio_and_iothread_knobs(db, guest_kernel):
    # Seed 003's block path: the guest does O_DIRECT I/O on its virtio-blk disk, which
    # QEMU serves with aio=native in an iothread; the round trips go on beside it.
    res = run_cli(["run", "--target", "net", *TCG, "--samples", "2000",
                   "--window", "1s", "--aio", "native", "--iothread", "on",
                   "--load", "guest-disk", "--json", "--name", "disk"], db, timeout=60)
    assert res.code == 0, res.stderr + res.stdout[-2000:]
    s, meta = res.summary, _meta(db, "disk")
    assert s["status"] == "ok" and s["samples"] + s["lost"] == meta["net"]["sent"] == 2000
    hooks = meta["hooks"]
    assert hooks["knob:aio"]["status"] == hooks["knob:iothread"]["status"] == "applied"
    load = hooks["load:guest-disk"]
    assert load["status"] == "ok" and load["started_in_guest"]
    assert load["qemu_disk_io"]["write_bytes"] > 1 << 20     # the guest really wrote
    drive = meta["qemu_argv"][meta["qemu_argv"].index("-drive") + 1]
    assert "aio=native" in drive and "cache.direct=on" in drive
    assert "virtio-blk-pci,drive=irqlab-disk,iothread=irqlab-io" in meta["qemu_argv"]
    # The disk was an unlinked file: nothing of it is left.
    assert not list(Path("/var/tmp").glob("irqlab-disk-*"))


def test_echo_kernel_the_guest_kernel_answers_icmp(db, guest_kernel):
    res = run_cli(["run", "--target", "net", "--net", "tap", "--echo", "kernel", *TCG,
                   "--samples", "2000", "--window", "1s", "--json", "--name",
                   "kernel-echo"], db, timeout=60)
    assert res.code == 0, res.stderr + res.stdout[-2000:]
    s, meta = res.summary, _meta(db, "kernel-echo")
    net = meta["net"]
    assert s["status"] == "ok" and s["samples"] + s["lost"] == net["sent"] == 2000
    assert s["lost"] == 0 and net["timed_out"] == 0 and net["bad"] == 0
    # ICMP echo requests, every reply an echo reply of the guest kernel (no responder
    # runs: irqlab-echo --mode kernel only waits), timed by the kernel's stamps
    assert net["icmp"] and net["own_netns"] and net["dest"] == "10.77.0.2"
    assert net["replied"] == 2000 and net["kernel_ts"] == 2000
    assert "--icmp" in meta["network"]["sender_argv"]
    assert not (NETNS_DIR / meta["network"]["namespace"]).exists()


def _guest_step_ns(sample: dict) -> int | None:
    """From QEMU woken (already awake, or running) for the request to the reply leaving the guest, in ns;
    None when the capture lacks either stage."""
    at = {st["stage"]: st["at_ns"] for st in sample["stages"]}
    start = at.get("QEMU woken", at.get("QEMU already awake", at.get("QEMU running")))
    end = next((ns for name, ns in at.items() if name.startswith("reply from the guest")),
               None)
    return None if start is None or end is None else end - start


@pytest.mark.parametrize("arch", ARCHES)
def test_explain_follows_the_packet_path_and_blames_the_held_replies_on_the_guest(
        db, arch, tmp_path):
    """--trace on a net run: the host capture on CLOCK_MONOTONIC (the samples' clock),
    the net events and the sender's threads; explain then puts the responder's held
    replies (20 ms) inside the guest's step of the path, not on the host's stack."""
    _kernel(arch)
    # An arm64 guest under TCG answers more slowly (docs/arm64.md): at 1 ms on a loaded
    # host it fell behind the stream, hundreds of natural round trips passed the 15 ms
    # threshold and explaining them all took 340 s. At 2 ms it keeps up.
    period = ["--period", "2ms"] if arch == "arm64" else []
    res = run_cli(["run", "--target", "net", "--arch", arch, "--net", "tap", *TCG,
                   *period, "--samples",
                   "2000", "--inject-delay", "20ms", "--inject-every", "100", "--trace",
                   "--json", "--name", "net-traced"], db, timeout=90)
    assert res.code == 0, res.stderr + res.stdout[-2000:]
    meta = _meta(db, "net-traced")["hooks"]["trace"]
    assert meta["clock"] == "mono" and meta["path"] == "net"
    assert "net:net_dev_queue" in meta["enabled"]
    assert "irqlab-netsend" in meta["peer_threads"].values()
    ex = run_cli(["explain", "net-traced", "--threshold", "15ms", "--json"], db)
    assert ex.code == 0, ex.stderr
    (js,) = ex.lines
    assert js["source"] == "net path" and js["clock"]["error_bound_ns"] == 0
    held = [s for s in js["samples"] if s["status"] == "explained"]
    assert len(held) >= 18                       # 20 held replies, the capture's ends aside
    for s in held:
        assert sum(c["ns"] for c in s["causes"]) == s["latency_ns"]
    # The 20 held replies (every 100th: seq + 1 divisible by 100, as the flags show in the
    # tap test): the guest holds each 20 ms of its clock, which runs with the host's, so
    # the guest's step of the path — from QEMU woken for the request to the reply leaving
    # the guest — lasts >= 20 ms on each, whatever the host's load. Which *cause* that time
    # gets is the load's business (on a loaded host part of it is the vCPU thread
    # preempted, named as such: 8 of 20 kept >= 10 ms as "guest:" causes at load 6), so
    # the step is read from the stages. The host's stack must not carry the hold: it stays
    # below the guest's step (beside stress-ng a held reply spent 6.7 ms on it).
    # The reply is the hand-over just after the RX stamp: the last one before it, another
    # packet's, stood for it until 2026-11-27 (a guest step of 16 ms in CI, 0.3 ms on
    # seq 1999), and a busy QEMU main loop took the vCPU's later kick as its start.
    truly_held = [(s, _guest_step_ns(s)) for s in held if (s["seq"] + 1) % 100 == 0]
    timed = [(s, ns) for s, ns in truly_held if ns is not None]
    assert len(timed) >= 15, [s["stages"] for s, _ in truly_held][:5]
    assert all(ns >= 19_000_000 for _, ns in timed), [ns for _, ns in timed]
    assert all(sum(c["ns"] for c in s["causes"] if c["cause"].startswith("host stack")) < ns
               for s, ns in timed), [s["causes"][:3] for s, _ in timed]
    steps = {(st["from"], st["to"]) for st in js["stage_summary"]}
    assert ("sent", "QEMU woken") in steps or any(a == "sent" for a, _ in steps)
    html = tmp_path / "net.html"
    assert run_cli(["report", "net-traced", "-o", str(html)], db).code == 0
    assert "Where the time goes" in html.read_text() and "QEMU woken" in html.read_text()
