"""Output that respects the reader (issue 32): compare of runs with default-shaped names
within 120 columns, its warnings one block per kind, `run --brief` window lines."""

from __future__ import annotations

import re

from irqlab.cli.main import main
from tests.unit.measure.test_run_flow import fake  # noqa: F401

# The longest target name in a default name's shape (measure/run.py: TARGET-STAMP).
NAMES = [f"linux-guest-20261126-16592{i}" for i in range(3)]


def test_compare_of_three_runs_fits_120_columns_with_one_warning_block(fake, tmp_path,
                                                                        capsys):
    fake()
    db = str(tmp_path / "w.duckdb")
    for name in NAMES:       # 300 samples each: every run gets a "few samples" warning
        assert main(["run", "--target", "fake", "--samples", "300", "-n", name, "-q",
                     "--db", db]) == 0
    capsys.readouterr()
    main(["compare", *NAMES, "--db", db])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 120, max(lines, key=len)
    # Every run is still named (below the compact table), every figure still there.
    assert all(name in out for name in NAMES) and "p99.9" in out
    assert out.count("WARNING") == 1
    assert "WARNING (few samples, 3 runs): measure at least" in out
    for name in NAMES:
        assert sum(1 for line in lines if name in line and "has 300 samples" in line) == 1


def test_brief_window_lines(fake, tmp_path, capsys):
    fake()
    assert main(["run", "--target", "fake", "--samples", "300", "--window", "100ms",
                 "--brief", "--db", str(tmp_path / "b.duckdb")]) == 0
    windows = [x for x in capsys.readouterr().out.splitlines() if x.startswith("#")]
    # fake_target: 5 us samples, every 50th 80 us: 2 above 30 us in each 100.
    assert windows == [f"#{i} mean 6500 ns max 80.0 us above 2" for i in range(3)]
    assert all(re.fullmatch(r"#\d+ mean .+ max .+ above \d+", w) for w in windows)
