"""`irqlab run --tag`, `irqlab tag`, `irqlab rm` and `list`'s filters on real native runs
(issue 31): rm leaves no row, sample file or capture of the run, and refuses a running
run."""

from __future__ import annotations

import subprocess
import sys
import time

import duckdb
import pytest

from irqlab.runner.native import NATIVE_PROBE
from tests.conftest import call_cli, run_cli

# 10 us periods in 1 s windows: over 65,536 samples per window, so the run keeps its
# samples in Parquet files beside the database (irqlab.store.sample_files).
FILES_RUN = ["run", "--target", "native", "--cpus", "0", "--samples", "3000", "--period",
             "10us", "--window", "1s", "-q"]


@pytest.fixture(scope="module")
def native_built():
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    return NATIVE_PROBE


def _rows(db, run_id: int) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?",
                               [run_id]).fetchone()[0]
                for t in ("runs", "samples", "windows", "histograms", "sample_files")}
    finally:
        con.close()


@pytest.mark.slow
def test_rm_leaves_no_samples_sample_files_or_capture(db, native_built):
    res = run_cli(FILES_RUN + ["--trace", "--name", "gone", "--tag", "kernel=rt"], db)
    assert res.code == 0, res.stderr
    assert run_cli(["run", "--target", "native", "--cpus", "0", "--samples", "100",
                    "--window", "50ms", "-q", "--name", "kept"], db).code == 0
    run_dir = db.with_name(db.name + ".samples") / "run-1"
    capture = db.with_name(db.name + ".traces") / "run-1.irqtrace.gz"
    assert any(run_dir.iterdir()) and capture.exists()
    assert _rows(db, 1)["sample_files"] > 0
    # Without a terminal and without --yes nothing is removed.
    asked = run_cli(["rm", "gone"], db)
    assert asked.code == 2 and "pass --yes" in asked.stderr
    assert _rows(db, 1)["runs"] == 1
    res = call_cli(["rm", "tag:kernel=rt", "--yes", "--json"], db)
    assert res.code == 0, res.stderr
    [line] = res.lines
    assert line["type"] == "rm" and line["run_id"] == 1 and line["sample_files"] >= 1
    assert line["captures"] == [str(capture)]
    assert _rows(db, 1) == dict.fromkeys(("runs", "samples", "windows", "histograms",
                                          "sample_files"), 0)
    assert not run_dir.exists() and not capture.exists()
    # The other run is untouched.
    assert _rows(db, 2)["runs"] == 1 and _rows(db, 2)["windows"] > 0
    assert call_cli(["show", "kept", "--json"], db).code == 0


@pytest.mark.slow
def test_rm_refuses_a_running_run(db, native_built):
    run = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                            "native", "--cpus", "0", "--duration", "60s", "--window",
                            "1s", "-q", "--name", "busy", "--db", str(db)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):          # until its row is stored (status running)
            listed = call_cli(["list", "--json", "--status", "running"], db)
            if listed.code == 0 and listed.lines:
                break
            time.sleep(0.1)
        assert listed.lines and listed.lines[0]["name"] == "busy"
        res = run_cli(["rm", "busy", "--yes"], db)
        assert res.code == 2 and "still running" in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    finally:
        run.terminate()
        run.wait(timeout=60)
    assert call_cli(["list", "--json", "--where", "tag:x=y"], db).lines == []


@pytest.mark.slow
def test_tag_and_list_filters(db, native_built):
    for name, tags in (("a", ["--tag", "kernel=rt", "--tag", "bios=2.1"]), ("b", [])):
        res = run_cli(["run", "--target", "native", "--cpus", "0", "--samples", "50",
                       "--window", "50ms", "-q", "--name", name, *tags], db)
        assert res.code == 0, res.stderr
    res = call_cli(["show", "a", "--json"], db)
    assert res.lines[0]["configuration"]["tags"] == {"kernel": "rt", "bios": "2.1"}
    res = call_cli(["tag", "b", "kernel=rt", "--json"], db)
    assert res.code == 0 and res.lines[0]["tags"] == {"kernel": "rt"}
    res = call_cli(["tag", "a", "bios=", "--json"], db)        # KEY= removes the tag
    assert res.lines[0]["tags"] == {"kernel": "rt"}

    def names(*args: str) -> list[str]:
        out = call_cli(["list", "--json", *args], db)
        assert out.code == 0, out.stderr
        return [x["name"] for x in out.lines]
    assert names("--where", "tag:kernel=rt") == ["a", "b"]
    assert names("--where", "tag:kernel=rt", "--status", "ok", "--target", "native") == \
        ["a", "b"]
    assert names("--target", "guest") == [] and names("--since", "2999-01-01") == []
    for bad in (["--where", "kernel=rt"], ["--since", "yesterday"], ["--status", "okay"]):
        out = call_cli(["list", *bad], db)
        assert out.code == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    out = call_cli(["tag", "a", "series=x"], db)
    assert out.code == 2 and "irqlab's own" in out.stderr
    assert names() == ["a", "b"]


@pytest.mark.slow
def test_scenario_tags_label_every_run_of_a_matrix(db, tmp_path, native_built):
    scn = tmp_path / "tagged.toml"
    scn.write_text('name = "tagged"\n[tags]\nkernel = "rt"\nbios = "2.1"\n'
                   '[run]\ntarget = "native"\ncpus = "0"\nsamples = 50\nwindow = "50ms"\n'
                   'tag = "lab=a"\n[matrix]\npriority = [80, 90]\n')
    res = run_cli(["matrix", str(scn)], db)
    assert res.code == 0, res.stderr
    out = call_cli(["list", "--json", "--where", "tag:kernel=rt", "--where", "tag:lab=a"], db)
    assert [x["name"] for x in out.lines] == ["tagged/priority=80", "tagged/priority=90"]
    assert out.lines[0]["tags"]["bios"] == "2.1" and out.lines[0]["tags"]["priority"] == "80"
    scn.write_text('name = "bad"\n[tags]\nseries = "x"\n[run]\ntarget = "native"\n'
                   '[matrix]\npriority = [80]\n')
    res = run_cli(["matrix", str(scn)], db)
    assert res.code == 2 and "irqlab's own" in res.stderr, res.stderr


@pytest.mark.slow
def test_tag_list_and_rm_on_a_lab_store(db, tmp_path, native_built, pg_server):
    """The same commands on a real PostgreSQL lab store: a pushed run's rows and its
    samples file go; the other run stays."""
    for name in ("one", "two"):
        assert run_cli(["run", "--target", "native", "--cpus", "0", "--samples", "100",
                        "--window", "50ms", "-q", "--name", name], db).code == 0
    lab = pg_server.database("manage_lab")
    files = tmp_path / "lab-samples"
    files.mkdir()
    res = call_cli(["push", "one", "two", "--to", lab, "--samples-dir", str(files)], db)
    assert res.code == 0, res.stderr
    assert len(list(files.iterdir())) == 2
    res = call_cli(["tag", "one", "kernel=rt", "--json"], lab)
    assert res.code == 0 and res.lines[0]["tags"] == {"kernel": "rt"}, res.stderr
    listed = call_cli(["list", "--json", "--where", "tag:kernel=rt"], lab)
    assert [x["name"] for x in listed.lines] == ["one"]
    res = call_cli(["rm", "tag:kernel=rt", "--yes", "--json"], lab)
    assert res.code == 0, res.stderr
    assert res.lines[0]["rows"]["runs"] == 1 and res.lines[0]["sample_files"] == 1
    assert [x["name"] for x in call_cli(["list", "--json"], lab).lines] == ["two"]
    assert len(list(files.iterdir())) == 1
    assert call_cli(["show", "two", "--json"], lab).code == 0
