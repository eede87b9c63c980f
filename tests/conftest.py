"""Shared fixtures: run the CLI as a user would, parse its JSON lines."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from irqlab.runner.machines import MACHINES

DEFAULT_PROBE = MACHINES["x86_64"].probe


@dataclass
class CliResult:
    code: int
    lines: list[dict]
    stdout: str
    stderr: str

    @property
    def summary(self) -> dict:
        return [x for x in self.lines if x.get("type") == "summary"][-1]

    @property
    def windows(self) -> list[dict]:
        return [x for x in self.lines if x.get("type") == "window"]


def run_cli(args: list[str], db: Path, timeout: float = 300) -> CliResult:
    proc = subprocess.run([sys.executable, "-m", "irqlab.cli.main", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return CliResult(proc.returncode, lines, proc.stdout, proc.stderr)


def call_cli(args: list[str], db: Path) -> CliResult:
    """``irqlab ARGS --db DB`` in this interpreter: no child interpreter to start (about
    0.5 CPU s a call, most of the quick set's cost). For tests of a command's output,
    exit code and files; tests of process behaviour (tracebacks at exit, imports,
    signals, ``irqlab run``'s probe and journal) keep ``run_cli``."""
    proc = call_argv([*args, "--db", str(db)])
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return CliResult(proc.returncode, lines, proc.stdout, proc.stderr)


def call_argv(argv: list[str]) -> subprocess.CompletedProcess:
    """``irqlab ARGV`` in this interpreter, shaped like ``subprocess.run``'s result (for
    tests written against a child's returncode, stdout and stderr); see call_cli."""
    from irqlab.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:          # argparse's usage errors: exit 2
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return subprocess.CompletedProcess(["irqlab", *argv], code, out.getvalue(),
                                       err.getvalue())


_INTEGRATION = Path(__file__).parent / "integration"


def pytest_configure(config) -> None:
    # (integration is registered in pyproject.toml)
    config.addinivalue_line(
        "markers", "emulated: boots QEMU (or Xen under QEMU); ./run-tests.sh --quick "
                   "deselects it, with integration")
    config.addinivalue_line(
        "markers", "slow: seconds a test (a big synthetic case, a real PostgreSQL server or "
                   "Chromium, a sub-suite, runs of seconds); ./run-tests.sh --quick deselects "
                   "it so the edit loop stays under 2 min, the whole suite runs it")


# Two xdist groups, each run one test after another on one worker, side by side:
# - ``guests``: every integration test (a guest under TCG, or Xen under QEMU): a second
#   guest beside one would skew its timing-sensitive figures;
# - ``host``: modules that hold a host-wide resource without a guest — a native probe
#   pinned at SCHED_FIFO on a CPU, a tracefs capture, a real-time hog, a network
#   namespace — found by their text (_HOST_WIDE), plus integration modules that boot no
#   guest and say so (module attribute ``XDIST_GROUP = "host"``), and guests that put
#   real-time threads on the host (a FIFO hog beside the guest: the same attribute).
# An integration module whose guest asserts nothing about time and that holds nothing
# host-wide (a wheel's short run, a browser over fake runs) says ``XDIST_GROUP = ""``:
# no group, it runs beside the others.
# A module naming the native probe's binary (NATIVE_PROBE) runs it: test_bench_noise's
# native runs, ungrouped, preempted test_explain's vCPU thread (3 of 20 hog samples with
# irqlab-native in the causes, loaded fresh clone, 2026-11-27).
# So no two guests and no two host-wide captures or hogs ever run at once; the other tests
# (stores, statistics, CLI output) spread over both workers. One group for both made the
# suite 17 min, one worker doing 16 of them.
_HOST_WIDE = re.compile(r"--target\", \"native|\"native\"|--target\", \"noise|NOISE_PROBE|"
                        r"--trace\b|\"--trace\"|SCHED_FIFO|"
                        r"sched_set|taskset|Tracefs\(|Instance\(|TraceHook|netns|\"--pin\"|"
                        r"--prio|NATIVE_PROBE")
_host_wide_cache: dict[Path, bool] = {}


def _holds_host_wide(path: Path) -> bool:
    if path not in _host_wide_cache:
        try:
            _host_wide_cache[path] = bool(_HOST_WIDE.search(path.read_text()))
        except OSError:
            _host_wide_cache[path] = False
    return _host_wide_cache[path]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Every test under tests/integration is ``integration``, marked or not: the quick
    set (./run-tests.sh --quick, ``-m "not integration and not emulated and not slow"``)
    never picks one up because its module forgot ``pytestmark``. Tests holding a
    host-wide resource get their xdist group (see _HOST_WIDE's comment). First of the
    hooks (tryfirst): xdist's own, which turns the group into the node id's ``@group``
    suffix its scheduler reads, must see the marker."""
    for item in items:
        path = Path(str(item.fspath))
        if _INTEGRATION in path.parents:
            item.add_marker(pytest.mark.integration)
        group = _xdist_group(item, path)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _xdist_group(item, path: Path) -> str | None:
    """The test's xdist group (see _HOST_WIDE's comment), None for none."""
    return _module_group(getattr(item, "module", None), path)


def _module_group(module, path: Path) -> str | None:
    """The xdist group of the tests of ``module`` at ``path``, None for none."""
    declared = getattr(module, "XDIST_GROUP", None)
    if declared is not None:
        return declared or None      # "": an integration module that needs no group
    if _INTEGRATION in path.parents:
        return "guests"
    return "host" if _holds_host_wide(path) else None


@pytest.fixture(scope="module", autouse=True)
def _one_guest_at_a_time(request, tmp_path_factory):
    """A module of the ``guests`` group, or one saying ``GUEST_LOCK = True`` (a guest
    with real-time threads on the host, in the ``host`` group), holds the session's
    guest lock while its tests and fixtures run: no two such modules at once on any
    workers. The groups alone cannot say it for a guest that must also stay away from
    the native FIFO tests: test_linux_guest_explain beside a guests-group guest named
    the host hog on 63 of 101 of its spikes (three workers, unloaded)."""
    mod = request.module
    path = Path(str(request.path))
    if not (getattr(mod, "GUEST_LOCK", False) or _module_group(mod, path) == "guests"):
        yield
        return
    import fcntl
    base = tmp_path_factory.getbasetemp()
    # Under xdist every worker's base is a child of the session's (pytest-N/popen-gwK).
    lock = (base.parent if base.name.startswith("popen-") else base) / "guest.lock"
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "irqlab.duckdb"


@pytest.fixture(scope="session")
def pg_server():
    """One throw-away PostgreSQL server for the session (initdb + start cost ~3 CPU s
    each): every test takes a fresh database on it (``pg_server.database(unique name)``).
    A test that stops or kills its server starts its own PgServer instead."""
    from irqlab.store.pgserver import PgServer
    server = PgServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def probe_built() -> Path:
    if not DEFAULT_PROBE.exists():
        subprocess.run(["make", "-s", "-C", str(DEFAULT_PROBE.parents[2])], check=True)
    return DEFAULT_PROBE
