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
    from irqlab.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*args, "--db", str(db)])
        except SystemExit as exc:          # argparse's usage errors: exit 2
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    lines = [json.loads(x) for x in out.getvalue().splitlines() if x.startswith("{")]
    return CliResult(code, lines, out.getvalue(), err.getvalue())


_INTEGRATION = Path(__file__).parent / "integration"


def pytest_configure(config) -> None:
    # (integration is registered in pyproject.toml)
    config.addinivalue_line(
        "markers", "emulated: boots QEMU (or Xen under QEMU); ./run-tests.sh --quick "
                   "deselects it, with integration")
    config.addinivalue_line(
        "markers", "slow: a big synthetic case where size is the point (seconds of CPU); "
                   "./run-tests.sh --quick deselects it, the whole suite runs it")


# Module text that means a test holds a host-wide resource while it runs: a native probe
# pinned at SCHED_FIFO on a CPU, a tracefs capture, a real-time hog. Under pytest-xdist
# (./run-tests.sh runs two workers) such modules and every integration test (guests whose
# figures a second guest beside them would skew) share one xdist group, so they run one
# after another on one worker and never measure or trace each other; the other tests
# (stores, statistics, CLI output) spread over both workers, which to the group is the
# one CPU of load it is tested under (stress-ng --cpu 1 beside the suite).
_HOST_WIDE = re.compile(r"--target\", \"native|\"native\"|--trace\b|\"--trace\"|SCHED_FIFO|"
                        r"sched_set|taskset|Tracefs\(|Instance\(|TraceHook|netns|\"--pin\"|"
                        r"--prio")
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
    host-wide resource share the xdist group ``host`` (see _HOST_WIDE). First of the
    hooks (tryfirst): xdist's own, which turns the group into the node id's ``@host``
    suffix its scheduler reads, must see the marker — run after it, the group was
    silently ignored and host-wide tests ran on both workers at once."""
    for item in items:
        path = Path(str(item.fspath))
        if _INTEGRATION in path.parents:
            item.add_marker(pytest.mark.integration)
        if _INTEGRATION in path.parents or _holds_host_wide(path):
            item.add_marker(pytest.mark.xdist_group("host"))


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
