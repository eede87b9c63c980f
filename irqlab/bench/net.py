"""``irqlab bench net``: the net target's own cost, the round trip its sender measures on
loopback with no guest, against ``sockperf ping-pong`` on the same path in the same run.

Each round runs, one after another in ABBA order, on 127.0.0.1 with the same rate (one
64-byte packet per period) and length: irqlab-netsend against irqlab-echo (as a run
records it: kernel timestamps), the same with ``--no-kernel-ts`` (user space to user
space, sockperf's own definition), and ``sockperf ping-pong --full-rtt`` against
``sockperf server``; every program at SCHED_FIFO 90 (sockperf under ``chrt``), the
responders on one CPU and the senders on another (``taskset``; our sender's two threads
with ``--cpu``), so the sides differ only in the programs: left to the scheduler, the
placement of three threads against sockperf's two decided the result (a wake-up across
CPUs costs ~15 us on the development VM, measured). Round trips in ns, percentiles by
nearest rank over every packet (sockperf's ``--full-log``). Goal: median p50 ratio
ours/sockperf <= 1.0 (the sender adds nothing to what it measures).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.runner.net import ECHO, RING_CAPACITY, free_udp_port, sender_argv
from irqlab.runner.process import ChildProcess, MeasuredProcess
from irqlab.samples.multiring import layout_bytes
from irqlab.samples.net import NetSource

PRIORITY = 90
PAYLOAD = 64


def _nearest_rank(sorted_values: np.ndarray, q: float) -> int:
    n = len(sorted_values)
    return int(sorted_values[max(0, min(n - 1, int(np.ceil(q * n)) - 1))])


def _figures(rtt_ns: np.ndarray) -> dict[str, Any]:
    s = np.sort(rtt_ns)
    return {"samples": len(s), "p50_ns": _nearest_rank(s, 0.5),
            "p99_ns": _nearest_rank(s, 0.99), "max_ns": int(s[-1])}


class _Sender(MeasuredProcess):
    """irqlab-netsend alone, its memory shared with the reader."""

    program = "irqlab-netsend"

    def start_with(self, argv_of_fd) -> None:
        self._create_memfd("bench-net", layout_bytes(1, RING_CAPACITY))
        self._spawn(argv_of_fd(self.mem_fd))


def _placement() -> tuple[int, int]:
    """(responder CPU, sender CPU): two different CPUs where this process may run."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[0], cpus[-1]


def _ours_round(duration_s: float, period_ns: int, kernel_ts: bool) -> dict[str, Any]:
    """irqlab-netsend against irqlab-echo on loopback, read through NetSource."""
    port = free_udp_port()
    server_cpu, client_cpu = _placement()
    echo = ChildProcess(["taskset", "-c", str(server_cpu), str(ECHO), "--addr", "127.0.0.1",
                         "--port", str(port), "--priority", str(PRIORITY)])
    sender = _Sender()
    packets = int(duration_s * 1e9 // period_ns)
    extra = ["--cpu", str(client_cpu)] + ([] if kernel_ts else ["--no-kernel-ts"])
    reader = None
    chunks = []
    try:
        sender.start_with(lambda fd: sender_argv(
            "127.0.0.1", port, fd, period_ns=period_ns, payload_bytes=PAYLOAD,
            packets=packets, max_duration_ns=int(duration_s * 1e9) + 30_000_000_000,
            priority=PRIORITY, rt_fallback=False) + extra)
        end = time.monotonic() + duration_s + 30
        while time.monotonic() < end:
            if reader is None:
                reader = NetSource(sender.mem_path)
            if reader.magic_ok():
                chunks.append(reader.poll().latency_tick)
                if reader.state() in ("done", "error") or sender.exit_code() is not None:
                    reader.finish()
                    chunks.append(reader.poll().latency_tick)
                    break
            time.sleep(0.05)
        if reader is None or reader.state() != "done":
            raise RuntimeError(f"irqlab-netsend failed: {sender.stderr().strip()[-300:]}")
        block = reader.net_block() or {}
        lost = reader.lost
    finally:
        if reader is not None:
            reader.close()
        sender.stop()
        echo.stop()
    return {**_figures(np.concatenate(chunks)), "lost": lost,
            "kernel_ts": block.get("kernel_ts"), "user_ts": block.get("user_ts")}


def _sockperf_round(duration_s: float, period_ns: int) -> dict[str, Any]:
    """`sockperf ping-pong --full-rtt` against `sockperf server`, both at SCHED_FIFO."""
    exe, chrt = shutil.which("sockperf"), shutil.which("chrt")
    if exe is None or chrt is None:
        raise RuntimeError("sockperf not found: install Debian's sockperf "
                           "(./setup.sh --install-only does)")
    port = free_udp_port()
    server_cpu, client_cpu = _placement()
    rt = [chrt, "-f", str(PRIORITY)]
    server = ChildProcess(["taskset", "-c", str(server_cpu)] + rt
                          + [exe, "server", "-i", "127.0.0.1", "-p", str(port)])
    try:
        time.sleep(0.3)                    # it binds before the client's warm-up
        with tempfile.TemporaryDirectory(prefix="irqlab-sockperf-") as tmp:
            log = Path(tmp) / "full.log"
            # sockperf drops its first 400 ms as warm-up: run that much longer.
            argv = ["taskset", "-c", str(client_cpu)] + rt + [
                    exe, "ping-pong", "-i", "127.0.0.1", "-p", str(port),
                         "-m", str(PAYLOAD), f"--mps={int(1e9 // period_ns)}",
                         "-t", f"{duration_s + 0.4:g}", "--full-rtt", "--full-log", str(log)]
            proc = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=duration_s + 60)
            if proc.returncode != 0 or not log.exists():
                raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): "
                                   f"{proc.stderr.strip()[-300:]}")
            text = log.read_text().splitlines()
    finally:
        server.stop()
    start = next(i for i, ln in enumerate(text) if ln.startswith("packet, txTime"))
    rtt_us = [float(ln.split(",")[3]) for ln in text[start + 1:] if ln.count(",") == 3]
    return {**_figures(np.round(np.array(rtt_us) * 1000).astype(np.int64)),
            "argv": argv}


def bench_net(rounds: int = 5, duration_s: float = 10.0,
              period_ns: int = 1_000_000) -> list[dict[str, Any]]:
    """Rounds of (ours, ours in user space, sockperf), ABBA order; per round p50/p99/max
    of each and the p50 ratios ours/sockperf; last the median ratio against the goal."""
    figures: list[dict[str, Any]] = []
    ratios, user_ratios = [], []
    sides = ("ours", "ours_user", "sockperf")
    for i in range(rounds):
        order = sides if i % 2 == 0 else tuple(reversed(sides))
        got: dict[str, dict[str, Any]] = {}
        for who in order:
            got[who] = (_sockperf_round(duration_s, period_ns) if who == "sockperf"
                        else _ours_round(duration_s, period_ns, who == "ours"))
        base = got["sockperf"]["p50_ns"]
        ratio = got["ours"]["p50_ns"] / base if base else float("nan")
        user_ratio = got["ours_user"]["p50_ns"] / base if base else float("nan")
        ratios.append(ratio)
        user_ratios.append(user_ratio)
        figures.append({"name": f"net round {i + 1}", "value": ratio,
                        "unit": "p50 ratio ours/sockperf", "user_ts_ratio": user_ratio,
                        "duration_s": duration_s, "period_ns": period_ns,
                        "order": list(order),
                        **{who: {k: v for k, v in got[who].items() if k != "argv"}
                           for who in sides}})
    median = float(np.median(ratios))
    figures.append({"name": "net", "value": median,
                    "unit": "median p50 ratio ours (kernel stamps)/sockperf ping-pong",
                    "goal": 1.0, "met": bool(median <= 1.0), "rounds": rounds,
                    "responder_cpu": _placement()[0], "sender_cpu": _placement()[1],
                    "user_ts_median_ratio": float(np.median(user_ratios))})
    return figures
