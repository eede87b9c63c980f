"""``--target labgrid``: a board driven through labgrid (https://labgrid.org): acquire its
place, boot the probe the way the environment file says, read the console through
labgrid, release the place at the end and on every failure path.

The environment file (``--lg-env``) is the lab's own: its ``main`` target (or its only
one) names the drivers. Booting uses, in order of preference:

- a strategy driver on the target: ``transition("probe")``. irqlab registers one,
  :class:`IrqlabStrategy` (``IrqlabStrategy: {}`` in the environment), that power-cycles
  the board (any PowerProtocol driver, labgrid's QEMUDriver included), and with a
  UBootDriver stops autoboot, stages the probe with a TFTPProviderDriver if there is
  one and sends its ``boot_command`` (``{image}`` = the staged path);
- else the target's power driver: cycle it (QEMUDriver: start QEMU).

With a QEMUDriver irqlab writes the probe's boot line (``sink=console`` and the run's
period) unless the environment sets ``boot_args``, and ``--lg-image`` replaces the image
its ``kernel`` key names. The console is read by a thread (see irqlab.targets.serial),
synchronising on the probe's first good frame as for a serial run.

``--lg-place NAME`` acquires that place at the coordinator first (as ``labgrid-client
acquire`` does, through labgrid's client session in this process; the coordinator from
``LG_COORDINATOR`` or the environment's ``coordinator_address``) and releases it in
:meth:`LabgridBoard.stop`, which the run flow calls after a failed boot, a failed run,
Ctrl-C and a normal end alike. Only a SIGKILL of irqlab leaves it acquired (labgrid
places have no lease): ``labgrid-client -p NAME release`` then.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irqlab.runner.accel import AccelPlan
from irqlab.runner.process import MeasuredProcess
from irqlab.runner.qemu import probe_cmdline
from irqlab.samples.source import SampleSource
from irqlab.targets.base import Option, Target, TargetOptions, TargetUsageError
from irqlab.targets.serial import (WHY_NOT_BOARD, ConsoleStream, PortGone, board_source,
                                   explain_silence)

LG_ENV = Option("--lg-env", "lg_env", dict(
    type=Path, metavar="ENV.yaml", help="the labgrid environment file of the board"))
LG_PLACE = Option("--lg-place", "lg_place", dict(
    metavar="NAME", help="acquire this labgrid place at the coordinator for the run"))
LG_IMAGE = Option("--lg-image", "lg_image", dict(
    type=Path, metavar="PROBE", help="probe image to boot instead of the environment's"))

PROBE_IMAGE_KEY = "irqlab-probe"     # the images key IrqlabStrategy stages by default
_READ_TIMEOUT_S = 0.2
_CLIENT_TIMEOUT_S = 30.0
_QEMU_STOP_S = 5.0
_INSTALL_HINT = "pip install 'irqlab[labgrid]' (./setup.sh does)"


def _labgrid_available() -> str | None:
    """None when labgrid can be imported, else the fix."""
    if importlib.util.find_spec("labgrid") is None:
        return f"labgrid is not installed: {_INSTALL_HINT}"
    return None


_STRATEGY: type | None = None


def strategy_class() -> type:
    """:class:`IrqlabStrategy`, defined and registered with labgrid on first use (labgrid
    is optional: importing this module must not need it)."""
    global _STRATEGY
    if _STRATEGY is not None:
        return _STRATEGY
    import attr
    from labgrid.factory import target_factory
    from labgrid.strategy import Strategy

    @target_factory.reg_driver
    @attr.s(eq=False)
    class IrqlabStrategy(Strategy):
        """States ``off`` and ``probe``: power-cycle, then (U-Boot boards) stop autoboot,
        stage the probe and send ``boot_command``; the probe then owns the console."""

        bindings = {"power": "PowerProtocol", "console": "ConsoleProtocol",
                    "uboot": {"UBootDriver", None}, "tftp": {"TFTPProviderDriver", None}}
        image = attr.ib(default=PROBE_IMAGE_KEY,
                        validator=attr.validators.instance_of(str))
        boot_command = attr.ib(default="", validator=attr.validators.instance_of(str))

        def __attrs_post_init__(self) -> None:
            super().__attrs_post_init__()
            self.status = "unknown"   # labgrid's strategies keep their state here

        def transition(self, status: str) -> None:
            if status == "off":
                self.target.activate(self.power)
                self.power.off()
            elif status == "probe":
                self.target.activate(self.power)
                self.power.cycle()
                if self.uboot is not None:
                    self.target.activate(self.uboot)   # waits for the prompt
                    command = self.boot_command or self.uboot.boot_command
                    if "{image}" in command:
                        image = self.target.env.config.get_image_path(self.image)
                        if self.tftp is not None:
                            self.target.activate(self.tftp)
                            image = self.tftp.stage(image)
                        # replace(), not format(): U-Boot commands hold ${var} braces
                        command = command.replace("{image}", str(image))
                    self.uboot.console.sendline(command)
            else:
                raise ValueError(f"IrqlabStrategy has states off and probe, not {status}")
            self.status = status

    _STRATEGY = IrqlabStrategy
    return IrqlabStrategy


def read_env(path: Path) -> dict[str, Any]:
    """The environment file as data, checked enough to name the problem (exit 2). Read
    with bounds (irqlab.config_files: a regular file, nesting and alias expansion
    limited) before labgrid reads it at boot: labgrid's own reading walks every alias's
    expansion in one loop that ignores SIGTERM."""
    from irqlab.config_files import ConfigFileError, load_yaml, read_regular_text
    try:
        data = load_yaml(read_regular_text(path, "the labgrid environment file (YAML)"),
                         path)
    except ConfigFileError as exc:
        raise TargetUsageError(f"--lg-env {exc}") from None
    targets = (data or {}).get("targets") if isinstance(data, dict) else None
    if not isinstance(targets, dict) or not targets:
        raise TargetUsageError(f"--lg-env {path} has no targets: it is not a labgrid "
                               f"environment file")
    if "main" not in targets and len(targets) > 1:
        raise TargetUsageError(f"--lg-env {path} has several targets and none is named "
                               f"main: name the board's target main")
    return data


def target_role(env: dict[str, Any]) -> str:
    targets = env["targets"]
    return "main" if "main" in targets else next(iter(targets))


def _drivers(env: dict[str, Any]) -> dict[str, Any]:
    """Driver name -> its config, of the board's target (list or mapping form)."""
    drivers = env["targets"][target_role(env)].get("drivers") or {}
    if isinstance(drivers, list):
        out: dict[str, Any] = {}
        for item in drivers:
            out.update(item)
        return out
    return dict(drivers)


def labgrid_client() -> list[str]:
    """The labgrid-client of the environment irqlab runs in."""
    here = Path(sys.executable).parent / "labgrid-client"
    found = str(here) if here.exists() else shutil.which("labgrid-client")
    if found is None:
        raise OSError(f"labgrid-client not found: {_INSTALL_HINT}")
    return [found]


class _NoSessionApi(Exception):
    """labgrid's client session API is not the one _session_place_op knows."""


def _session_place_op(coordinator: str | None, place: str, op: str) -> str | None:
    """Acquire or release ``place`` as ``labgrid-client -p PLACE acquire|release`` does,
    in this process (its ClientSession; the event loop labgrid keeps for this thread).
    None when done, else labgrid's message; raises _NoSessionApi if labgrid lacks it."""
    import argparse
    import asyncio
    import contextlib
    import io

    try:
        from labgrid.remote.client import ClientSession, ensure_event_loop
        from labgrid.remote.client import Error as LabgridError
        from labgrid.util.proxy import proxymanager
    except ImportError as exc:
        raise _NoSessionApi(str(exc)) from None
    address = proxymanager.get_grpc_address(
        coordinator or os.environ.get("LG_COORDINATOR", "127.0.0.1:20408"),
        default_port=20408)
    loop = ensure_event_loop()
    args = argparse.Namespace(place=place, allow_unmatched=True, kick=False)
    try:
        session = ClientSession(address, loop, args=args)
        method = getattr(session, f"_{op}_place")
    except (TypeError, AttributeError) as exc:
        raise _NoSessionApi(str(exc)) from None

    async def call() -> None:
        await asyncio.wait_for(session.start(), _CLIENT_TIMEOUT_S)
        try:
            await asyncio.wait_for(method(place), _CLIENT_TIMEOUT_S)
        finally:
            await session.stop()
            await session.close()

    # labgrid prints "acquired place ..." to stdout: irqlab's stdout is its output.
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            loop.run_until_complete(call())
    except (LabgridError, asyncio.TimeoutError) as exc:
        return str(exc) or f"no answer from the coordinator at {address} in " \
                           f"{_CLIENT_TIMEOUT_S:.0f} s"
    return None


@dataclass
class LabgridOptions(TargetOptions):
    """A board in a labgrid environment."""

    arch: str = "unknown"               # the probe's header says, once it is read
    lg_env: Path = Path()
    lg_place: str | None = None
    lg_image: Path | None = None
    qemu: bool = False                  # the board is labgrid's QEMUDriver
    coordinator: str | None = None
    boot_line: str = field(default="")  # written for a QEMUDriver without boot_args


class LabgridBoard(ConsoleStream):
    """The board: place acquired, booted, console read by a thread."""

    def __init__(self, opts: LabgridOptions) -> None:
        super().__init__()
        self.opts = opts
        self.what = "labgrid console"
        self.acquired = False
        self.release_error: str | None = None
        self.env: Any = None
        self.target: Any = None
        self.console: Any = None
        self.qemu: Any = None              # the QEMUDriver, when the board is one
        self.booted_by = ""

    # -- place ---------------------------------------------------------------------------

    def _client(self, *args: str) -> subprocess.CompletedProcess:
        argv = labgrid_client()
        if self.opts.coordinator:
            argv += ["-x", self.opts.coordinator]
        argv += ["-p", str(self.opts.lg_place), *args]
        return subprocess.run(argv, capture_output=True, text=True,
                              timeout=_CLIENT_TIMEOUT_S, stdin=subprocess.DEVNULL)

    def _place_op(self, op: str) -> str | None:
        """``op`` ("acquire" or "release") of the place; None when done, else labgrid's
        message. Through labgrid's client session in this process when its API is the
        one known (labgrid 24 to 26): a labgrid-client process costs an interpreter
        start and labgrid's imports, 1 to 2 s a call, which was most of a short pooled
        matrix cell (irqlab.cli.matrix_pool). Else, or if that API is not there, the
        labgrid-client command."""
        try:
            return _session_place_op(self.opts.coordinator, str(self.opts.lg_place), op)
        except _NoSessionApi:
            res = self._client(op)
            return None if res.returncode == 0 else \
                (res.stderr or res.stdout).strip()[-300:]

    def _acquire(self) -> None:
        error = self._place_op("acquire")
        if error is not None:
            raise OSError(f"cannot acquire labgrid place {self.opts.lg_place}: {error}")
        self.acquired = True

    def _release(self) -> None:
        if not self.acquired:
            return
        try:
            self.release_error = self._place_op("release")
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.release_error = str(exc)
        self.acquired = self.release_error is not None

    # -- ConsoleStream -------------------------------------------------------------------

    def _open(self) -> None:
        opts = self.opts
        self.argv = ["labgrid", str(opts.lg_env)] + ([f"place={opts.lg_place}"]
                                                     if opts.lg_place else [])
        try:
            if opts.lg_place:
                self._acquire()
            self._boot()
        except BaseException as exc:
            # Whatever failed (labgrid raises many kinds), the place must not stay taken.
            self._teardown()
            if isinstance(exc, OSError) or not isinstance(exc, Exception):
                raise
            # The run flow reports an OSError from start() as a failed boot.
            raise OSError(f"labgrid could not boot the board: {type(exc).__name__}: "
                          f"{exc}") from exc

    def _boot(self) -> None:
        from labgrid import Environment
        strategy_class()                   # the environment may name IrqlabStrategy
        opts = self.opts
        self.env = Environment(config_file=str(opts.lg_env))
        images = self.env.config.data.setdefault("images", {}) or {}
        self.env.config.data["images"] = images
        self.target = self.env.get_target(target_role(self.env.config.data))
        try:
            self.qemu = self.target.get_driver("QEMUDriver", activate=False)
        except Exception:                  # labgrid's NoDriverFoundError
            self.qemu = None
        if opts.lg_image is not None:
            key = self.qemu.kernel if self.qemu is not None and self.qemu.kernel \
                else PROBE_IMAGE_KEY
            images[key] = str(opts.lg_image.resolve())
        if self.qemu is not None:
            if not self.qemu.boot_args:
                self.qemu.boot_args = opts.boot_line
            self.target.activate(self.qemu)        # builds its command line
            self._die_with_irqlab()
            self.booted_by = "QEMUDriver"
        if self._driver("UBootDriver") is None:
            # Nobody else reads the console: read it from power-on. With the QEMUDriver
            # this is needed, not just nice: QEMU's PL011 blocks (holding QEMU's big
            # lock) once ~250 unread bytes fill the console socket, so QEMU could not
            # answer the QMP `cont` that labgrid waits for in on(): a deadlock seen
            # here under load with the arm64 probe.
            self.console = self.target.get_driver("ConsoleProtocol")
            self._start_reader()
        strategy = self._driver("Strategy")
        if strategy is not None:
            self.target.activate(strategy)
            strategy.transition("probe")
            self.booted_by = type(strategy).__name__
        else:
            power = self._driver("PowerProtocol")
            if power is None:
                raise OSError(f"{opts.lg_env}: the target has neither a strategy nor a "
                              f"power driver: irqlab cannot boot it (add IrqlabStrategy)")
            self.target.activate(power)
            power.cycle()
            self.booted_by = self.booted_by or type(power).__name__
        if self.console is None:
            self.console = self.target.get_driver("ConsoleProtocol")
        if self.qemu is not None:
            self.argv = list(self.qemu._cmd)

    def _driver(self, protocol: str) -> Any:
        try:
            return self.target.get_driver(protocol, activate=False)
        except Exception:                  # none bound (NoDriverFoundError)
            return None

    def _read_chunk(self) -> bytes:
        import pexpect                     # labgrid's console read timeout
        if self.qemu is not None and self.qemu._clientsocket is None:
            time.sleep(0.02)               # QEMU not started (or not connected) yet
            return b""
        try:
            # _read, not read(): read() records a labgrid "step" on a global stack that
            # is not thread-safe, and the main thread may be in labgrid at the same time.
            data = self.console._read(size=4096, timeout=_READ_TIMEOUT_S)
        except pexpect.TIMEOUT:
            data = b""
        if not data and self.qemu is not None and self.qemu._child is not None:
            code = self.qemu._child.poll()
            if code is not None:
                raise PortGone(errno.EPIPE, f"QEMU exited with code {code}")
        return data

    def _close(self) -> None:
        self._teardown()

    def _teardown(self) -> None:
        """Power off, deactivate every driver, release the place; never raises."""
        self._stop.set()                   # the reader thread, if started, ends
        for step in (self._power_off, self._cleanup_env):
            try:
                step()
            except Exception:
                pass
        self._release()

    def _power_off(self) -> None:
        if self.target is None:
            return
        if self.qemu is not None:
            self._stop_qemu()
            return
        strategy = self._driver("Strategy")
        if strategy is not None and str(getattr(strategy, "status", "")) == "probe":
            strategy.transition("off")

    def _stop_qemu(self) -> None:
        """End labgrid's QEMU ourselves, bounded: its off() asks QEMU to quit over QMP
        and waits for the answer without a timeout (a wedged or already dead QEMU would
        hang the run's end); labgrid is then told it is off."""
        child = self.qemu._child
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(_QEMU_STOP_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self.qemu.status, self.qemu._child = 0, None

    def _die_with_irqlab(self) -> None:
        """Make the QEMU labgrid is about to start get SIGTERM if irqlab dies (as every
        QEMU irqlab starts itself does): labgrid's own clean-up runs at exit only, so a
        killed irqlab would leave it running. setpriv (util-linux) sets it and execs."""
        setpriv = shutil.which("setpriv")
        if setpriv and self.qemu._cmd and self.qemu._cmd[0] != setpriv:
            self.qemu._cmd[:0] = [setpriv, "--pdeathsig", "TERM", "--"]

    def _cleanup_env(self) -> None:
        if self.env is not None:
            self.env.cleanup()
            self.env = None


class LabgridTarget(Target):
    name = "labgrid"
    help = "a board booted and read through labgrid (environment file, optional place)"
    options = (LG_ENV, LG_PLACE, LG_IMAGE)
    why_not = WHY_NOT_BOARD
    runs_on_lg_places = True

    def configure(self, given: dict[str, Any], period_ns: int) -> LabgridOptions:
        env_path = given.get("lg_env")
        if env_path is None:
            raise TargetUsageError("--target labgrid needs --lg-env ENV.yaml (the "
                                   "board's labgrid environment file)")
        if not env_path.is_file():
            raise TargetUsageError(f"--lg-env {env_path} is not a regular file: give the "
                                   f"board's labgrid environment file (YAML)")
        image = given.get("lg_image")
        if image is not None and not image.is_file():
            raise TargetUsageError(f"--lg-image {image} is not a file: build the probe "
                                   f"with `make -C probes/guest` or give its path")
        missing = _labgrid_available()
        if missing:
            raise TargetUsageError(f"--target labgrid: {missing}")
        env = read_env(env_path)
        drivers = _drivers(env)
        qemu = "QEMUDriver" in drivers
        kernel = drivers["QEMUDriver"].get("kernel") if qemu else None
        if kernel and image is None and not (env.get("images") or {}).get(kernel):
            raise TargetUsageError(f"--lg-env {env_path}: its QEMUDriver's kernel image "
                                   f"{kernel!r} is not under images: give --lg-image PROBE")
        coordinator = os.environ.get("LG_COORDINATOR") or \
            (env.get("options") or {}).get("coordinator_address")
        return LabgridOptions(lg_env=env_path.resolve(), lg_place=given.get("lg_place"),
                              lg_image=image, qemu=qemu, coordinator=coordinator,
                              boot_line=probe_cmdline(period_ns, "hlt", 0, sink="console"))

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        if cfg.options.qemu:
            return [AccelPlan("qemu", "qemu (labgrid QEMUDriver)", True)]
        return [AccelPlan("none", "board", False)]

    def run_metadata(self, cfg: Any) -> dict[str, Any]:
        o = cfg.options
        return {"board": {"kind": "labgrid", "env": str(o.lg_env), "place": o.lg_place,
                          "image": str(o.lg_image) if o.lg_image else None}}

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        return LabgridBoard(cfg.options)

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        return board_source(process, cfg.period_ns)

    def process_metadata(self, process: MeasuredProcess) -> dict[str, Any]:
        assert isinstance(process, LabgridBoard)
        target = process.target
        return {"labgrid": {
            "env": str(process.opts.lg_env), "place": process.opts.lg_place,
            "target": target.name if target is not None else None,
            "resources": [f"{type(r).__name__}:{r.name}" for r in target.resources]
            if target is not None else [],
            "booted_by": process.booted_by, "console_bytes": process.bytes_read,
            "released": not process.acquired if process.opts.lg_place else None,
            "release_error": process.release_error}}

    def boot_failure_detail(self, process: MeasuredProcess) -> str:
        assert isinstance(process, LabgridBoard)
        return explain_silence(process, process.reader, "the labgrid console",
                               "boot command or console settings")
