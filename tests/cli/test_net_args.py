"""``irqlab run --target net``: a bad option is one line on stderr and exit 2 before
anything starts (no store, no namespace, no QEMU); good ones reach the target typed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from irqlab.cli import cmd_run
from irqlab.cli.main import build_parser
from tests.conftest import call_argv


def _cli(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """``irqlab run --target net ARGV`` in this interpreter (refused before anything
    starts)."""
    return call_argv(["run", "--target", "net", *argv, "--db", str(tmp_path / "t.duckdb")])


@pytest.mark.parametrize("argv,needle", [
    (["--net", "bridge"], "argument --net: invalid choice: 'bridge'"),
    (["--payload", "16"], "--payload 16 must be 32-1472 bytes"),
    (["--payload", "9000"], "--payload 9000 must be 32-1472 bytes"),
    (["--inject-delay", "5ms"], "--inject-delay and --inject-every go together"),
    (["--inject-every", "100"], "--inject-delay and --inject-every go together"),
    (["--inject-delay", "2s", "--inject-every", "100"],
     "--inject-delay must be shorter than the reply timeout"),
    (["--inject-delay", "900ms", "--inject-every", "1"], "holds more than 256 replies"),
    (["--icount"], "--icount does not apply to --target net (round trips are timed"),
    (["--idle", "poll"], "--idle does not apply to --target net"),
    (["--inject-irqoff", "2ms", "--inject-every", "10"], "use --inject-delay"),
    (["--cpus", "0"], "--cpus does not apply to --target net"),
    (["--period", "5us"], "below 10us, the shortest period the net probe takes"),
    (["--priority", "0"], "--priority 0 must be 1-99"),
    (["--vhost", "maybe"], "vhost"),
    (["--load", "net-flood"], "load:net-flood needs --target net --net tap"),
    (["--net", "tap", "--load", "net-flood:tool=iperf3"], "needs an iperf3 server in the guest"),
    (["--net", "tap", "--load", "net-flood:tool=sockperf,rate=0"], "rate"),
    (["--load", "guest-disk:mode=trim"], "mode 'trim': use randrw, read, write"),
    (["--load", "guest-disk:block=1000"], "block 1000 must be a multiple of 512"),
    (["--load", "guest-disk:cpus=0"], "cpus= does not apply"),
    (["--aio", "posix"], "aio 'posix': use threads, native or io_uring"),
    (["--echo", "guest"], "argument --echo: invalid choice: 'guest'"),
    (["--echo", "kernel"], "--echo kernel needs --net tap: QEMU's user network answers"),
    (["--echo", "kernel", "--net", "tap", "--inject-delay", "5ms", "--inject-every", "100"],
     "--inject-delay needs --echo user: the guest kernel answers ICMP echo at once"),
])
def test_bad_net_options_exit_2_in_one_line(argv, needle, tmp_path):
    res = _cli(*argv, tmp_path=tmp_path)
    assert res.returncode == 2, res
    assert needle in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stdout == ""
    assert not (tmp_path / "t.duckdb").exists()     # refused before anything started


def test_net_options_reach_the_target_typed():
    args = build_parser().parse_args(["run", "--target", "net", "--net", "tap", "--payload",
                                      "256", "--inject-delay", "5ms", "--inject-every",
                                      "100", "--vhost", "on", "--samples", "10"])
    cfg = cmd_run.run_config(args)
    o = cfg.options
    assert (o.net, o.payload_bytes, o.inject_delay_ns, o.inject_every, o.accel) == \
        ("tap", 256, 5_000_000, 100, "auto")
    assert cfg.params()["net"] == "tap" and cfg.params()["payload_bytes"] == 256
    assert [h.name for h in cfg.hooks] == ["knob:vhost"]


def test_guest_disk_load_needs_the_net_target(tmp_path):
    res = call_argv(["run", "--target", "guest", "--load", "guest-disk", "--db",
                     str(tmp_path / "t.db")])
    assert res.returncode == 2
    assert "load:guest-disk needs --target net" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_echo_kernel_reaches_the_guest_and_the_sender(tmp_path):
    from irqlab.runner.accel import AccelPlan
    from irqlab.targets.net import NetTarget
    args = build_parser().parse_args(["run", "--target", "net", "--net", "tap", "--echo",
                                      "kernel", "--samples", "10"])
    cfg = cmd_run.run_config(args)
    assert cfg.options.echo == "kernel" and cfg.params()["echo"] == "kernel"
    guest = NetTarget().spawn(cfg, AccelPlan("tcg", "test", True), "t", [])
    # the guest runs no responder, the sender speaks ICMP echo
    assert "irqlab.echo=--port;7010;--priority;90;--mode;kernel" in guest.guest_cmdline()
    assert guest.build_sender_argv()[-1] == "--icmp"
    default = cmd_run.run_config(build_parser().parse_args(["run", "--target", "net"]))
    assert default.options.echo == "user"
