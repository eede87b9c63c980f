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
