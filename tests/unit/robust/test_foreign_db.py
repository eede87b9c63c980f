"""Unreadable, truncated or foreign database files (issue 20, item 4): one line, exit 2,
and DuckDB never loads or installs an extension (no ~/.duckdb appears)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from irqlab.cli.main import main
from irqlab.store import Store
from irqlab.store.interface import NewRun

FIXTURE = Path(__file__).parents[2] / "fixtures" / "import" / "cyclictest_q.txt"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("foreign")
    good = d / "good.duckdb"
    with Store(good) as store:
        store.create_run(NewRun("x", "guest", {}, {}, status="ok"))
    data = good.read_bytes()
    out = {"good": good}
    sq = d / "sqlite.db"
    con = sqlite3.connect(sq)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    out["sqlite"] = sq
    (d / "random.bin").write_bytes(os.urandom(50_000))
    out["random"] = d / "random.bin"
    (d / "empty.db").write_bytes(b"")
    out["empty"] = d / "empty.db"
    for n in (100, 5000, 20_000):
        p = d / f"trunc{n}.duckdb"
        p.write_bytes(data[:n])
        out[f"trunc{n}"] = p
    damaged = bytearray(data)
    for i in range(len(damaged) // 3, len(damaged), 101):
        damaged[i] ^= 0xFF
    (d / "damaged.duckdb").write_bytes(bytes(damaged))
    out["damaged"] = d / "damaged.duckdb"
    out["directory"] = d
    foreign = d / "foreign.duckdb"
    import duckdb
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE other (a INT)")
    con.close()
    out["foreign_tables"] = foreign
    return out


BAD = ["sqlite", "random", "empty", "trunc100", "trunc5000", "trunc20000", "damaged",
       "directory", "foreign_tables"]


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("argv", [["list"], ["show", "1"], ["show", "1", "--json"],
                                  ["import", "cyclictest", str(FIXTURE)],
                                  ["compare", "1", "1"], ["check", "1", "--max", "1ms"]])
def test_bad_database_file_is_one_line_exit_2(files, kind, argv, capsys):
    before = files[kind].read_bytes() if files[kind].is_file() else None
    code = main([*argv, "--db", str(files[kind])])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    if before is not None and kind != "damaged":
        assert files[kind].read_bytes() == before       # never rewritten


def test_sqlite_file_loads_no_extension(files, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "list", "--db",
                          str(files["sqlite"])], capture_output=True, text=True,
                         env={**os.environ, "HOME": str(home)}, timeout=60)
    assert res.returncode == 2 and "SQLite" in res.stderr
    assert list(home.iterdir()) == []                 # no ~/.duckdb/extensions


def test_list_of_a_missing_database_says_so_like_show(tmp_path, capsys):
    assert main(["list", "--db", str(tmp_path / "missing.duckdb")]) == 2
    assert capsys.readouterr().err.startswith("irqlab list: error: no database at")
