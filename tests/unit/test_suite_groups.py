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

# Nothing host-wide: it runs an inner pytest of files that only write lines (the
# words in its docstring alone had put it in the host group, tests/conftest.py).
XDIST_GROUP = ""
# Each case runs an inner pytest (seconds): out of the quick set, in the whole suite.
pytestmark = pytest.mark.slow

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


@pytest.mark.slow
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


GROUPED_MODULES = [
    ("tests/integration/test_xen.py", "guests"),             # every integration test...
    ("tests/integration/test_native_explain.py", "host"),    # ... but those without a guest
    ("tests/integration/test_explain.py", "host"),           # ... or with a host FIFO hog
    ("tests/integration/test_wheel.py", None),               # ... or none said so
    ("tests/unit/trace/test_ringbuf.py", "host"),            # makes trace instances
    ("tests/unit/stats/test_window.py", None),
]


@pytest.fixture(scope="module")
def marked_by_pytest() -> str:
    """The tests of GROUPED_MODULES pytest itself selects by ``-m xdist_group`` (one
    collection of all of them, in a child: the marks come from tests/conftest.py's hook)."""
    for module, _group in GROUPED_MODULES:
        assert (ROOT / module).exists(), f"{module} moved: update this list"
    run = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:randomly",
                          "-p", "no:cacheprovider", "-m", "xdist_group",
                          *[m for m, _g in GROUPED_MODULES]],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode in (0, 5), run.stdout[-2000:] + run.stderr[-2000:]
    return run.stdout


@pytest.mark.parametrize("module, group", GROUPED_MODULES)
def test_the_suite_groups_modules(module, group, marked_by_pytest):
    selected = [line for line in marked_by_pytest.splitlines()
                if line.startswith(f"{module}::")]
    assert bool(selected) == (group is not None), marked_by_pytest[-2000:]
    mod = importlib.import_module(module[:-3].replace("/", "."))

    class Item:
        module = mod
    assert _xdist_group(Item(), ROOT / module) == group


_LOCKED = """
import os
import time

GUEST_LOCK = {locked}


def test_{name}():
    t0 = time.monotonic()
    open(os.environ["WHERE"] + ".{name}", "w").close()
    # Unlocked, each waits for the other to start (side by side however busy the
    # machine); locked, that wait would never end, so each just takes a second.
    other = os.environ["WHERE"] + (".b" if "{name}" == "a" else ".a")
    while not GUEST_LOCK and not os.path.exists(other) and time.monotonic() < t0 + 60:
        time.sleep(0.05)
    time.sleep(1.0)
    with open(os.environ["WHERE"], "a") as f:
        f.write(f"{{t0}} {{time.monotonic()}}\\n")
"""


@pytest.mark.slow
@pytest.mark.parametrize("locked", [True, False])
def test_guest_lock_modules_never_overlap(tmp_path, locked):
    # Two modules on two workers: with GUEST_LOCK they run one after the other (the
    # session's guest lock, tests/conftest.py), without it side by side (the control).
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import _one_guest_at_a_time  # noqa: F401\n")
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(_LOCKED.format(locked=locked, name=name))
    where = tmp_path / "where.txt"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist",
                          "loadfile", "-p", "no:cacheprovider", "-p", "no:randomly",
                          "--rootdir", str(tmp_path), str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={"WHERE": str(where), "PATH": "/usr/bin:/bin",
                              "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stdout + run.stderr
    (a0, a1), (b0, b1) = sorted(tuple(map(float, line.split()))
                                for line in where.read_text().splitlines())
    assert (b0 >= a1) == locked, (a0, a1, b0, b1)
