"""``irqlab report -o`` (issue 20): a directory is refused up front, a failed write (disk
full) names the file asked for and leaves no temporary file behind."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from irqlab.cli.main import main

FIXTURE = Path(__file__).parents[2] / "fixtures" / "import" / "tscdeadline_latency.txt"


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "r.duckdb"
    assert main(["import", "tscdeadline", str(FIXTURE), "--tick-hz", "2000000000",
                 "--db", str(path)]) == 0
    return path


def test_output_directory_is_refused_and_nothing_left(db, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    capsys.readouterr()
    assert main(["report", "1", "-o", str(out), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and len(err.strip().splitlines()) == 1
    assert list(out.iterdir()) == []


def test_disk_full_names_the_file_and_removes_the_temporary(db, tmp_path, capsys,
                                                           monkeypatch):
    target = tmp_path / "report.html"

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(Path, "write_text", full)
    capsys.readouterr()
    assert main(["report", "1", "-o", str(target), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {target}: No space left on device" in err
    assert "None" not in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.glob(".report.html.*")) == [] and not target.exists()
