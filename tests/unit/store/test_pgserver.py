"""A throw-away PostgreSQL server whose test process was killed before its teardown is
stopped and removed by the next PgServer (irqlab.store.pgserver.sweep_orphans), and a live
owner's server is left alone: real servers, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import time
import subprocess
import sys
from pathlib import Path

import pytest

from irqlab.store.pg import pg_bindir

pytestmark = pytest.mark.slow          # two initdb + start: ~6 CPU s

_START = ("import sys; from irqlab.store.pgserver import PgServer; s = PgServer(); "
          "print(s.dir, flush=True); sys.stdin.read()")


def _postmaster_pid(directory: Path) -> int:
    return int((directory / "data" / "postmaster.pid").read_text().split()[0])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_owners_server_is_swept_and_a_live_ones_kept():
    if pg_bindir() is None:
        pytest.skip("no PostgreSQL server binaries: ./setup.sh --install-only installs them")
    owner = subprocess.Popen([sys.executable, "-c", _START], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).parents[3])
    try:
        orphan = Path(owner.stdout.readline().strip())
        server = _postmaster_pid(orphan)
        assert _alive(server)
        owner.send_signal(signal.SIGKILL)       # no teardown: the server outlives it
        owner.wait(10)
        assert _alive(server) and orphan.is_dir()
        from irqlab.store.pgserver import PgServer
        fresh = PgServer()
        try:
            assert not orphan.exists()
            kept = _postmaster_pid(fresh.dir)
            PgServer().stop()                   # a second one sweeps nothing live
            assert fresh.dir.is_dir() and _alive(kept)
        finally:
            fresh.stop()
        for _ in range(100):                    # postmaster exit is reaped by init
            if not _alive(server):
                break
            time.sleep(0.05)
        assert not _alive(server)
    finally:
        if owner.poll() is None:
            owner.kill()
