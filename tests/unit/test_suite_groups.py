"""The suite's own guarantee: tests that hold a host-wide resource (tracefs, SCHED_FIFO on
CPU 1, a guest under TCG) never run on two xdist workers at once. tests/conftest.py marks
them ``xdist_group("host")`` or ``("guests")``; pytest-xdist's ``--dist loadgroup`` must
then send each whole group to one worker. With pytest 9.2 and xdist 3.8 it silently did not (pyproject.toml):
two native hogs ran together and the explain tests named two of them."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import _xdist_group

ROOT = Path(__file__).resolve().parents[2]

_GROUPED = """
import os
import pytest

@pytest.mark.xdist_group("host")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    with open(os.environ["WHERE"], "a") as f:
        f.write(f"grouped {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
"""


def test_a_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_g.py").write_text(_GROUPED)
    where = tmp_path / "where.txt"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist",
                          "loadgroup", "-p", "no:cacheprovider", "-p", "no:randomly",
                          str(tmp_path / "test_g.py")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={"WHERE": str(where), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stdout + run.stderr
    workers = {line.split()[1] for line in where.read_text().splitlines()}
    assert len(where.read_text().splitlines()) == 6
    assert len(workers) == 1, f"the group ran on {sorted(workers)}"


@pytest.mark.parametrize("module, group", [
    ("tests/integration/test_xen.py", "guests"),             # every integration test...
    ("tests/integration/test_native_explain.py", "host"),    # ... but those without a guest
    ("tests/integration/test_explain.py", "host"),           # ... or with a host FIFO hog
    ("tests/integration/test_wheel.py", None),               # ... or none said so
    ("tests/unit/trace/test_ringbuf.py", "host"),            # makes trace instances
    ("tests/unit/stats/test_window.py", None),
])
def test_the_suite_groups_modules(module, group):
    assert (ROOT / module).exists(), f"{module} moved: update this list"
    run = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:randomly",
                          "-m", "xdist_group", module],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    selected = [line for line in run.stdout.splitlines() if "::" in line]
    assert bool(selected) == (group is not None), run.stdout[-2000:]
    mod = importlib.import_module(module[:-3].replace("/", "."))

    class Item:
        module = mod
    assert _xdist_group(Item(), ROOT / module) == group
