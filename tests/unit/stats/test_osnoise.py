"""A noise run's figures (irqlab.stats.osnoise): noise per second and CPU available from
the probe's counters (lost records included), the largest gap and the classes from the
stored gaps, as rtla osnoise top computes its columns."""

from __future__ import annotations

import numpy as np

from irqlab.stats.osnoise import KINDS, TOP_CLASSES, noise_summary, top_classes

HZ = 1_000_000_000


def ring(cpu, busy, noise, written, lost=0):
    return {"cpu": cpu, "busy_tick": busy, "noise_tick": noise, "written": written,
            "lost": lost}


def test_noise_per_second_and_cpu_available_come_from_the_probe_counters():
    # CPU 1 lost two records from its ring: its noise still counts their time.
    rings = [ring(1, 2 * HZ, 50_000_000, 5, lost=2), ring(0, 2 * HZ, 10_000_000, 2)]
    n = noise_summary(5_000, HZ, rings, np.array([0, 0, 1, 1, 1]),
                      np.array([6_000, 9_994_000, 7_000, 8_000, 20_000_000]), None)
    assert [c["cpu"] for c in n["per_cpu"]] == [0, 1]
    cpu0, cpu1 = n["per_cpu"]
    assert cpu0["noise_per_s_ns"] == 5_000_000 and cpu0["cpu_available_pct"] == 99.5
    assert cpu1["noise_per_s_ns"] == 25_000_000 and cpu1["cpu_available_pct"] == 97.5
    assert cpu1["max_gap_ns"] == 20_000_000 and cpu1["gaps"] == 5 and cpu1["lost"] == 2
    assert n["runtime_ns"] == 4 * HZ and n["noise_ns"] == 60_000_000
    assert n["noise_per_s_ns"] == 15_000_000 and n["max_gap_ns"] == 20_000_000
    assert n["gaps"] == 7 and n["lost"] == 2 and n["classified"] is False
    assert "by_kind" not in n and "by_kind" not in cpu0


def test_a_quiet_cpu_has_no_max_gap_and_no_noise():
    n = noise_summary(5_000, HZ, [ring(2, HZ, 0, 0)], np.empty(0), np.empty(0), None)
    assert n["max_gap_ns"] is None and n["per_cpu"][0]["max_gap_ns"] is None
    assert n["noise_per_s_ns"] == 0 and n["cpu_available_pct"] == 100.0


def test_classes_count_every_kind_and_rank_names_by_time():
    kinds = np.array(["softirq", "softirq", "thread", "outside", "irq"], dtype=object)
    names = np.array(["NET_RX", "NET_RX", "ping:7", "hw", "local_timer"], dtype=object)
    gaps = np.array([40_000, 30_000, 50_000, 9_000, 6_000])
    n = noise_summary(5_000, HZ, [ring(0, HZ, int(gaps.sum()), 5)], np.zeros(5), gaps,
                      (kinds, names))
    assert list(n["by_kind"]) == list(KINDS)
    assert n["by_kind"]["softirq"] == {"count": 2, "time_ns": 70_000}
    assert n["by_kind"]["nmi"] == {"count": 0, "time_ns": 0}
    assert n["per_cpu"][0]["by_kind"] == n["by_kind"]      # one CPU: the same gaps
    assert {k: v["count"] for k, v in n["by_kind"].items()} == {
        "outside": 1, "nmi": 0, "irq": 1, "softirq": 2, "thread": 1}
    assert [(c["kind"], c["name"]) for c in n["classes"]][:2] == [
        ("softirq", "NET_RX"), ("thread", "ping:7")]


def test_top_classes_are_bounded():
    k = np.array(["thread"] * 50, dtype=object)
    names = np.array([f"t:{i}" for i in range(50)], dtype=object)
    assert len(top_classes(k, names, np.arange(50))) == TOP_CLASSES
