"""Output that respects the reader (issue 32): compare of runs with default-shaped names
within 120 columns, its warnings one line per kind, `run --brief` window lines."""

from __future__ import annotations

import re

import pytest

from irqlab.cli.main import main
from tests.unit.measure.test_run_flow import fake  # noqa: F401

# The longest target name in a default name's shape (measure/run.py: TARGET-STAMP).
NAMES = [f"linux-guest-20261126-16592{i}" for i in range(3)]


@pytest.mark.slow
def test_compare_of_three_runs_fits_120_columns_with_one_warning_line(fake, tmp_path,
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
    # One line for the kind, naming the runs by id (issue 46), its advice once.
    warnings = [line for line in lines if "WARNING" in line]
    assert warnings == ["WARNING few samples (runs 1-3): measure at least 100,000 samples "
                        "(--samples, --duration) to trust them"]


def test_brief_window_lines(fake, tmp_path, capsys):
    fake()
    assert main(["run", "--target", "fake", "--samples", "300", "--window", "100ms",
                 "--brief", "--db", str(tmp_path / "b.duckdb")]) == 0
    windows = [x for x in capsys.readouterr().out.splitlines() if x.startswith("#")]
    # fake_target: 5 us samples, every 50th 80 us: 2 above 30 us in each 100.
    assert windows == [f"#{i} mean 6500 ns max 80.0 us above 2" for i in range(3)]
    assert all(re.fullmatch(r"#\d+ mean .+ max .+ above \d+", w) for w in windows)


def _matrix_printed(cells, keys: list[str], fmt: str, title: str, raw: bool = False) -> str:
    """What `irqlab matrix` prints of these results in format ``fmt`` (the output seam)."""
    import contextlib
    import io

    from irqlab.cli.output import exporter_for, show

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        show({"type": "matrix_results", "results": cells, "keys": keys, "title": title,
              "raw": raw}, exporter_for(fmt))
    return out.getvalue()


def test_matrix_table_has_units_and_fits_120_columns():
    from irqlab.cli.matrix import CellResult
    summary = {"mean_ns": 15_851_470, "min_ns": 9_120, "max_ns": 1_234_567_890,
               "warm_max_ns": 987_654_321, "p999_ns": 55_123_456, "above_threshold": 123456}
    cells = [CellResult({"load": f"cpu:cpus=1,workers={w},load=90", "idle": idle,
                         "period": "1ms", "prio": 80, "pin": "1"}, 100 + w, "ok", summary, [])
             for w in (1, 2) for idle in ("hlt", "poll")]
    keys = ["load", "idle", "period", "prio", "pin"]
    text = _matrix_printed(cells, keys, "text", "loaded: 4 cells, 1234 s")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 120, max(lines, key=len)
    assert "15.85 ms" in text and "15851470" not in text
    raw = _matrix_printed(cells, keys, "text", "loaded", raw=True)
    assert "15851470" in raw and "latencies in ns" in raw


def test_matrix_table_shows_each_key_of_a_paired_key():
    from irqlab.cli.cmd_matrix import table_keys
    from irqlab.cli.matrix import CellResult
    keys = table_keys({"xen_sched+xen_pcpus": [["credit", 1], ["null", 2]],
                       "load": ["none"]})
    assert keys == ["xen_sched", "xen_pcpus", "load"]
    cells = [CellResult({"xen_sched": s, "xen_pcpus": n, "load": "none"}, r, "ok",
                        {"mean_ns": 1000}, []) for r, (s, n) in enumerate(
                            [("credit", 1), ("null", 2)], start=1)]
    rows = _matrix_printed(cells, keys, "csv", "paired").splitlines()
    assert rows[0].startswith("XEN_SCHED,XEN_PCPUS,LOAD,RUN,STATUS")
    assert rows[1].startswith("credit,1,none,1,ok") and rows[2].startswith("null,2,none,2,ok")
