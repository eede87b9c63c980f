"""``--target serial``: a board already running the probe with ``sink=console``, read live
from its serial console (pyserial: a tty, or a ``rfc2217://`` / ``socket://`` URL of a
serial server).

irqlab does not boot the board here; it attaches to a console that may have been
running for hours. The probe repeats its header frame every second
(docs/formats.md section 7), so the reader (:class:`ConsoleReader` with ``attach``)
synchronises on the first good frame: what came before attaching is not lost, a gap after
it is. There is no child process: :class:`ConsoleStream` gives the run flow what a
:class:`MeasuredProcess` gives (start, exit_code, stop, serial_read, ...) with a reader
thread feeding a bounded buffer; the "exit code" is an errno once the port goes away
(USB unplugged, serial server gone, the QEMU behind a pty killed).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from dataclasses import dataclass
from typing import Any, Callable

from irqlab.durations import format_ns
from irqlab.runner.accel import AccelPlan
from irqlab.runner.process import OutputTail, MeasuredProcess
from irqlab.samples.console import FRAME_MARK, ConsoleReader
from irqlab.samples.source import SampleSource
from irqlab.targets.base import Option, Target, TargetOptions, TargetUsageError

DEFAULT_BAUD = 115_200
_READ_TIMEOUT_S = 0.2          # the reader thread checks for stop() this often
_CLOSE_TIMEOUT_S = 2.0

SERIAL_PORT = Option("--serial-port", "serial_port", dict(
    metavar="DEV", help="the board's console, e.g. /dev/ttyUSB0 (or a pyserial URL "
                        "such as rfc2217://host:port)"))
BAUD = Option("--baud", "baud", dict(
    type=int, metavar="N", help=f"baud rate (default {DEFAULT_BAUD})"))

# Reason each probe option makes no sense here (the board was booted without irqlab).
_BOOTED_ELSEWHERE = "the board runs its probe already; set it in the board's boot line"
WHY_NOT_BOARD = {dest: _BOOTED_ELSEWHERE for dest in (
    "idle", "inject_irqoff", "inject_every", "timer", "gic", "sink", "memory", "probe")}
WHY_NOT_BOARD.update(accel="a board has no accelerator to choose",
                     icount="a board's time is real, not virtual")


class PortGone(OSError):
    """The console went away while it was read (unplugged, server gone, QEMU killed)."""


class _ChunkStream:
    """A blocking ``read1`` over ``read_chunk`` for :class:`OutputTail`: returns b"" at
    the end (stop asked, or the port failed; the error is kept)."""

    def __init__(self, read_chunk: Callable[[], bytes], stop: threading.Event) -> None:
        self.read_chunk, self.stop = read_chunk, stop
        self.error: OSError | None = None

    def read1(self, _size: int) -> bytes:
        while not self.stop.is_set():
            try:
                data = self.read_chunk()
            except OSError as exc:      # pyserial's SerialException is an OSError
                self.error = exc
                return b""
            if data:
                return data
        return b""


class ConsoleStream(MeasuredProcess):
    """A board console read by a thread into a bounded buffer, behind the MeasuredProcess
    interface the run flow uses. Subclasses open the console (``_open``), read a chunk
    (``_read_chunk``: b"" on timeout, OSError when it is gone) and close it
    (``_close``)."""

    what = "console"

    def __init__(self) -> None:
        super().__init__()
        self._stop = threading.Event()
        self._stream: _ChunkStream | None = None
        self._tail: OutputTail | None = None
        self._code: int | None = None
        self.reader: ConsoleReader | None = None     # set by the target's open_source

    # -- what subclasses provide ---------------------------------------------------------

    def _open(self) -> None:
        raise NotImplementedError

    def _read_chunk(self) -> bytes:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    # -- the MeasuredProcess interface -----------------------------------------------------

    def start(self) -> None:
        self._open()
        self._start_reader()

    def _start_reader(self) -> None:
        """Start the reader thread (once; a subclass may start it inside _open)."""
        if self._tail is None:
            self._stream = _ChunkStream(self._read_chunk, self._stop)
            self._tail = OutputTail(self._stream)

    def exit_code(self) -> int | None:
        """None while the console is read; an errno (EIO if none) once it went away."""
        if self._code is None and self._stream is not None and self._stream.error:
            self._code = self._stream.error.errno or errno.EIO
        return self._code

    def exited_done(self, code: int) -> bool:
        return False        # a board's console never "finishes": losing it is a failure

    def stop(self, timeout_s: float = _CLOSE_TIMEOUT_S) -> int | None:
        """Stop reading and close the console; the errno if it had gone away, else 0."""
        code = self.exit_code()
        self._stop.set()
        if self._tail is not None:
            self._tail.text(timeout_s)          # joins the reader thread
        try:
            self._close()
        except OSError:
            pass
        return code if code is not None else 0

    @property
    def bytes_read(self) -> int:
        return self._tail.total if self._tail else 0

    def received(self) -> bytes:
        """The last bytes received (bounded)."""
        return bytes(self._tail.data) if self._tail else b""

    def serial(self) -> str:
        return self._tail.text(0.0) if self._tail else ""

    def serial_read(self, pos: int) -> tuple[bytes, int, int]:
        if self._tail is None:
            return b"", pos, 0
        return self._tail.read_from(pos, wait_eof_s=0.5 if self.exit_code() else 0.0)

    def exit_description(self, code: int) -> str:
        return f"the console stopped (errno {code})"

    def stderr(self) -> str:
        """Why the console went away (the run's failure message quotes it)."""
        err = self._stream.error if self._stream else None
        if err is None:
            return ""
        return (f"{self.what} went away after {self.bytes_read} bytes ({err}); "
                f"the samples read until then are kept")


class SerialPort(ConsoleStream):
    """A serial device (or pyserial URL) read by a thread."""

    def __init__(self, port: str, baud: int) -> None:
        super().__init__()
        self.port, self.baud = port, baud
        self.what = f"serial port {port}"
        self._ser: Any = None

    def _open(self) -> None:
        self.argv = ["serial", self.port, f"baud={self.baud}"]
        try:
            import serial  # pyserial
        except ImportError:
            raise OSError("pyserial is not installed: run ./setup.sh (or pip install "
                          "pyserial)") from None
        try:
            # exclusive: a second reader (irqlab, picocom) would steal bytes and fake loss
            self._ser = serial.serial_for_url(self.port, baudrate=self.baud,
                                              timeout=_READ_TIMEOUT_S, exclusive=True)
        except (OSError, ValueError) as exc:
            raise OSError(f"cannot open serial port {self.port} at {self.baud} baud: "
                          f"{exc}; check --serial-port (ls /dev/serial/by-id/), that no "
                          f"other program holds it, and your access (group dialout)"
                          ) from None

    def _read_chunk(self) -> bytes:
        ser = self._ser
        data = ser.read(max(1, ser.in_waiting))
        if not data and not ser.is_open:
            raise PortGone(errno.ENODEV, "port closed")
        return data

    def _close(self) -> None:
        if self._ser is not None:
            self._ser.close()


@dataclass
class SerialOptions(TargetOptions):
    """A board's serial console."""

    arch: str = "unknown"          # the probe's header says, once it is read
    serial_port: str = ""
    baud: int = DEFAULT_BAUD


class BoardConsoleReader(ConsoleReader):
    """The console decoder of a board run: attaches late, and tells the user when the
    probe's own period differs from ``--period`` (windows and watchdog use the latter)."""

    def __init__(self, read: Any, period_ns: int) -> None:
        super().__init__(read, attach=True)
        self.period_ns = period_ns

    def notices(self) -> list[str]:
        if not self.magic_ok():
            return []
        hdr = self.header()
        probe_ns = hdr.period_tick * 1_000_000_000 // hdr.tick_hz
        if abs(probe_ns - self.period_ns) * 100 > self.period_ns:
            probe, given = format_ns(probe_ns, "exact"), format_ns(self.period_ns, "exact")
            return [f"the probe on the board runs at a {probe} period, not the {given} of "
                    f"--period: windows and the watchdog use --period, so give --period "
                    f"{probe.replace(' ', '')}"]
        return []


def port_problem(path: str) -> str | None:
    """What ``path`` is if it is no tty (a regular file, a directory, /dev/null), or
    None. Checked before the run starts: pyserial opens /dev/null or a file without
    complaint, and the run then fails with an empty table. A character device is looked
    up in sysfs (its class must be tty) so a real port is not opened twice; a device
    sysfs does not list (a pty's /dev/pts/N) is opened without becoming the controlling
    terminal and asked isatty()."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"not usable ({exc.strerror})"
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    if stat.S_ISREG(st.st_mode):
        return "a regular file"
    if not stat.S_ISCHR(st.st_mode):
        return "neither a tty nor a character device"
    sysfs = f"/sys/dev/char/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}/subsystem"
    if os.path.exists(sysfs):
        cls = os.path.basename(os.path.realpath(sysfs))
        return None if cls == "tty" else f"a character device of class {cls}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None            # e.g. no access: opening it for the run says so
    try:
        return None if os.isatty(fd) else "a character device that is no tty"
    finally:
        os.close(fd)


def check_baud(baud: int) -> int:
    if not 50 <= baud <= 20_000_000:
        raise TargetUsageError(f"--baud {baud} is not a baud rate: use e.g. 115200")
    return baud


def explain_silence(stream: ConsoleStream, reader: ConsoleReader | None, where: str,
                    settings: str) -> str:
    """Why no probe header arrived on a console, from what did arrive."""
    data = stream.received()
    if stream.exit_code() is not None:
        return stream.stderr()
    if not data:
        return (f"nothing arrived on {where}: wrong port, the board is off or not running "
                f"the probe, or its console is another UART")
    if reader is not None and reader.frames:
        return (f"{reader.frames} irqlab frames arrived but no header frame: a probe "
                f"built before it repeated its header (rebuild it with make -C "
                f"probes/guest and boot the board again)")
    text = sum(1 for b in data if 32 <= b < 127 or b in (9, 10, 13))
    if text < 0.8 * len(data):
        return (f"{len(data)} bytes arrived on {where} but they are not text: wrong "
                f"{settings}?")
    if FRAME_MARK in data:
        return (f"irqlab frames arrived on {where} but none was intact (CRC errors): "
                f"wrong {settings}, or a noisy line")
    tail = data.decode("ascii", "replace").strip()[-200:]
    return (f"text arrives on {where} but no irqlab frame: the probe is not running, or it "
            f"was not booted with sink=console; last text: {tail!r}")


def board_source(process: MeasuredProcess, period_ns: int) -> SampleSource:
    """The frames of a board's console (serial or labgrid), attached late if need be."""
    assert isinstance(process, ConsoleStream)     # both board targets spawn one
    process.reader = BoardConsoleReader(process.serial_read, period_ns)
    return process.reader


class SerialTarget(Target):
    name = "serial"
    boot_estimate_s = 5.0
    help = "a board running the probe (sink=console), read live from its serial console"
    options = (SERIAL_PORT, BAUD)
    why_not = WHY_NOT_BOARD

    def configure(self, given: dict[str, Any], period_ns: int) -> SerialOptions:
        port = given.get("serial_port")
        if not port:
            raise TargetUsageError("--target serial needs --serial-port DEV, e.g. "
                                   "--serial-port /dev/ttyUSB0")
        if "://" not in port and not os.path.exists(port):
            raise TargetUsageError(f"--serial-port {port} does not exist: plug the board "
                                   f"in or name its device (ls /dev/serial/by-id/)")
        baud = check_baud(given.get("baud", DEFAULT_BAUD))
        problem = None if "://" in port else port_problem(port)
        if problem:
            raise TargetUsageError(f"--serial-port {port} is {problem}, not a serial port: "
                                   f"name the board's tty (ls /dev/serial/by-id/) or a "
                                   f"socket:// or rfc2217:// URL")
        return SerialOptions(serial_port=port, baud=baud)

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        return [AccelPlan("none", "board", False)]     # real hardware, as far as we know

    def run_metadata(self, cfg: Any) -> dict[str, Any]:
        opts = cfg.options
        return {"board": {"kind": "serial", "port": opts.serial_port, "baud": opts.baud}}

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        return SerialPort(cfg.options.serial_port, cfg.options.baud)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        return board_source(process, cfg.period_ns)

    def process_metadata(self, process: MeasuredProcess) -> dict[str, Any]:
        assert isinstance(process, ConsoleStream)
        return {"board_console": {"bytes": process.bytes_read,
                                  "error": process.stderr() or None}}

    def boot_failure_detail(self, process: MeasuredProcess) -> str:
        assert isinstance(process, SerialPort)
        return explain_silence(process, process.reader, process.port,
                               f"--baud (given {process.baud})")
