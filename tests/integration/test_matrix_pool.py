"""``irqlab matrix --lg-places MATCH --parallel N`` over a real labgrid coordinator on
127.0.0.1 with 3 places whose boards are QEMU (TCG) running the x86-64 probe at a 10 ms
period: every cell is stored once and every place released, with 3 workers and with 1;
a place whose QEMU is killed mid-cell is marked and the cell retried on another place
and recorded; Ctrl-C releases every place. Wall times are not asserted (a figure of
scripts/bench-matrix-pool.py, not a test: TCG on a shared 2-core host)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from irqlab.store import Store
from irqlab.store.provenance import provenance
from tests.integration._labgrid_pool import (acquired, local_lab, write_scenario,
                                             write_x86_env)

pytestmark = [pytest.mark.integration, pytest.mark.emulated, pytest.mark.slow]

pytest.importorskip("labgrid", reason="labgrid is not installed (./setup.sh installs "
                                      "irqlab[labgrid])")

PLACES = {"rig-a": {"board": "x86"}, "rig-b": {"board": "x86"}, "rig-c": {"board": "x86"},
          "other": {"board": "arm"}}


@pytest.fixture(scope="module")
def lab():
    with local_lab(PLACES) as env:
        yield env


@pytest.fixture
def env_file(tmp_path, probe_built):
    return write_x86_env(tmp_path / "x86.yaml")


def matrix(args: list[str], env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "matrix", *args,
                             "--format", "json"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def cells_of(out: str) -> list[dict]:
    return [json.loads(ln) for ln in out.splitlines() if ln.startswith('{"type": "cell"')]


def all_released(env: dict) -> bool:
    return all(who is None for who in acquired(env).values())


def test_pool_stores_every_cell_once_and_releases_the_places(lab, env_file, tmp_path):
    # 6 cells over 3 places (each place twice), then 3 cells one at a time.
    for parallel, match, cells in (("3", "rig-*", 6), ("1", "board=x86", 3)):
        scn = write_scenario(tmp_path / f"pool{cells}.toml", env_file, f"pool{cells}",
                             samples=50, cells=cells)
        db = tmp_path / f"p{parallel}.duckdb"
        p = matrix([str(scn), "--lg-places", match, "--parallel", parallel, "--db",
                    str(db)], lab)
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        rows = cells_of(out)
        assert [r["threshold"] for r in rows] == [f"{300 + 10 * i}us"
                                                  for i in range(cells)]
        assert all(r["status"] == "ok" and r["samples"] == 50 for r in rows), out
        assert {r["place"] for r in rows} <= {"rig-a", "rig-b", "rig-c"}
        with Store(db, read_only=True) as st:
            runs = [r for r in st.runs() if r.suite == f"pool{cells}"]
        assert sorted(r.cell["threshold"] for r in runs) == sorted(r["threshold"]
                                                                   for r in rows)
        for run in runs:                 # the board is in the tags and the metadata
            assert run.status == "ok"
            assert run.tags["board"] == run.metadata["pool"]["place"] \
                == run.metadata["labgrid"]["place"]
            assert run.metadata["pool"]["attempt"] == 1
            assert provenance(run)["configuration"]["identities"]["board"] == \
                run.tags["board"]
        assert all_released(lab), acquired(lab)
    # --resume: every cell is done, nothing runs again.
    p = matrix([str(tmp_path / "pool6.toml"), "--lg-places", "rig-*", "--parallel", "3",
                "--resume", "--db", str(tmp_path / "p3.duckdb")], lab)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and all(r["resumed"] for r in cells_of(out)), err
    with Store(tmp_path / "p3.duckdb", read_only=True) as st:
        assert len([r for r in st.runs() if r.suite == "pool6"]) == 6


def _qemus(matrix_pid: int) -> dict[str, int]:
    """Place -> pid of the QEMU a worker of the matrix ``matrix_pid`` runs on it (its
    environment names the place; its parent is the worker, the worker's the matrix)."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if "qemu-system" not in Path(f"/proc/{pid}/comm").read_text() \
                    or _ppid(_ppid(int(pid))) != matrix_pid:
                continue
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(b"IRQLAB_LG_PLACE="):
                out[item.split(b"=", 1)[1].decode()] = int(pid)
    return out


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _workers(db: Path) -> list[int]:
    """The pool workers of the matrix writing ``db`` (their command line carries it)."""
    return [int(pid) for pid in filter(str.isdigit, os.listdir("/proc"))
            if b"irqlab.cli.matrix_pool" in (cmd := _cmdline(pid)) and str(db).encode()
            in cmd]


def _no_workers_left(db: Path, timeout_s: float = 30) -> list[int]:
    """Waits (bounded) for the workers to finish going: each stores what its run has,
    then exits; on a busy host that takes a moment after the matrix has returned."""
    end = time.monotonic() + timeout_s
    while (left := _workers(db)) and time.monotonic() < end:
        time.sleep(0.2)
    return left


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_killed_qemu_marks_the_place_and_the_cell_is_retried(lab, env_file, tmp_path):
    scn = write_scenario(tmp_path / "kill.toml", env_file, "poolkill", samples=400,
                         cells=2)
    db = tmp_path / "db.duckdb"
    p = matrix([str(scn), "--lg-places", "rig-*", "--parallel", "2", "--db", str(db)],
               lab)
    try:
        victim, deadline = None, time.monotonic() + 90
        while victim is None:
            assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
            victim = next(iter(_qemus(p.pid).items()), None)
            if victim is None:
                time.sleep(0.2)
                continue
            time.sleep(1.5)              # booted and measuring (a 4 s cell)
            try:
                os.kill(victim[1], signal.SIGKILL)
            except ProcessLookupError:
                # That QEMU ended by itself meanwhile (an accelerator that did not boot
                # gives way to the next, seen on a host at load 8): take the next one.
                victim = None
        out, err = p.communicate(timeout=240)
    finally:
        if p.poll() is None:
            p.kill()
    place = victim[0]
    assert p.returncode == 0, err
    rows = cells_of(out)
    assert [r["status"] for r in rows] == ["ok", "ok"], err
    retried = [r for r in rows if any(f"place {place} failed" in n for n in r["notes"])]
    assert len(retried) == 1 and retried[0]["place"] != place, (victim, rows, err)
    assert f"place {place} failed" in err
    with Store(db, read_only=True) as st:
        runs = [r for r in st.runs() if r.suite == "poolkill"]
    failed = [r for r in runs if r.status == "failed"]
    assert len(failed) == 1 and failed[0].tags["board"] == place
    assert failed[0].cell == {"threshold": retried[0]["threshold"]}
    retry = next(r for r in runs if r.run_id == retried[0]["run_id"])
    assert retry.metadata["pool"]["attempt"] == 2
    assert retry.metadata["pool"]["failed"][0]["place"] == place
    assert retry.metadata["pool"]["failed"][0]["run_id"] == failed[0].run_id
    assert all_released(lab), acquired(lab)


def test_ctrl_c_releases_every_place(lab, env_file, tmp_path):
    scn = write_scenario(tmp_path / "long.toml", env_file, "poollong", samples=100000,
                         cells=3)
    db = tmp_path / "db.duckdb"
    p = matrix([str(scn), "--lg-places", "rig-*", "--parallel", "3", "--db", str(db)],
               lab)
    try:
        deadline = time.monotonic() + 90
        while sum(who is not None for who in acquired(lab).values()) < 3:
            assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
            time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "--resume" in err
    assert all_released(lab), acquired(lab)
    assert not _no_workers_left(db)
    with Store(db, read_only=True) as st:
        statuses = [r.status for r in st.runs() if r.suite == "poollong"]
    assert statuses and set(statuses) <= {"interrupted", "failed"}, statuses


def test_no_matching_place_or_no_coordinator_exits_2(lab, env_file, tmp_path):
    scn = write_scenario(tmp_path / "one.toml", env_file, "poolnone", samples=10, cells=1)
    for match, env, words in (
            ("board=riscv", lab, ["no place of the coordinator matches", "rig-a", "other"]),
            ("rig-*", {**lab, "LG_COORDINATOR": "127.0.0.1:1"},
             ["cannot list the places", "127.0.0.1:1", "LG_COORDINATOR"])):
        p = matrix([str(scn), "--lg-places", match, "--db", str(tmp_path / "db")], env)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 2 and len(err.strip().splitlines()) == 1, err
        assert all(w in err for w in words), err
        assert not (tmp_path / "db").exists()
