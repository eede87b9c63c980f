"""`irqlab run --target native` and side-by-side suites through the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from irqlab.runner.native import NATIVE_PROBE, online_cpus
from irqlab.store import Store
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def native_built():
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    return NATIVE_PROBE


@pytest.mark.slow
def test_native_run_has_per_cpu_summaries(db, native_built):
    res = run_cli(["run", "--target", "native", "--samples", "400", "--period", "500us",
                   "--json"], db)
    assert res.code == 0, res.stderr
    s = res.summary
    assert (s["target"], s["accel"], s["emulated"], s["status"]) == \
        ("native", "native", False, "ok")
    assert s["samples"] == 400 and s["lost"] == 0
    per = s["per_cpu"]
    assert [c["cpu"] for c in per] == online_cpus()
    assert sum(c["samples"] for c in per) == 400
    for c in per:
        assert set(c) >= {"cpu", "samples", "min_ns", "p50_ns", "p99_ns", "max_ns",
                          "warm_max_ns", "above_threshold", "lost", "overruns"}
    assert min(c["min_ns"] for c in per) == s["min_ns"]
    assert max(c["max_ns"] for c in per) == s["max_ns"]


@pytest.mark.slow
def test_native_cpus_and_bad_arguments(db, native_built):
    res = run_cli(["run", "--target", "native", "--cpus", "0", "--samples", "50", "--json"],
                  db)
    assert res.code == 0, res.stderr
    assert [c["cpu"] for c in res.summary["per_cpu"]] == [0]
    for bad in (["--target", "bogus"], ["--target", "native", "--cpus", "1-0"],
                ["--target", "native", "--priority", "0"]):
        r = run_cli(["run", *bad, "--samples", "5"], db)
        assert r.code == 2, r.stderr


@pytest.mark.emulated          # the guest half boots QEMU
def test_suite_json_and_store(db, native_built):
    res = run_cli(["run", "--target", "native,guest", "--accel", "tcg", "--icount",
                   "--samples", "300", "--json", "--name", "side"], db)
    assert res.code == 0, res.stderr
    summaries = [x for x in res.lines if x["type"] == "summary"]
    assert [x["target"] for x in summaries] == ["native", "guest"]
    suite = [x for x in res.lines if x["type"] == "suite"][-1]
    assert suite["suite"] == "side" and suite["status"] == "ok"
    assert [r["target"] for r in suite["rows"]] == ["native", "guest"]
    for row, summ in zip(suite["rows"], summaries):
        assert row["run_id"] == summ["run_id"] and row["samples"] == 300
        for key in ("min_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns", "warm_max_ns",
                    "above_threshold"):
            assert row[key] == summ[key]
    with Store(db, read_only=True) as st:
        runs = {r.run_id: r for r in st.runs()}
        for summ in summaries:
            row = runs[summ["run_id"]]
            assert row.suite == "side" and row.cell == {"target": summ["target"]}


@pytest.mark.emulated          # the guest half boots QEMU
def test_suite_human_table(db, native_built):
    proc = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                           "native,guest", "--accel", "tcg", "--icount", "--samples", "200",
                           "--db", str(db)], capture_output=True, text=True, timeout=120,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "suite " in out
    for head in ("target", "samples", "min", "p50", "p99", "p99.9", "max", "warm max",
                 "above thr"):
        assert head in out
    table = out[out.index("suite "):]
    assert "native" in table and "guest" in table and "tcg+icount" in table
