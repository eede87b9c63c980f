"""`irqlab explain RUN --dat FILE`: the run's capture as a trace-cmd trace.dat.

The run is a stored one whose metadata points at a real capture of
tests/unit/explain/data (x86-tsc clock, 5,293 events on 48 pages); the file is checked
with trace-cmd itself when it is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from irqlab.store import Store
from tests.conftest import call_cli
from tests.unit.reports._runs import add_run, latencies

CAPTURE = (Path(__file__).parents[1] / "unit" / "explain" / "data"
           / "idle_exit_unrecorded.irqtrace.gz")
EVENTS, PAGES = 5293, 48


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Run 1 with the capture, run 2 without any."""
    path = tmp_path_factory.mktemp("dat") / "irqlab.duckdb"
    with Store(path) as st:
        add_run(st, "traced", latencies("ramp", 100),
                extra_meta={"hooks": {"trace": {"file": str(CAPTURE)}}})
        add_run(st, "untraced", latencies("ramp", 100))
    return path


def _one_line_error(res, *words: str) -> None:
    assert res.code == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("irqlab explain: error: "), res.stderr
    assert "Traceback" not in res.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_dat_is_written_and_reported_in_json(store, tmp_path):
    out = tmp_path / "run1.dat"
    res = call_cli(["explain", "1", "--dat", str(out), "--json"], store)
    assert res.code == 0, res.stderr
    assert len(res.lines) == 1
    info = res.lines[0]
    assert info["type"] == "explain" and info["events"] == EVENTS
    assert info["dat"] == {"file": str(out), "events": EVENTS, "pages": PAGES,
                           "bytes": out.stat().st_size}
    assert out.read_bytes().startswith(b"\x17\x08\x44tracing6\0")
    # The existing keys are unchanged: only "dat" is added.
    plain = call_cli(["explain", "1", "--json"], store)
    assert plain.code == 0, plain.stderr
    assert set(info) - set(plain.lines[0]) == {"dat"}
    assert {k: v for k, v in info.items() if k != "dat"} == plain.lines[0]


def test_dat_reads_back_in_trace_cmd(store, tmp_path):
    exe = shutil.which("trace-cmd")
    if exe is None:
        pytest.skip("trace-cmd is not installed (./setup.sh installs it)")
    out = tmp_path / "run1.dat"
    assert call_cli(["explain", "1", "--dat", str(out), "--json"], store).code == 0
    proc = subprocess.run([exe, "report", "-i", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    records = [x for x in proc.stdout.splitlines() if not x.startswith("cpus=")]
    assert len(records) == EVENTS
    # Task names came with the file (from the capture's own context switches).
    assert sum(" CPU 0/TCG-11258 " in x for x in records) > 0


def test_dat_human_output_names_the_file_and_counts(store, tmp_path):
    out = tmp_path / "run1.dat"
    res = call_cli(["explain", "traced", "--dat", str(out)], store)
    assert res.code == 0, res.stderr
    last = res.stdout.strip().splitlines()[-1]
    assert last == (f"wrote {out}: trace.dat v6, {EVENTS} events, {PAGES} pages, "
                    f"{out.stat().st_size} bytes")


def test_dat_into_a_missing_directory_is_a_usage_error(store, tmp_path):
    out = tmp_path / "nowhere" / "run1.dat"
    res = call_cli(["explain", "1", "--dat", str(out)], store)
    _one_line_error(res, "--dat", "does not exist", "create it")
    assert not out.parent.exists()


def test_dat_naming_a_directory_is_a_usage_error(store, tmp_path):
    _one_line_error(call_cli(["explain", "1", "--dat", str(tmp_path)], store),
                    "--dat", "is a directory")


def test_dat_and_text_on_the_same_file_is_a_usage_error(store, tmp_path):
    out = tmp_path / "same"
    res = call_cli(["explain", "1", "--dat", str(out), "--text", str(out)], store)
    _one_line_error(res, "--dat and --text")
    assert not out.exists()


def test_dat_of_a_run_without_capture_is_a_usage_error(store, tmp_path):
    out = tmp_path / "run2.dat"
    res = call_cli(["explain", "2", "--dat", str(out)], store)
    _one_line_error(res, "no trace capture", "--trace")
    assert not out.exists()


def test_dat_help_is_listed(store):
    res = call_cli(["explain", "--help"], store)
    assert res.code == 0 and "--dat FILE" in res.stdout and "trace.dat" in res.stdout
