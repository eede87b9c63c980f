"""`irqlab doctor`: one versioned line per check, a fix for every failed one.

In this interpreter (tests.conftest.call_argv): the environment a check reads (PATH,
IRQLAB_DB) is set with monkeypatch, as doctor reads it at each call (shutil.which,
os.environ) and caches none of it; each child interpreter cost 2-4 s of the quick set."""

from __future__ import annotations

import json

import pytest

from tests.conftest import call_argv


def _doctor(*args: str) -> tuple[int, list[dict]]:
    res = call_argv(["doctor", "--json", *args])
    return res.returncode, [json.loads(x) for x in res.stdout.splitlines()]


@pytest.fixture(scope="module")
def as_is() -> tuple[int, list[dict]]:
    """`irqlab doctor --json` in this environment, for the tests that read it."""
    return _doctor()


def test_missing_tools_are_named_with_their_fix(tmp_path, monkeypatch):
    # A PATH with nothing on it: QEMU, rt-tests, stress-ng and fio are "not found".
    monkeypatch.setenv("PATH", str(tmp_path))
    code, lines = _doctor()
    assert code == 1
    by = {x["check"]: x for x in lines}
    assert all(x["type"] == "doctor" and x["version"] == 1 for x in lines)
    for name, package in (("qemu_x86", "qemu-system-x86"), ("fio", "fio"),
                          ("rt_tests", "rt-tests")):
        assert by[name]["ok"] is False and f"apt-get install {package}" in by[name]["fix"]
    assert all(x["fix"] for x in lines if not x["ok"])


def test_a_store_that_is_not_there_is_a_failed_check(tmp_path, monkeypatch):
    monkeypatch.setenv("IRQLAB_DB", f"postgresql://irqlab@/none?host={tmp_path}")
    code, lines = _doctor()
    store = next(x for x in lines if x["check"] == "store")
    assert code == 1 and store["ok"] is False and "cannot connect" in store["detail"]


def test_each_target_adds_its_own_checks(as_is):
    # Target.doctor: the Linux guest's kernel, Xen's images, the net target's programs,
    # after the host-wide checks and before the store's (one line each, by name).
    from irqlab.targets import TARGETS
    _, lines = as_is
    names = [x["check"] for x in lines]
    declared = [c.check for t in TARGETS.values() for c in t.doctor()]
    assert {"linux_guest", "xen", "net"} <= set(declared)
    assert names[names.index("fast_path") + 1:-1] == list(dict.fromkeys(declared))
    assert all(x["fix"] for x in lines if not x["ok"])


def test_a_store_not_yet_created_is_said_and_is_no_failure(tmp_path, as_is):
    # Issue 32: a fresh machine has no store yet; that is not something to fix.
    base, _ = as_is
    missing = tmp_path / "new.duckdb"
    code, lines = _doctor("--db", str(missing))
    store = next(x for x in lines if x["check"] == "store")
    assert store["group"] == "not yet created" and store["ok"] is True
    assert "no database yet" in store["detail"] and not missing.exists()
    assert code == base                   # the needed checks alone decide the exit
    assert {x["group"] for x in lines if x["check"] != "store"} == {"needed to run"}


def test_human_lines_fit_120_columns(tmp_path, monkeypatch):
    # issue 46: a check's line reached 211 columns; its fix is most of it when missing.
    monkeypatch.setenv("PATH", str(tmp_path))
    lines = call_argv(["doctor"]).stdout.splitlines()
    assert any("apt-get install" in x for x in lines)
    assert max(len(x) for x in lines) <= 120, max(lines, key=len)


def test_the_emulated_banner_fits_120_columns():
    from irqlab.cli.output.lines import EMULATED_BANNER

    assert len(EMULATED_BANNER.format(accel="tcg")) <= 120
