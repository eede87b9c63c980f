"""The child process behind every target (QEMU, irqlab-native) and what targets share.

A target is one child irqlab starts and owns: in its own session (a Ctrl-C on the terminal
reaches irqlab alone, which then stops the child in order), with PR_SET_PDEATHSIG so it
never outlives irqlab, and with stdout and stderr drained by threads into bounded tails
(a child blocked on a full pipe would stop producing samples). :class:`MeasuredProcess`
adds the optional shared memory and scratch directory, and the interface irqlab.measure
runs every target through (start, exit_code, exited_done, exited_error, stop, serial,
serial_read, stderr, argv, proc, mem_path).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from irqlab.runner.scratch import ScratchDir
from irqlab.samples.layout import STATE_DONE, STATE_OFFSET

_PR_SET_PDEATHSIG = 1
_OUTPUT_KEEP_BYTES = 64 * 1024


class OutputTail:
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


def die_with_parent() -> None:
    """Child pre-exec: get SIGTERM if irqlab dies, so no child outlives it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ChildProcess:
    """A started child: its Popen and the tails of its stdout and stderr.

    ``enter`` runs in the child before it executes ``argv`` (e.g. joining the network
    namespace irqlab made for the run); it raises OSError to make the start fail."""

    def __init__(self, argv: list[str], pass_fds: tuple[int, ...] = (),
                 enter: Callable[[], None] | None = None) -> None:
        def pre_exec() -> None:
            if enter is not None:
                enter()
            die_with_parent()

        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=pass_fds, start_new_session=True,
            preexec_fn=pre_exec if enter is not None else die_with_parent)
        self.stdout = OutputTail(self.proc.stdout)
        self.stderr = OutputTail(self.proc.stderr)

    def poll(self) -> int | None:
        return self.proc.poll()

    def stop(self, timeout_s: float = 5.0) -> int:
        """SIGTERM (QEMU quits; irqlab-native stops cleanly within a period), then SIGKILL
        after ``timeout_s``; the exit code. Only this process, never its group: irqlab
        did not start whatever else may be in it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def marked_lines(text: str, mark: str) -> list[tuple[str, str]]:
    """The ``MARK KEY REST`` lines a guest's init prints on the console (anywhere in a
    line: the kernel may prefix it) -> [(key, rest)], in order."""
    out = []
    for line in text.splitlines():
        i = line.find(mark)
        if i < 0:
            continue
        key, _, rest = line[i + len(mark):].strip().partition(" ")
        out.append((key, rest.strip()))
    return out


@dataclass
class MeasuredProcess:
    """The process that hosts the probe (QEMU, Xen in QEMU, the native probe, a board's
    console reader): one child, an optional memfd the host reads samples from, an
    optional scratch directory, all released by :meth:`stop`.

    A subclass's ``start()`` checks its prerequisites, calls :meth:`_create_memfd` and
    :meth:`_workdir` as it needs, then :meth:`_spawn`; it adds ``exited_done`` and
    ``exited_error`` (what the child's exit code means). Fields here are run state, not
    constructor arguments, so subclasses keep their own positional parameters."""

    argv: list[str] = field(default_factory=list, init=False)
    mem_fd: int = field(default=-1, init=False)
    _child: ChildProcess | None = field(default=None, init=False, repr=False)
    _tmp: ScratchDir | None = field(default=None, init=False, repr=False)

    @property
    def proc(self) -> subprocess.Popen | None:
        """The child (knobs and trace capture need its pid); None before start()."""
        return self._child.proc if self._child else None

    def peer_pids(self) -> list[int]:
        """Other host processes on the measured path (the net target's sender): a trace
        capture records their threads beside the VMM's. None by default."""
        return []

    @property
    def mem_path(self) -> str:
        return f"/proc/self/fd/{self.mem_fd}"

    def _create_memfd(self, name: str, size: int) -> None:
        """The shared memory, handed to the child by fd: a memfd leaves no file on disk
        whatever happens to either process."""
        self.mem_fd = os.memfd_create(name, 0)
        os.ftruncate(self.mem_fd, size)

    def _workdir(self, prefix: str) -> Path:
        """A scratch directory that lives until stop() (initramfs, device tree...);
        journalled, so the next irqlab start removes it after a kill -9."""
        self._tmp = ScratchDir(prefix)
        return Path(self._tmp.name)

    def _spawn(self, argv: list[str], extra_fds: tuple[int, ...] = ()) -> None:
        """Start the child; it inherits the memfd, if there is one, and ``extra_fds``.
        ``argv`` is kept first, so a run that fails to start still records what it
        tried."""
        self.argv = argv
        self._child = ChildProcess(argv, ((self.mem_fd,) if self.mem_fd >= 0 else ())
                                   + extra_fds)

    def _await_after_done(self, said_done: Callable[[], bool], timeout_s: float) -> None:
        """Once the probe's ring (at the start of the memfd, as a forwarder copies it
        there) says done, give the child up to ``timeout_s`` to report the end of what
        it still writes (a trace's last pages): until ``said_done()`` or its exit. A run
        stopped early does not wait."""
        if self.mem_fd < 0 or int.from_bytes(os.pread(self.mem_fd, 4, STATE_OFFSET),
                                              "little") != STATE_DONE:
            return
        end = time.monotonic() + timeout_s
        while (self._child is not None and self._child.proc.poll() is None
               and time.monotonic() < end):
            if said_done():
                return
            time.sleep(0.05)

    def start(self) -> None:
        """Check prerequisites and start the child; OSError (with the fix) if it cannot."""
        raise NotImplementedError(f"{type(self).__name__} must define start()")

    program = "QEMU"        # what the run's messages call the child

    def exit_description(self, code: int) -> str:
        """How a failure message says the child ended (e.g. "QEMU exited with code 1")."""
        return f"{self.program} exited with code {code}"

    def exited_done(self, code: int) -> bool:
        """Does exit code ``code`` mean the probe finished its samples?"""
        return code == 0

    def exited_error(self, code: int) -> bool:
        """Does exit code ``code`` mean the probe reported an error?"""
        return False

    def exit_code(self) -> int | None:
        return self._child.poll() if self._child else None

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """Stop the child (see ChildProcess.stop); free the memfd and scratch directory."""
        code = self._child.stop(timeout_s) if self._child else None
        if self.mem_fd >= 0:
            os.close(self.mem_fd)
            self.mem_fd = -1
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        return code

    def serial(self) -> str:
        return self._child.stdout.text() if self._child else ""

    def serial_read(self, pos: int) -> tuple[bytes, int, int]:
        """Serial output after stream position ``pos`` (see OutputTail.read_from); once
        the child has exited, waits briefly for the pipe's last bytes."""
        if not self._child:
            return b"", pos, 0
        exited = self.exit_code() is not None
        return self._child.stdout.read_from(pos, wait_eof_s=1.0 if exited else 0.0)

    def stderr(self) -> str:
        return self._child.stderr.text() if self._child else ""


# The name before 2026-11-26, when it was easy to confuse with irqlab.targets.base.Target
# (a kind of measured system; this is the one process a run of it starts).
ProcessTarget = MeasuredProcess
