"""`irqlab import`: exit codes, located errors, --skip-bad, atomicity, show/list of
imported runs for every format."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from irqlab.cli.main import main
from irqlab.importers import ingest
from irqlab.store import Store
from tests.conftest import call_cli

D = Path(__file__).resolve().parents[1] / "fixtures" / "import"
SUMMARY_KEYS = {"type", "version", "run_id", "name", "target", "arch", "accel", "emulated",
                "status", "samples", "lost", "overruns", "tick_hz", "period_ns",
                "threshold_ns", "above_threshold", "min_ns", "mean_ns", "stddev_ns",
                "max_ns", "warm_max_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns",
                "p9999_ns", "injected", "message"}

CASES = [("rt-eval", "rt_eval_zephyr.txt", []), ("rt-eval", "rt_eval_wrapped.txt", []),
         ("rt-eval-tmu", "rt_eval_tmu_minmax.txt", []), ("tbm", "tbm_tables.txt", []),
         ("tbm", "tbm_live.txt", []), ("cyclictest", "cyclictest_q.txt", []),
         ("cyclictest", "cyclictest_h.txt", []), ("cyclictest", "cyclictest_h.json", []),
         ("rtla-timerlat", "rtla_timerlat_hist.txt", []),
         ("stress-ng-cyclic", "stress-ng_cyclic.txt", []),
         ("jitterdebugger", "jitterdebugger_results.json", []),
         ("net-rtt", "net_rtt_seed003.txt", []),
         ("tscdeadline", "tscdeadline_latency.txt", ["--tick-hz", "2000000000"])]


def cli(capfd, *argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process; stdout (text and JSON lines alike: the output seam's
    screen writes to sys.stdout when it writes) into a buffer."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(list(argv))
    return code, buf.getvalue(), capfd.readouterr().err


def jlines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


@pytest.mark.parametrize("fmt,name,extra", CASES)
def test_every_format_imports_and_shows(capfd, tmp_path, fmt, name, extra):
    db = str(tmp_path / "i.duckdb")
    code, out, err = cli(capfd, "import", fmt, str(D / name), *extra, "--db", db, "--json")
    assert code == 0, err
    report = [x for x in jlines(out) if x["type"] == "import"][0]
    assert report["format"] == fmt and report["skipped"] == 0 and report["runs"]
    for r in report["runs"]:
        code, out, err = cli(capfd, "show", str(r["run_id"]), "--db", db, "--json")
        assert code == 0, err
        summary = jlines(out)[0]
        assert SUMMARY_KEYS <= set(summary)
        assert summary["source"] == fmt and summary["import"]["format"] == fmt
        assert summary["kind"] == ("network" if fmt == "net-rtt" else "latency")
        code, out, err = cli(capfd, "show", str(r["run_id"]), "--db", db)
        assert code == 0, err
        assert f"imported ({fmt}" in out and "None" not in out
    code, out, _ = cli(capfd, "list", "--db", db)
    assert code == 0 and "None" not in out


def test_auto_says_which_format_it_chose(capfd, tmp_path):
    code, out, err = cli(capfd, "import", "auto", str(D / "cyclictest_h.txt"),
                         str(D / "net_rtt_seed003.txt"), "--db", str(tmp_path / "a.duckdb"))
    assert code == 0, err
    assert "auto-detected as cyclictest" in out and "auto-detected as net-rtt" in out


def test_auto_rejects_unknown_text(capfd, tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("hello\nworld\n")
    code, _out, err = cli(capfd, "import", "auto", str(f), "--db", str(tmp_path / "a.duckdb"))
    assert code == 2 and f"{f}: expected output of one of" in err


def _bad_file(tmp_path: Path) -> Path:
    good = (D / "rt_eval_zephyr.txt").read_text().splitlines()
    good.insert(8, "Mean: 12 (360 ns) stddev: oops")
    f = tmp_path / "bad.txt"
    f.write_text("\n".join(good) + "\n")
    return f


def test_bad_line_exits_2_with_file_line_and_expectation(capfd, tmp_path):
    f = _bad_file(tmp_path)
    db = tmp_path / "b.duckdb"
    code, _out, err = cli(capfd, "import", "rt-eval", str(f), "--db", str(db))
    assert code == 2
    assert f"{f}:9: expected an rt_eval window line" in err and "stddev: oops" in err
    assert not db.exists() or Store(db, read_only=True).runs() == []


def test_skip_bad_imports_the_good_lines_and_counts_the_rest(capfd, tmp_path):
    f = _bad_file(tmp_path)
    db = str(tmp_path / "b.duckdb")
    code, out, err = cli(capfd, "import", "rt-eval", str(f), "--skip-bad", "--db", db,
                         "--json")
    assert code == 0, err
    report = [x for x in jlines(out) if x["type"] == "import"][0]
    assert report["skipped"] == 1 and ":9: expected" in report["skipped_lines"][0]
    assert [r["windows"] for r in report["runs"]] == [3, 6]
    code, out, _ = cli(capfd, "import", "rt-eval", str(f), "--skip-bad", "--db", db)
    assert "skipped 1 bad line(s)" in out


def test_a_bad_second_file_writes_nothing(capfd, tmp_path):
    db = tmp_path / "c.duckdb"
    cli(capfd, "import", "tbm", str(D / "tbm_live.txt"), "--db", str(db))
    before = [r.run_id for r in Store(db, read_only=True).runs()]
    code, _o, err = cli(capfd, "import", "rt-eval", str(D / "rt_eval_zephyr.txt"),
                        str(_bad_file(tmp_path)), "--db", str(db))
    assert code == 2 and "bad.txt:9" in err
    with Store(db, read_only=True) as st:
        assert [r.run_id for r in st.runs()] == before


def test_a_failure_while_writing_rolls_everything_back(capfd, tmp_path, monkeypatch):
    db = tmp_path / "d.duckdb"
    cli(capfd, "import", "tbm", str(D / "tbm_live.txt"), "--db", str(db))
    real = ingest._store_one
    calls = []

    def flaky(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        return real(*a, **kw)
    monkeypatch.setattr(ingest, "_store_one", flaky)
    # An unexpected error is one line and exit 1 (issue 20: no traceback reaches a user).
    assert main(["import", "tbm", str(D / "tbm_tables.txt"), "--db", str(db)]) == 1
    assert "internal error: RuntimeError: disk full" in capfd.readouterr().err
    with Store(db, read_only=True) as st:
        assert len(st.runs()) == 1
        assert st.histogram(1) == {} and st.windows(2) == []


def test_raw_samples_need_tick_hz_and_are_stored(capfd, tmp_path):
    db = tmp_path / "e.duckdb"
    code, _o, err = cli(capfd, "import", "tscdeadline", str(D / "tscdeadline_latency.txt"),
                        "--db", str(db))
    assert code == 2 and "--tick-hz" in err
    code, out, err = cli(capfd, "import", "tscdeadline", str(D / "tscdeadline_latency.txt"),
                         "--tick-hz", "2000000000", "--name", "kut", "--tag", "host=a",
                         "--db", str(db), "--json")
    assert code == 0, err
    with Store(db, read_only=True) as st:
        row = st.resolve("kut")
        assert st.sample_count(row.run_id) == 10 and row.tags == {"host": "a"}
        batch = next(st.iter_samples(row.run_id))
        lat = (batch.column("entry_tick").to_numpy().astype("int64")
               - batch.column("deadline_tick").to_numpy().astype("int64"))
        assert lat.tolist()[:3] == [3521, 2987, 3010]
        assert row.summary["percentile_source"] == "samples"


def test_histograms_and_windows_are_stored_at_source_resolution(capfd, tmp_path):
    db = tmp_path / "f.duckdb"
    cli(capfd, "import", "cyclictest", str(D / "cyclictest_h.txt"), "--db", str(db))
    cli(capfd, "import", "rt-eval", str(D / "rt_eval_zephyr.txt"), "--name", "z",
        "--db", str(db))
    with Store(db, read_only=True) as st:
        hist = st.histogram(1)
        assert set(hist) == {"thread0", "thread1"}
        assert hist["thread0"][-1] == (100_000, None, 20)
        assert st.resolve("z#1").summary["above_threshold_bound"] == [0, 30]
        w = st.windows(st.resolve("z#1").run_id)[0]
        assert w["extra"]["above_threshold_bound"] == [0, 10]


def test_list_json_marks_imported_runs(tmp_path):
    db = tmp_path / "g.duckdb"
    res = call_cli(["import", "net-rtt", str(D / "net_rtt_seed003.txt"), "--name", "net"], db)
    assert res.code == 0, res.stderr
    res = call_cli(["list", "--json"], db)
    assert {(r["source"], r["kind"]) for r in res.lines} == {("net-rtt", "network")}
    assert [r["name"] for r in res.lines][:2] == ["net#1", "net#2"]


def test_cyclictest_json_sysinfo_is_the_runs_host(capfd, tmp_path):
    # Issue 31: sysinfo was kept only in the import metadata; show and compare read
    # metadata.host (the provenance record's host), so they said "unknown" / None.
    db = tmp_path / "h.duckdb"
    code, _o, err = cli(capfd, "import", "cyclictest", str(D / "cyclictest.json"), "--name",
                        "c", "--db", str(db))
    assert code == 0, err
    code, out, err = cli(capfd, "show", "c", "--db", str(db), "--json")
    assert code == 0, err
    host = jlines(out)[0]["host"]
    assert (host["hostname"], host["kernel"], host["machine"]) == ("vm", "6.18.44-fc-v657",
                                                                    "x86_64")
    assert host["kernel_version"] == "#1 SMP PREEMPT_DYNAMIC @0"
    assert host["cpu_model"] == "unknown"          # not in sysinfo: never guessed


def test_a_multi_run_import_is_addressable_by_its_name(capfd, tmp_path):
    db = tmp_path / "r.duckdb"
    rtla = str(D / "rtla_timerlat_hist.txt")
    code, _o, err = cli(capfd, "import", "rtla-timerlat", rtla, "--name", "rtla",
                        "--db", str(db))
    assert code == 0, err
    code, out, err = cli(capfd, "show", "rtla", "--db", str(db), "--json")
    assert code == 0, err
    assert [s["name"] for s in jlines(out)] == ["rtla/irq", "rtla/thread"]
    # A later import of the same name: the name selects the latest group only.
    cli(capfd, "import", "cyclictest", str(D / "cyclictest_q.txt"), "--name", "rtla/x",
        "--db", str(db))
    cli(capfd, "import", "rtla-timerlat", rtla, "--name", "rtla", "--db", str(db))
    code, out, err = cli(capfd, "show", "rtla", "--db", str(db), "--json")
    assert code == 0, err
    assert [(s["run_id"], s["name"]) for s in jlines(out)] == [(4, "rtla/irq"),
                                                               (5, "rtla/thread")]
    code, out, err = cli(capfd, "compare", "rtla/irq", "rtla/thread", "--db", str(db),
                         "--json")
    assert code == 0, err
    code, _o, err = cli(capfd, "show", "rtl", "--db", str(db))
    assert code == 2 and "no run 'rtl'" in err
