"""What an imported histogram gives beyond its buckets (issue 31): stddev from the bucket
counts, exact nearest-rank percentiles at 1 us buckets, the bounds of a percentile lost
in the overflow bucket; and cyclictest --json's sysinfo as host facts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from irqlab.importers.base import ParseOptions
from irqlab.importers.cyclictest import host_facts, parse_cyclictest
from irqlab.importers.summary import build_summary
from irqlab.stats import quantile_rank

D = Path(__file__).resolve().parents[2] / "fixtures" / "import"

# Two threads, values in whole us as cyclictest -h 8 prints them, no overflow.
COUNTS = {3: (5, 0), 4: (900, 400), 5: (80, 590), 6: (10, 6), 7: (5, 4)}


def _h_text(counts: dict[int, tuple[int, int]], overflows: tuple[int, int]) -> str:
    rows = [f"{k:06d} {a:06d}\t{b:06d}" for k, (a, b) in
            sorted({**{k: (0, 0) for k in range(8)}, **counts}.items())]
    tot = [sum(c[t] for c in counts.values()) for t in (0, 1)]
    mins = [min(k for k, c in counts.items() if c[t]) for t in (0, 1)]
    maxs = [max(k for k, c in counts.items() if c[t]) for t in (0, 1)]
    return "\n".join(["# Histogram", *rows, f"# Total: {tot[0]:09d} {tot[1]:09d}",
                      f"# Min Latencies: {mins[0]:05d} {mins[1]:05d}",
                      "# Avg Latencies: 00004 00004",
                      f"# Max Latencies: {maxs[0]:05d} {maxs[1]:05d}",
                      f"# Histogram Overflows: {overflows[0]:05d} {overflows[1]:05d}", ""])


def _summary(text: str, path: str = "h.txt") -> dict:
    run = parse_cyclictest(path, text, ParseOptions()).runs[0]
    return build_summary(run, 1, "h")


def test_stddev_and_percentiles_of_a_histogram_without_overflow_are_exact_to_the_us():
    s = _summary(_h_text(COUNTS, (0, 0)))
    values_ns = np.sort(np.repeat([k * 1000 for k in COUNTS for _t in (0, 1)],
                                  [c[t] for c in COUNTS.values() for t in (0, 1)]))
    assert s["samples"] == values_ns.size == 2000
    assert s["stddev_ns"] == round(float(np.std(values_ns)))      # population, ddof 0
    assert s["stddev_ns"] > 0 and "bucket resolution" in s["stddev_from"]
    for key, q in (("p50_ns", 0.5), ("p99_ns", 0.99), ("p999_ns", 0.999)):
        assert s[key] == values_ns[quantile_rank(q, values_ns.size) - 1], key
    assert s["p999_ns"] == 7000 and s["percentiles_from"] == "histogram"
    assert "percentile_bounds" not in s
    # Per thread, too.
    t1 = np.repeat([k * 1000 for k in COUNTS], [c[1] for c in COUNTS.values()])
    assert s["series"]["thread1"]["stddev_ns"] == round(float(np.std(t1)))


def test_a_percentile_in_the_overflow_bucket_is_bounded_not_guessed():
    s = _summary((D / "cyclictest_h.txt").read_text(), str(D / "cyclictest_h.txt"))
    # 39 of 5988 samples overflowed -h 100: p99.9's rank (5983) lies among them.
    assert s["overflow"] == 39 and s["samples"] == 5988
    assert s["p999_ns"] is None and s["stddev_ns"] is None
    assert s["percentile_bounds"] == {"p999_ns": [100_000, 6_273_000]}
    assert "p99.9 lies in the overflow bucket, 100 us to 6273 us" in s["percentile_note"]
    assert s["stddev_from"].startswith("no stddev: 39 samples overflowed")
    assert s["p99_ns"] == 85_000 and s["p9999_ns"] == s["max_ns"] == 6_273_000


def test_sysinfo_becomes_host_facts_under_hostinfo_keys():
    doc = json.loads((D / "cyclictest_h.json").read_text())
    run = parse_cyclictest("c.json", json.dumps(doc), ParseOptions()).runs[0]
    assert run.host == {"hostname": "vm", "kernel": "6.18.44-fc-v657",
                        "kernel_version": "#1 SMP PREEMPT_DYNAMIC @0", "machine": "x86_64",
                        "preempt_model": "dynamic (mode unknown: not in cyclictest's "
                                         "sysinfo)"}


@pytest.mark.parametrize("sysinfo,want", [
    ({"version": "#1 SMP PREEMPT_RT Thu", "realtime": 0}, "rt"),
    ({"version": "#1 SMP", "realtime": 1}, "rt"),
    ({"version": "#1 SMP PREEMPT Thu"}, "full"),
    ({"version": "#1 SMP Thu"}, None),        # none or voluntary: sysinfo cannot say
])
def test_preempt_model_only_from_what_sysinfo_says(sysinfo, want):
    assert host_facts(sysinfo).get("preempt_model") == want


@pytest.mark.parametrize("sysinfo", [None, [], "Linux", {"nodename": 3, "release": ""}])
def test_missing_or_odd_sysinfo_gives_no_facts(sysinfo):
    assert host_facts(sysinfo) == {}


def test_stddev_matches_the_arithmetic_of_a_two_value_histogram():
    # 2 samples at 10 us, 6 at 20 us: mean 17.5 us; variance (2 * 7.5^2 + 6 * 2.5^2) / 8
    # = 18.75 us^2, stddev 4.3301 us.
    s = _summary(_h_text({10: (1, 1), 20: (3, 3)}, (0, 0)))
    assert s["stddev_ns"] == 4330


def test_overflow_bound_without_a_printed_max_is_open_above():
    from irqlab.importers.summary import _overflow_bound

    rows = [(0, 1000, 5, 1000), (1000, None, 5, 1000)]    # 5 in [0, 1) us, 5 overflowed
    assert _overflow_bound(rows, 10, 0.999, None) == [1000, None]
    assert _overflow_bound(rows, 10, 0.999, 7000) is None    # rank n: the printed max
    assert _overflow_bound(rows, 10, 0.9, 7000) == [1000, 7000]
    assert _overflow_bound(rows, 10, 0.5, 7000) is None      # inside the buckets
