"""The tap network's namespace and the vhost knob (no QEMU): a namespace is journalled
before it exists and a dead owner's is removed by the next replay in one line; vhost is
applied or says why not, never dropped."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from irqlab.knobs import make_knob
from irqlab.journal import replay_stale
from irqlab.knobs.net import vhost_net_missing
from irqlab.knobs.netns import NETNS_DIR, NetnsNetwork, undo_netns


@pytest.fixture
def root():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")


def test_namespace_of_a_dead_owner_is_removed_by_the_replay(tmp_path, root):
    # A process sets the network up and dies without tearing it down (os._exit).
    code = ("from irqlab.knobs.netns import NetnsNetwork\n"
            "import os\n"
            "n = NetnsNetwork(); n.setup(); print(n.name, flush=True); os._exit(9)\n")
    env = {**os.environ, "IRQLAB_STATE_DIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=30)
    name = res.stdout.strip()
    assert res.returncode == 9 and (NETNS_DIR / name).exists(), res.stderr
    said = replay_stale(tmp_path / "journal")
    assert not (NETNS_DIR / name).exists()
    assert len(said) == 1 and said[0].startswith(f"removed network namespace {name} ")
    assert not list((tmp_path / "journal").glob("*.jsonl"))


def test_a_normal_teardown_closes_the_journal_entry(tmp_path, monkeypatch, root):
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path))
    net = NetnsNetwork()
    net.setup()
    try:
        assert (NETNS_DIR / net.name).exists()
        assert net.qemu_netdev()[1].startswith("tap,id=irqlab-net,ifname=irqtap0,")
        assert net.sender_dest() == ("10.77.0.2", 7010)
    finally:
        net.teardown()
    assert not (NETNS_DIR / net.name).exists()
    assert not list((tmp_path / "journal").glob("*.jsonl"))
    assert undo_netns({"name": net.name, "pid": 1}) == \
        f"network namespace {net.name} already gone"


def test_vhost_on_is_applied_or_says_why_not():
    knob = make_knob("vhost", "on")
    opts = knob.netdev_options()
    missing = vhost_net_missing()
    if missing:
        assert opts == {} and knob.metadata()["status"] == f"not applicable here: {missing}"
        assert "/dev/vhost-net does not exist" in missing or "not readable" in missing
    else:
        assert opts == {"vhost": "on"} and knob.metadata()["status"] == "applied"


def test_vhost_has_nothing_to_serve_on_user_networking_or_other_targets():
    knob = make_knob("vhost", "on")
    knob.not_applicable_to("--net user")
    assert "--net user has none (use --net tap)" in knob.metadata()["status"]
    other = make_knob("vhost", "on")
    other.after_start(None)         # no network ever asked it: not a net target
    assert other.metadata()["status"].startswith("not applicable here: only --target net")
    off = make_knob("vhost", "off")
    assert off.netdev_options() == {"vhost": "off"} and off.metadata()["status"] == "applied"


def test_disk_knobs_set_the_guest_disk_back_end():
    from irqlab.runner.net import GuestDisk
    disk = GuestDisk()
    aio, iothread = make_knob("aio", "io_uring"), make_knob("iothread", "on")
    aio.apply_to_disk(disk)
    iothread.apply_to_disk(disk)
    assert aio.metadata()["status"] == iothread.metadata()["status"] == "applied"
    assert disk.qemu_args(7) == [
        "-drive", "file=/proc/self/fd/7,if=none,id=irqlab-disk,format=raw,cache.direct=on,"
                  "aio=io_uring",
        "-object", "iothread,id=irqlab-io",
        "-device", "virtio-blk-pci,drive=irqlab-disk,iothread=irqlab-io"]
    # Without a disk to take them (any other target), they say why.
    other = make_knob("aio", "native")
    other.after_start(None)
    assert other.metadata()["status"].startswith("not applicable here: this run's VM has "
                                                 "no disk")


def test_queues_sets_the_tap_and_the_nic(tmp_path, monkeypatch, root):
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path))
    knob = make_knob("queues", "4")
    net = NetnsNetwork(settings=[knob])
    net.setup()
    try:
        flags = subprocess.run(["ip", "-n", net.name, "-d", "link", "show", "irqtap0"],
                               capture_output=True, text=True).stdout
        assert "multi_queue" in flags          # QEMU opens it with 4 queues
        netdev, device = net.qemu_netdev()[1], net.qemu_netdev()[3]
    finally:
        net.teardown()
    assert netdev.endswith(",queues=4") and device.endswith(",mq=on,vectors=10")
    assert knob.metadata()["status"] == "applied"
    user = make_knob("queues", "2")
    user.not_applicable_to("--net user")
    assert "user network has one queue" in user.metadata()["status"]
    with pytest.raises(ValueError):
        make_knob("queues", "0")
