"""The net target's run flow without QEMU: the real sender (irqlab-netsend) and the real
responder (irqlab-echo) on 127.0.0.1, one host process each.

The target is :class:`irqlab.targets.net.NetTarget` itself (options, checks, its
NetSource and the end-of-run drain); only the process differs: the responder runs on
this host's loopback instead of inside a guest, bound to 127.0.0.1 so nothing outside
can reach it. ``sender_extra`` adds sender options (a short reply timeout, user-space
timestamps) that a test needs.
"""

from __future__ import annotations

import subprocess
from typing import Any

from irqlab.runner.accel import AccelPlan
from irqlab.runner.net import ECHO, NETSEND, RING_CAPACITY, free_udp_port, sender_argv
from irqlab.runner.process import ChildProcess, MeasuredProcess
from irqlab.samples.multiring import layout_bytes
from irqlab.samples.net import NetSource
from irqlab.samples.source import SampleSource
from irqlab.targets.net import NetTarget


def build_net_programs() -> None:
    if not (NETSEND.exists() and ECHO.exists()):
        subprocess.run(["make", "-s", "-C", str(NETSEND.parents[1])], check=True)


class LoopbackNet(MeasuredProcess):
    """irqlab-echo on 127.0.0.1 and irqlab-netsend sending to it."""

    program = "irqlab-netsend"

    def __init__(self, cfg: Any, sender_extra: list[str]) -> None:
        super().__init__()
        self.cfg, self.sender_extra = cfg, sender_extra
        self._echo: ChildProcess | None = None

    def start(self) -> None:
        opts, port = self.cfg.options, free_udp_port()
        echo = [str(ECHO), "--addr", "127.0.0.1", "--port", str(port), "--priority", "10"]
        if opts.inject_every:
            echo += ["--inject-delay-ns", str(opts.inject_delay_ns),
                     "--inject-every", str(opts.inject_every)]
        self._echo = ChildProcess(echo)
        self._create_memfd("net-test", layout_bytes(1, RING_CAPACITY))
        packets = self.cfg.target_samples() or 0
        self._spawn(sender_argv("127.0.0.1", port, self.mem_fd, period_ns=self.cfg.period_ns,
                                payload_bytes=opts.payload_bytes, packets=packets,
                                max_duration_ns=60_000_000_000, priority=opts.priority,
                                rt_fallback=True, inject_delay_ns=opts.inject_delay_ns,
                                inject_every=opts.inject_every) + self.sender_extra)

    def request_stop(self) -> None:
        if self._child is not None and self._child.poll() is None:
            self._child.proc.terminate()

    def stop(self, timeout_s: float = 5.0) -> int | None:
        code = super().stop(timeout_s)
        if self._echo is not None:
            self._echo.stop(timeout_s)
        return code


class LoopbackNetTarget(NetTarget):
    """NetTarget with its responder on loopback (see the module docstring)."""

    name = "loopnet"

    def __init__(self, sender_extra: list[str] | None = None,
                 finish_wait_s: float = 3.0) -> None:
        self.sender_extra = sender_extra or []
        self.finish_wait_s = finish_wait_s

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        return [AccelPlan("none", "loopback", False)]

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        return LoopbackNet(cfg, self.sender_extra)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        assert isinstance(process, LoopbackNet)
        return NetSource(process.mem_path, on_finish=process.request_stop,
                         finish_wait_s=self.finish_wait_s)

    def process_metadata(self, process: MeasuredProcess) -> dict[str, Any]:
        return {}
