"""The x86-64 guest probe in a QEMU VM: command line, process and guest memory.

Guest RAM is a memfd we create and hand to QEMU (``memory-backend-file,share=on`` on
``/proc/self/fd/N``): the host maps the same pages and reads the sample ring without the
guest ever exiting, and no file is left on disk whatever happens to either process.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from irqlab.runner.accel import AccelPlan
from irqlab.runner.machines import Machine, machine_for

_PR_SET_PDEATHSIG = 1
_OUTPUT_KEEP_BYTES = 64 * 1024


@dataclass
class GuestConfig:
    """Everything the probe and its VM are started with."""

    period_ns: int
    idle: str = "hlt"
    inject_irqoff_ns: int = 0
    inject_every: int = 0
    samples: int = 0
    timer: str = "auto"
    memory_mib: int = 64
    arch: str = "x86_64"
    probe: Path | None = None
    extra_args: str = ""
    extra_qemu_args: list[str] = field(default_factory=list)
    gic: int | None = None          # arm64: GIC version (None = the machine's default)
    sink: str = "ring"              # how samples come back: ring (guest RAM) or console

    @property
    def machine(self) -> Machine:
        return machine_for(self.arch).configured(gic=self.gic)

    @property
    def probe_path(self) -> Path:
        return self.probe or self.machine.probe

    def cmdline(self) -> str:
        """The probe's boot parameters (docs/formats.md section 1)."""
        return (f"period_ns={self.period_ns} idle={self.idle} "
                f"inject_irqoff_ns={self.inject_irqoff_ns} inject_every={self.inject_every} "
                f"samples={self.samples} timer={self.timer}"
                + (f" sink={self.sink}" if self.sink != "ring" else "")
                + (f" {self.extra_args}" if self.extra_args else ""))


class _Tail:
    """Collects the last bytes of a pipe in a thread (bounded memory)."""

    def __init__(self, stream) -> None:
        self.data = bytearray()
        self.total = 0      # bytes seen since the start: positions for read_from()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream) -> None:
        for chunk in iter(lambda: stream.read1(4096), b""):
            with self._lock:
                self.data += chunk
                self.total += len(chunk)
                if len(self.data) > _OUTPUT_KEEP_BYTES:
                    del self.data[:len(self.data) - _OUTPUT_KEEP_BYTES]

    def read_from(self, pos: int, wait_eof_s: float = 0.0) -> tuple[bytes, int, int]:
        """Bytes after stream position ``pos``: (data, new position, bytes dropped).

        Memory stays bounded: a reader more than the kept tail behind loses the oldest
        bytes and is told how many. ``wait_eof_s`` first waits for the pipe to close
        (the process has exited), so the last output is not missed."""
        if wait_eof_s:
            self._thread.join(wait_eof_s)
        with self._lock:
            start = self.total - len(self.data)
            dropped = max(0, start - pos)
            data = bytes(self.data[max(0, pos - start):])
            return data, self.total, dropped

    def text(self, timeout_s: float = 1.0) -> str:
        self._thread.join(timeout_s)
        return self.data.decode("utf-8", "replace")


def _die_with_parent() -> None:
    """Child pre-exec: get SIGTERM if irqlab dies, so no QEMU outlives it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class QemuGuest:
    """A running QEMU process with the probe and its shared guest memory."""

    config: GuestConfig
    plan: AccelPlan
    icount: bool = False
    name: str = "irqlab"
    argv: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    mem_fd: int = -1
    _stdout: _Tail | None = None
    _stderr: _Tail | None = None

    def build_argv(self) -> list[str]:
        cfg = self.config
        size = f"{cfg.memory_mib}M"
        return ([cfg.machine.qemu, "-name", f"{self.name},debug-threads=on", "-m", size,
                 "-object", f"memory-backend-file,id=irqlab-mem,size={size},"
                            f"mem-path=/proc/self/fd/{self.mem_fd},share=on",
                 "-machine", "memory-backend=irqlab-mem",
                 "-nodefaults", "-display", "none", "-no-reboot",
                 "-serial", "stdio", "-monitor", "none"]
                + cfg.machine.argv(self.plan, self.icount)
                + cfg.extra_qemu_args
                + ["-kernel", str(cfg.probe_path), "-append", cfg.cmdline()])

    def start(self) -> None:
        """Create guest memory and start QEMU; raises OSError with the reason."""
        machine = self.config.machine
        if not self.config.probe_path.exists():
            raise FileNotFoundError(
                f"guest probe {self.config.probe_path} is not built: run `make -C "
                f"probes/guest` (or the README's set-up command)")
        if shutil.which(machine.qemu) is None:
            raise FileNotFoundError(f"{machine.qemu} not found: {machine.install_hint}")
        self.mem_fd = os.memfd_create("irqlab-guest-ram", 0)
        os.ftruncate(self.mem_fd, self.config.memory_mib << 20)
        self.argv = self.build_argv()
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=(self.mem_fd,), start_new_session=True,
            preexec_fn=_die_with_parent)
        self._stdout = _Tail(self.proc.stdout)
        self._stderr = _Tail(self.proc.stderr)

    @property
    def mem_path(self) -> str:
        return f"/proc/self/fd/{self.mem_fd}"

    def exit_code(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def exited_done(self, code: int) -> bool:
        return code in self.config.machine.done_exit_codes

    def exited_error(self, code: int) -> bool:
        return code in self.config.machine.error_exit_codes

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """Terminate QEMU (only the process we started) and free guest memory."""
        code = None
        if self.proc:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            code = self.proc.returncode
        if self.mem_fd >= 0:
            os.close(self.mem_fd)
            self.mem_fd = -1
        return code

    def serial(self) -> str:
        return self._stdout.text() if self._stdout else ""

    def serial_read(self, pos: int) -> tuple[bytes, int, int]:
        """Serial output after stream position ``pos`` (see _Tail.read_from); once QEMU
        has exited, waits briefly for the pipe's last bytes."""
        if not self._stdout:
            return b"", pos, 0
        exited = self.exit_code() is not None
        return self._stdout.read_from(pos, wait_eof_s=1.0 if exited else 0.0)

    def stderr(self) -> str:
        return self._stderr.text() if self._stderr else ""
