"""`irqlab list` / `irqlab show` on a stored run: JSON contract and human output."""

from irqlab.store import Store
from irqlab.store.interface import NewRun
from tests.conftest import call_cli

SUMMARY = {"type": "summary", "version": 1, "run_id": 1, "name": "wfi", "target": "guest",
           "arch": "x86_64", "accel": "tcg", "emulated": True, "status": "ok",
           "samples": 3, "lost": 0, "overruns": 0, "tick_hz": 1000000000,
           "period_ns": 1000000, "threshold_ns": 30000, "above_threshold": 1,
           "min_ns": 900, "mean_ns": 20000, "stddev_ns": 27000, "max_ns": 58000,
           "warm_max_ns": None, "p50_ns": 1100, "p90_ns": 58000, "p99_ns": 58000,
           "p999_ns": 58000, "p9999_ns": 58000, "injected": 0, "message": None}
WINDOW = {"index": 0, "start_s": 0.0, "samples": 3, "mean_ns": 20000, "stddev_ns": 27000,
          "min_ns": 900, "max_ns": 58000, "above_threshold": 1, "global_min_ns": 900,
          "global_max_ns": 58000}


def _store_run(db) -> int:
    with Store(db) as st:
        rid = st.create_run(NewRun("wfi", "guest", {"period_ns": 1000000},
                                   {"host": {"hostname": "h", "kernel": "6.1"},
                                    "qemu_argv": ["qemu-system-x86_64", "-accel", "tcg"]}))
        st.add_windows(rid, [WINDOW])
        st.update_run(rid, accel="tcg", emulated=True)
        st.finish_run(rid, "ok", SUMMARY)
    return rid


def test_show_json_prints_the_stored_summary(db):
    rid = _store_run(db)
    for ref in (str(rid), "wfi"):
        res = call_cli(["show", ref, "--json"], db)
        assert res.code == 0, res.stderr
        [line] = res.lines
        # The stored summary, plus how the run was made (docs/formats.md, "Provenance").
        assert {k: v for k, v in line.items() if k in SUMMARY} == SUMMARY
        assert set(line) - set(SUMMARY) == {"provenance_version", "configuration", "host"}
        assert line["host"]["hostname"] == "h" and line["host"]["kernel"] == "6.1"
        # Facts this run did not record are "unknown", never taken from this host.
        assert line["host"]["clocksource"] == "unknown"


def test_list_json_has_one_line_per_run(db):
    _store_run(db)
    _store_run(db)
    res = call_cli(["list", "--json"], db)
    assert [(x["run_id"], x["name"], x["status"], x["samples"]) for x in res.lines] == [
        (1, "wfi", "ok", 3), (2, "wfi", "ok", 3)]


def test_show_human_has_metadata_windows_and_emulation_warning(db):
    _store_run(db)
    res = call_cli(["show", "wfi"], db)
    assert res.code == 0, res.stderr
    out = res.stdout
    assert "qemu-system-x86_64 -accel tcg" in out
    assert "58.0 us" in out and "p99.99" in out
    assert "EMULATED" in out


def test_show_labels_are_target_neutral(db):
    # issue 46: a native run printed "qemu: None" and its probe's argv as "qemu command".
    _store_run(db)
    out = call_cli(["show", "wfi"], db).stdout
    lines = out.splitlines()
    assert "command: qemu-system-x86_64 -accel tcg" in lines
    assert not any(line.startswith(("qemu: ", "qemu command")) for line in lines)
    assert "None" not in out


def test_list_name_and_limit(tmp_path):
    from tests.unit.reports._runs import add_run, latencies

    db = tmp_path / "l.duckdb"
    with Store(db) as st:
        for name in ("a", "b", "a", "a"):
            add_run(st, name, latencies("ramp", 10))
    ids = lambda *args: [r["run_id"] for r in call_cli(["list", *args, "--json"], db).lines]
    assert ids("--name", "a") == [1, 3, 4]
    assert ids("--name", "a", "--limit", "2") == [3, 4]
    assert ids("--limit", "1") == [4]
    bad = call_cli(["list", "--limit", "0"], db)
    assert bad.code == 2 and "--limit" in bad.stderr


def test_show_hist_bucket_gives_uniform_buckets(tmp_path):
    from tests.unit.reports._runs import add_run, latencies

    db = tmp_path / "h.duckdb"
    with Store(db) as st:
        add_run(st, "ramp", latencies("ramp", 10_000))         # 1 .. 10000 ns
    (model,) = call_cli(["show", "ramp", "--hist", "--bucket", "1us", "--json"], db).lines
    buckets = model["buckets"]
    assert [b["low_ns"] for b in buckets] == [1] + [k * 1000 for k in range(1, 11)]
    assert all(b["high_ns"] - b["low_ns"] == 1000 for b in buckets[1:])
    assert sum(b["count"] for b in buckets) == 10_000 and buckets[1]["count"] == 1000
    assert model["scale"] == "1000 ns buckets, [low_ns, high_ns)"
    narrow = call_cli(["show", "ramp", "--hist", "--bucket", "1ns"], db)
    assert narrow.code == 2 and "give a wider --bucket" in narrow.stderr
    assert call_cli(["show", "ramp", "--bucket", "1us"], db).code == 2
