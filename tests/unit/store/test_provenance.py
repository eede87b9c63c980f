"""The provenance record (irqlab.store.provenance) and compare's "what differs", on runs
stored with fixed host facts (a fixture of facts: this host is never changed)."""

from __future__ import annotations

import os

from irqlab.reports.compare import build_compare
from irqlab.reports.data import load_runs
from irqlab.reports.select import select_runs
from irqlab.runner.hostinfo import UNKNOWN, host_info, tuning_facts
from irqlab.store import Store
from irqlab.store.provenance import HOST_FACTS, differs, facts, provenance
from tests.unit.reports._runs import add_run, latencies

TUNED = {"clocksource": "tsc", "cpufreq_governor": "performance", "cpuidle_driver":
         "intel_idle", "cstates": "POLL,C1,C6 (disabled)", "isolcpus": "2-3",
         "nohz_full": "2-3", "smt": "off (active 0)", "thp": "never",
         "irqbalance": "not running", "preempt_model": "rt"}


def _host(**changed: str) -> dict:
    return {"host": {"hostname": "h1", "kernel": "6.1.0", **TUNED, **changed}}


def test_two_hosts_with_different_governors_differ_in_the_governor_only(tmp_path):
    with Store(tmp_path / "g.duckdb") as st:
        add_run(st, "perf", latencies("ramp", 2000), extra_meta=_host())
        add_run(st, "save", latencies("ramp", 2000),
                extra_meta=_host(cpufreq_governor="powersave"))
        model = build_compare(load_runs(st, select_runs(st, ["perf", "save"])))
    assert model["differs"] == [{"fact": "host.cpufreq_governor",
                                 "values": ["performance", "powersave"]}]


def test_a_knob_differs_and_a_fact_not_recorded_is_never_called_different(tmp_path):
    knob = {"hooks": {"knob:halt_poll": {"requested": "0", "status": "applied"}}}
    with Store(tmp_path / "k.duckdb") as st:
        add_run(st, "a", latencies("ramp", 100), extra_meta={**_host(), **knob})
        add_run(st, "b", latencies("ramp", 100), extra_meta={**_host(), "hooks": {
            "knob:halt_poll": {"requested": "200us", "status": "applied"}}})
        # An older run without the tuning facts: "unknown" there, not different.
        add_run(st, "old", latencies("ramp", 100), extra_meta=knob)
        rows = {r.name: r for r in st.runs()}
    records = {n: provenance(r) for n, r in rows.items()}
    assert differs([records["a"], records["b"]]) == [
        {"fact": "knob.halt_poll", "values": ["0", "200us"]}]
    assert differs([records["a"], records["old"]]) == []
    assert records["old"]["host"]["clocksource"] == UNKNOWN


def test_record_carries_loads_knobs_and_read_back_values(tmp_path):
    meta = {"hooks": {
        "load:cpu": {"kind": "cpu", "params": {"cpus": "1"}, "argv": ["stress-ng"],
                     "cpu_s": 1.5, "exit_code": 0, "status": "ok"},
        "knob:pin": {"requested": "1", "status": "applied",
                     "threads": [{"thread": "CPU 0/KVM", "tid": 7, "cpu": 1}],
                     "restored": True}},
        "native": {"policy": "SCHED_FIFO", "priority": 80, "cpus": [1]}}
    with Store(tmp_path / "r.duckdb") as st:
        add_run(st, "r", latencies("ramp", 10), extra_meta=meta, tags={"kernel": "rt"})
        rec = provenance(st.resolve("r"))
    conf = rec["configuration"]
    assert conf["loads"] == [{"kind": "cpu", "params": {"cpus": "1"}, "status": "ok",
                              "proof": {"argv": ["stress-ng"], "cpu_s": 1.5,
                                        "exit_code": 0}}]
    [pin] = conf["knobs"]
    assert pin["applied"] and pin["restored"] is True
    assert pin["read_back"] == {"threads": [{"thread": "CPU 0/KVM", "tid": 7, "cpu": 1}]}
    assert conf["scheduling"]["probe_policy"] == "SCHED_FIFO"
    assert conf["tags"] == {"kernel": "rt"}
    flat = facts(rec)
    assert flat["knob.pin"] == "1" and flat["load.cpu"] == "cpus=1"
    assert flat["tag.kernel"] == "rt" and flat["host.hostname"] == "h1"
    assert list(rec["host"]) == list(HOST_FACTS)


def test_host_facts_come_from_their_sysfs_files():
    facts_now = tuning_facts()
    assert set(facts_now) <= set(HOST_FACTS) and set(facts_now) <= set(host_info())
    path = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
    if os.path.exists(path):
        with open(path) as f:
            assert facts_now["clocksource"] == f.read().strip()
    else:
        assert facts_now["clocksource"] == UNKNOWN
    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    if os.path.exists(thp):
        with open(thp) as f:
            assert f"[{facts_now['thp']}]" in f.read()
