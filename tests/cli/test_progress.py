"""Progress of the long commands (explain, import, report) on stderr: shown in a terminal
(a pty here), never with --json, never when stderr is a pipe."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from irqlab.store import Store
from tests.conftest import run_cli
from tests.unit.reports._runs import add_run, latencies

ROOT = Path(__file__).parents[2]
CAPTURE = ROOT / "tests" / "unit" / "explain" / "data" / "idle_exit_unrecorded.irqtrace.gz"
FIXTURE = ROOT / "tests" / "fixtures" / "import" / "cyclictest_h.txt"


def in_pty(args: list[str], timeout: float = 120) -> tuple[int, str]:
    """Run irqlab with stdout and stderr on a terminal; (exit code, all it wrote)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    env.pop("IRQLAB_PROGRESS", None)
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", *args],
                            stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            proc.kill()
            pytest.fail(f"irqlab {args} wrote nothing for {timeout} s")
        try:
            chunk = os.read(master, 65536)
        except OSError:          # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=timeout), out.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "irqlab.duckdb"
    with Store(path) as st:
        add_run(st, "traced", latencies("lognormal", 500),
                extra_meta={"hooks": {"trace": {"file": str(CAPTURE)}}})
    return path


def test_explain_shows_its_stages_in_a_terminal(db, tmp_path):
    code, out = in_pty(["explain", "1", "--text", str(tmp_path / "t.txt"), "--db", str(db)])
    assert code == 0, out
    for stage in ("decoding capture", "attributing samples", "writing ftrace text"):
        assert stage in out, out[-3000:]
    assert "wrote " in out        # and the result itself


@pytest.mark.slow
def test_import_and_report_show_progress_in_a_terminal(db, tmp_path):
    code, out = in_pty(["import", "cyclictest", str(FIXTURE), "--db", str(db)])
    assert code == 0, out
    assert "read cyclictest_h.txt" in out or "reading" in out, out[-3000:]
    code, out = in_pty(["report", "1", "--png", str(tmp_path / "png"), "--db", str(db)])
    assert code == 0, out
    assert "writing PNG plots" in out, out[-3000:]


@pytest.mark.slow
def test_no_progress_with_json_or_a_pipe(db, tmp_path):
    code, out = in_pty(["explain", "1", "--json", "--text", str(tmp_path / "t.txt"),
                        "--db", str(db)])
    assert code == 0, out
    assert "decoding capture" not in out and "\x1b[" not in out
    assert out.lstrip().startswith('{"type": "explain"')
    # report decides the same way (stage_progress); its plots are too slow to run twice.
    for args in (["explain", "1", "--text", str(tmp_path / "t.txt")],
                 ["import", "cyclictest", str(FIXTURE)]):
        res = run_cli(args, db)          # stdout and stderr are pipes
        assert res.code == 0, res.stderr
        assert "\x1b[" not in res.stderr and "decoding" not in res.stderr, res.stderr
        assert "reading" not in res.stderr and "writing" not in res.stderr, res.stderr
