"""``--target serial``: a QEMU guest running the x86-64 probe with sink=console on
``-serial pty`` stands in for a board on a desk. irqlab attaches after the guest has been
running for a while (the probe's repeated header lets it start there), stores exactly the
samples asked with none lost; killing QEMU (the board unplugged) fails the run, keeps the
data and says the port went away. Wrong inputs are told apart before or at boot."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time

import numpy as np
import pytest

from irqlab.measure.config import config_for_target
from irqlab.runner.machines import MACHINES, find_qboot
from irqlab.runner.process import die_with_parent
from irqlab.samples.console import frame_line
from irqlab.targets.serial import BoardConsoleReader, SerialTarget
from tests.conftest import run_cli
from tests.integration._helpers import stored_samples

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

X86 = MACHINES["x86_64"]


def _until_samples_flow(pty: str, timeout_s: float = 60.0) -> None:
    """Read the board's console until it prints sample frames (~IQS, lines): the guest
    runs and prints frames nobody stores before irqlab attaches. (A fixed 1.5 s sleep
    did not always cover a loaded host's boot; the timeout is a hang guard.)"""
    fd = os.open(pty, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        seen, end = b"", time.monotonic() + timeout_s
        while seen.count(b"~IQS,") < 2:
            assert time.monotonic() < end, f"no sample frame on {pty}: {seen[-300:]!r}"
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    seen = (seen + os.read(fd, 65536))[-65536:]
                except (BlockingIOError, OSError):
                    time.sleep(0.05)
    finally:
        os.close(fd)


class PtyBoard:
    """The probe in QEMU with its console on a pseudo-terminal: a "board"."""

    def __init__(self, cmdline: str) -> None:
        argv = [X86.qemu, "-m", "64M", "-nodefaults", "-display", "none", "-no-reboot",
                "-serial", "pty", "-monitor", "none", "-M", "pc", "-accel", "tcg",
                "-cpu", "max", "-kernel", str(X86.probe), "-append", cmdline]
        if find_qboot():
            argv[1:1] = ["-bios", find_qboot()]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, preexec_fn=die_with_parent)
        line = self.proc.stdout.readline()          # "char device redirected to ..."
        found = re.search(r"/dev/pts/\d+", line)
        assert found, f"QEMU did not report its pty: {line!r}"
        self.pty = found.group(0)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture
def board(probe_built):
    subprocess.run(["make", "-s", "-C", str(X86.probe.parents[2]), "ARCH=x86_64"],
                   check=True)
    b = PtyBoard("period_ns=1000000 idle=hlt samples=0 sink=console")
    yield b
    b.kill()


def test_late_attach_stores_exactly_the_samples_asked_none_lost(board, db):
    _until_samples_flow(board.pty)
    t0 = time.monotonic()
    res = run_cli(["run", "--target", "serial", "--serial-port", board.pty,
                   "--samples", "3000", "--window", "1s", "--stall-timeout", "30s",
                   "--json"], db, timeout=90)
    took_s = time.monotonic() - t0
    assert res.code == 0, res.stderr + res.stdout
    s = res.summary
    assert (s["status"], s["target"], s["samples"], s["lost"]) == ("ok", "serial", 3000, 0)
    assert s["arch"] == "x86_64" and s["accel"] == "board"
    assert len(res.windows) >= 2                   # windows came live, 1 s each
    rows = stored_samples(db, s["run_id"])
    assert len(rows["seq"]) == 3000
    # attached late: the first sample is not seq 0, and the sequence has no hole
    assert rows["seq"][0] > 0
    assert np.array_equal(rows["seq"], np.arange(rows["seq"][0], rows["seq"][0] + 3000))
    print(f"serial run: 3000 samples, first seq {rows['seq'][0]}, 0 lost, {took_s:.1f} s")


def test_board_unplugged_mid_run_fails_keeping_the_data(board, db):
    _until_samples_flow(board.pty)
    cli = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                            "serial", "--serial-port", board.pty, "--samples", "100000",
                            "--window", "1s", "--stall-timeout", "30s", "--json", "--db",
                            str(db)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Unplug once samples flow: the first window line (1000 samples) says they do.
        first, deadline = "", time.monotonic() + 60
        while '"type": "window"' not in first:
            assert time.monotonic() < deadline and cli.poll() is None, cli.stderr.read()
            if select.select([cli.stdout], [], [], 1.0)[0]:
                first = cli.stdout.readline()
        board.kill()
        out, err = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    summary = [ln for ln in out.splitlines() if '"type": "summary"' in ln]
    assert cli.returncode == 1 and summary, err + out
    assert '"status": "failed"' in summary[0]
    assert "serial port " + board.pty + " went away" in summary[0]
    s = json.loads(summary[0])
    assert s["samples"] > 500 and s["lost"] == 0
    assert len(stored_samples(db, s["run_id"])["seq"]) == s["samples"]


def test_silent_port_says_so(db):
    """A port where nothing arrives: the run fails at boot naming the likely causes."""
    master, slave = os.openpty()
    try:
        res = run_cli(["run", "--target", "serial", "--serial-port", os.ttyname(slave),
                       "--samples", "10", "--boot-timeout", "2s", "--json"], db, timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    assert res.code == 1
    assert "nothing arrived on /dev/pts/" in res.summary["message"]
    assert "not running the probe" in res.summary["message"]


@pytest.mark.parametrize("data, says", [
    (b"U-Boot 2024.01\r\n=> ", "not booted with sink=console; last text: '"),
    (bytes(range(128, 256)) * 4, "not text: wrong --baud (given 115200)?"),
    (b"".join(frame_line("S", n, ["10", "0", "1;2"]) for n in range(5, 9)),
     "4 irqlab frames arrived but no header frame"),
])
def test_what_arrived_tells_why_no_header(data, says):
    """Wrong baud, a board without the probe, an old probe: said apart (a real pty)."""
    master, slave = os.openpty()
    target = SerialTarget()
    cfg = config_for_target("serial", {"serial_port": os.ttyname(slave)})
    port = target.spawn(cfg, target.accel_plans(cfg)[0], "t", [])
    try:
        port.start()
        os.write(master, data)
        source = target.open_source(cfg, port)
        end = time.monotonic() + 10.0            # the reader thread takes it all in
        while time.monotonic() < end and port.bytes_read < len(data):
            time.sleep(0.05)
        assert not source.magic_ok()             # decodes what arrived
        assert says in target.boot_failure_detail(port)
    finally:
        port.stop()
        os.close(master)
        os.close(slave)


def test_bad_serial_options_exit_2(db, tmp_path):
    res = run_cli(["run", "--target", "serial"], db, timeout=60)
    assert res.code == 2 and "--serial-port" in res.stderr
    res = run_cli(["run", "--target", "serial", "--serial-port",
                   str(tmp_path / "ttyNONE")], db, timeout=60)
    assert res.code == 2 and "does not exist" in res.stderr
    res = run_cli(["run", "--target", "serial", "--serial-port", "/dev/null",
                   "--baud", "0"], db, timeout=60)
    assert res.code == 2 and "--baud" in res.stderr
    res = run_cli(["run", "--target", "serial", "--serial-port", "/dev/null",
                   "--idle", "poll"], db, timeout=60)
    assert res.code == 2 and "board" in res.stderr


def test_period_mismatch_is_told_with_the_fix():
    """The board's probe runs at its own period: a different --period is pointed out."""
    hdr = frame_line("H", 0, ["1", "1", "3b9aca00", "4", "2", "f4240", "1", "0", "0",
                              "10000", "0", "irqlab-probe-x"])     # 1 GHz, 1 ms
    for period_ns, says in ((500_000, ["the probe on the board runs at a 1 ms period, "
                                       "not the 500 us of --period: windows and the "
                                       "watchdog use --period, so give --period 1ms"]),
                            (1_000_000, [])):
        reader = BoardConsoleReader(None, period_ns)
        reader.feed(hdr)
        assert reader.notices() == says
