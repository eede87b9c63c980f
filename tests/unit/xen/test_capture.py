"""The xentrace capture's pieces without booting Xen: dom0's init starts xentrace into
trcfwd when the plan traces (and not otherwise), the initramfs carries both, the Xen
target provides XentraceHook for --trace with a Linux dom0 (the host TraceHook
otherwise), and the channel: the real trcfwd (built for this host) writes a byte ring
into a file the hook maps and drains while it runs, losslessly through wrap-arounds,
into the run's archive."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from irqlab.runner import xen_dom0 as d0
from irqlab.runner.xen_dom0 import Dom0Plan, Dom0Trace, Dom0TraceChannel
from irqlab.trace.archive import xentrace_file_for
from irqlab.xen import capture
from irqlab.xen.capture import XentraceHook, read_xentrace
from irqlab.xen.records import TRC_LOST_RECORDS, encode_record, encode_window

RUNNING, RUNNABLE = 0, 1


def test_init_script_starts_xentrace_only_when_traced() -> None:
    plain = d0.init_script(Dom0Plan(probe_cmdline="x"))
    assert "xentrace" not in plain and "trcfwd" not in plain
    s = d0.init_script(Dom0Plan(probe_cmdline="x", trace=Dom0Trace(0xBFF000, 256, 50)))
    start = s.index("xentrace -D -e 0xbff000 -S 256 -s 50 /irqlab/xentrace.fifo")
    # before the domU exists, into trcfwd through the fifo, stopped after ringfwd
    assert start < s.index("xl create -p -q /irqlab/probe.cfg")
    assert "trcfwd $tshm < /irqlab/xentrace.fifo" in s
    assert s.index("ringfwd $domid") < s.index("kill -INT $(cat /irqlab/xentrace.pid)")
    assert f"stat -c %s $d/resource2) = {d0.TRACE_SHM_BYTES}" in s


def test_started_report_gives_the_record_clock() -> None:
    meta = d0.reports_metadata("irqlab-dom0: xentrace started uptime_cs=4 cpu_khz=2596148\n"
                               "irqlab-dom0: xentrace trcfwd: bytes=10 stalls=0\n")
    assert meta["xentrace_started"]["cpu_khz"] == "2596148"
    assert meta["xentrace"].startswith("trcfwd: bytes=10")


def test_the_xen_target_provides_the_xentrace_hook(tmp_path: Path) -> None:
    from irqlab.targets import get_target
    from irqlab.trace.capture import TraceHook

    xen = get_target("xen")
    with_dom0 = SimpleNamespace(dom0_linux=True)
    without = SimpleNamespace(dom0_linux=False)
    assert isinstance(xen.trace_capture(with_dom0, tmp_path / "d", 10**6), XentraceHook)
    assert isinstance(xen.trace_capture(without, tmp_path / "d", 10**6), TraceHook)
    assert isinstance(get_target("guest").trace_capture(None, tmp_path / "d", 10**6),
                      TraceHook)


class FileChannel(Dom0TraceChannel):
    """The process side of the channel, backed by a plain file instead of QEMU's memfd."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def trace_mem_path(self) -> str:
        return str(self.path)

    def trace_clock_hz(self) -> int | None:
        return 1_000_000_000


@pytest.fixture(scope="module")
def trcfwd(tmp_path_factory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc missing: run ./setup.sh --install-only")
    out = tmp_path_factory.mktemp("trcfwd") / "trcfwd"
    subprocess.run([gcc, "-O2", "-Wall", "-Werror", "-o", str(out), str(d0.TRCFWD_SRC)],
                   check=True)
    return out


def _trace(n: int) -> bytes:
    """n runstate changes of d1v0 on pCPU 0, and one lost-records record (7 lost)."""
    ev = 0x00021001
    recs = b"".join(encode_record(ev | (RUNNING if i % 2 else RUNNABLE) << 8
                                  | (RUNNABLE if i % 2 else RUNNING) << 4,
                                  (1 << 16,), 1000 + 10 * i) for i in range(n))
    recs += encode_record(TRC_LOST_RECORDS, (7, 0, 5, 0), 1000 + 10 * n)
    return encode_window(0, recs)


def test_channel_is_lossless_through_wraparounds(tmp_path: Path, trcfwd: Path,
                                                 monkeypatch) -> None:
    # A 64 KiB ring carrying ~1.6 MB: trcfwd must wait for the hook to drain (stalls)
    # and every byte must arrive in order.
    shm = tmp_path / "shm"
    shm.write_bytes(bytes(4096 + 65536))
    data = _trace(100_000)
    monkeypatch.setattr(capture, "READ_INTERVAL_S", 0.002)
    hook = XentraceHook(tmp_path / "irqlab.duckdb")
    hook.before_start()
    fwd = subprocess.Popen([str(trcfwd), str(shm)], stdin=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    # trcfwd writes its magic before the hook maps the file: wait for it (a fixed 50 ms
    # sleep raced a loaded host); 30 s is a hang guard
    end = time.monotonic() + 30
    while shm.read_bytes()[:8] != b"IRQLXTR1":
        assert fwd.poll() is None and time.monotonic() < end, fwd.stderr.read()
        time.sleep(0.005)
    hook.after_start(SimpleNamespace(run_id=3, process=FileChannel(shm)))
    writer = threading.Thread(target=lambda: (fwd.stdin.write(data), fwd.stdin.close()))
    writer.start()
    writer.join(30)
    assert fwd.wait(30) == 0
    hook.stop()
    meta = hook.metadata()
    assert meta["problems"] == []
    assert meta["complete"] and meta["channel_state"] == "done"
    assert meta["bytes_raw"] == len(data) and meta["stalls"] > 0
    assert meta["records"] == 100_002 and meta["lost_records"] == 7
    assert meta["first_tsc"] == 1000 and meta["tsc_hz"] == 1_000_000_000
    path = xentrace_file_for(tmp_path / "irqlab.duckdb", 3)
    assert meta["file"] == str(path)
    header, body = read_xentrace(path)
    assert body == data and header["run_id"] == 3 and header["lost_records"] == 7
    assert b"stalls=" in fwd.stderr.read()
    # a plain xentrace file (as xentrace writes it) reads as itself, without a header
    plain = tmp_path / "plain.trc"
    plain.write_bytes(data)
    assert read_xentrace(plain) == (None, data)
    header, mapped = read_xentrace(plain, mapped=True)       # irqlab xentrace maps it
    assert header is None and not isinstance(mapped, bytes) and mapped[:] == data
    # a run's capture (gzip, with irqlab's header) is read, never mapped
    assert read_xentrace(path, mapped=True) == read_xentrace(path)
    assert not [p for p in path.parent.iterdir() if p.name != path.name]   # no spool left
    os.unlink(path)
