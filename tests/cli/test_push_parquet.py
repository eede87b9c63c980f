"""`push --samples-dir`: a run's raw samples as a Parquet file in the lab's shared
directory, referenced from the lab store, read by every command exactly as from the
samples table (issue 18; a real PostgreSQL server)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from irqlab.store import PgStore, Store
from irqlab.bench.lab import _synthetic_run
from irqlab.store.pgserver import PgServer
from tests.conftest import call_argv


@pytest.fixture(scope="module")
def pg():
    server = PgServer()
    yield server
    server.stop()


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """``irqlab ARGV`` in this interpreter (its environment: monkeypatch it)."""
    return call_argv(list(argv))


def _jsonl(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def _compare_row(*argv: str) -> dict:
    res = _cli("compare", *argv, "--json")
    assert res.returncode == 0, res.stderr
    return [x for x in _jsonl(res.stdout) if x["type"] == "compare_run"][0]


def test_samples_in_a_shared_file_read_back_exactly(pg, tmp_path, monkeypatch):
    lab = pg.database("files")
    host = tmp_path / "host.duckdb"
    with Store(host) as store:
        rid = _synthetic_run(store, 30_000)
    shared = tmp_path / "shared"
    shared.mkdir()
    res = _cli("push", str(rid), "--to", lab, "--db", str(host), "--samples-dir",
               str(shared), "--json")
    assert res.returncode == 0, res.stderr
    pushed = _jsonl(res.stdout)[0]
    files = list(shared.iterdir())
    assert [f.name for f in files] == [Path(pushed["samples_file"]).name]
    assert pushed["samples"] == 30_000
    with PgStore(lab, read_only=True) as lab_store:
        with lab_store.con.cursor() as cur:          # nothing went to the samples table
            cur.execute("SELECT count(*) FROM samples")
            assert cur.fetchone()[0] == 0
        assert lab_store.sample_count(pushed["lab_run_id"]) == 30_000

    local = _compare_row(str(rid), "--db", str(host))
    remote = _compare_row(str(pushed["lab_run_id"]), "--db", lab)
    for key in ("samples", "min_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns", "above_threshold"):
        assert remote[key] == local[key], key

    # The directory mounted elsewhere on a reader's host: one line naming the fix, then
    # $IRQLAB_SAMPLES_DIR finds it.
    moved = tmp_path / "mnt"
    shared.rename(moved)
    gone = _cli("compare", str(pushed["lab_run_id"]), "--db", lab)
    assert gone.returncode == 2 and len(gone.stderr.strip().splitlines()) == 1
    assert "IRQLAB_SAMPLES_DIR" in gone.stderr and "Traceback" not in gone.stderr
    monkeypatch.setenv("IRQLAB_SAMPLES_DIR", str(moved))
    again = _compare_row(str(pushed["lab_run_id"]), "--db", lab)
    assert again["p999_ns"] == local["p999_ns"]


def test_samples_dir_must_be_a_writable_directory(pg, tmp_path):
    res = _cli("push", "1", "--to", pg.database("nodir"), "--db", str(tmp_path / "a.duckdb"),
               "--samples-dir", str(tmp_path / "missing"))
    assert res.returncode == 2 and "--samples-dir" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_v1_lab_store_is_migrated_at_open(pg, tmp_path):
    lab = pg.database("old")
    with PgStore(lab) as store:                       # make it look like schema v1
        with store.con.cursor() as cur:
            cur.execute("ALTER TABLE runs DROP COLUMN samples_uri")
            cur.execute("UPDATE irqlab_meta SET value = '1' WHERE key = 'schema_version'")
        store.con.commit()
    host = tmp_path / "h.duckdb"
    with Store(host) as s:
        _synthetic_run(s, 1000)
    shared = tmp_path / "s"
    shared.mkdir()
    res = _cli("push", "1", "--to", lab, "--db", str(host), "--samples-dir", str(shared),
               "--json")
    assert res.returncode == 0, res.stderr
    with PgStore(lab, read_only=True) as store, store.con.cursor() as cur:
        cur.execute("SELECT value FROM irqlab_meta WHERE key = 'schema_version'")
        assert cur.fetchone()[0] == "2"
