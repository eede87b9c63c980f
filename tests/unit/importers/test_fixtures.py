"""Every parser against real output (tests/fixtures/import/README.md): exact values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from irqlab.importers import FORMATS, ParseOptions, parse_file, sniff
from irqlab.importers.base import read_text
from irqlab.importers.summary import build_summary

D = Path(__file__).resolve().parents[2] / "fixtures" / "import"


def parse(fmt: str, name: str, **kw):
    return parse_file(fmt, D / name, ParseOptions(**kw))


def summary(run) -> dict:
    return build_summary(run, 1, "x")


def test_rt_eval_new_generation_windows_keep_ticks_ns_and_the_percent_bound():
    res = parse("rt-eval", "rt_eval_zephyr.txt")
    assert [len(r.windows) for r in res.runs] == [3, 6]   # a reboot splits the runs
    run = res.runs[0]
    assert run.tick_hz == 33_280_000
    assert run.period_ns == 10_000_000              # 332800 ticks at 33.28 MHz
    w = run.windows[0]
    assert (w["mean_ns"], w["stddev_ns"], w["min_ns"], w["max_ns"]) == \
        (18000, 112110, 7950, 2008650)
    assert (w["global_min_ns"], w["global_max_ns"]) == (7950, 2008650)
    assert w["samples"] == 1024
    assert w["extra"]["mean_tick"] == 600 and w["extra"]["max_tick"] == 66955
    # "0%" of 1024 truncated: 0..10 samples, never stored as a count of 0.
    assert w["extra"]["above_threshold_pct"] == 0
    assert w["extra"]["above_threshold_bound"] == [0, 10]
    assert w["extra"]["above_threshold_exact"] is False
    assert run.windows[1]["start_s"] == pytest.approx(10.24)
    s = summary(run)
    assert s["above_threshold"] is None and s["above_threshold_bound"] == [0, 30]
    assert s["samples"] == 3072 and s["samples_assumed"] is True
    assert (s["min_ns"], s["max_ns"], s["warm_max_ns"]) == (7950, 2008650, 1764900)
    assert s["mean_ns"] == round((18000 + 11640 + 10740) / 3)
    assert s["stddev_ns"] is None
    assert all(s[k] is None for k in ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "p9999_ns"))
    assert s["percentile_source"] is None


def test_rt_eval_old_generation_has_no_extremes_and_no_threshold():
    run = parse("rt-eval", "rt_eval_zephyr.txt").runs[1]
    assert {(w["mean_ns"], w["stddev_ns"]) for w in run.windows} == {(930, 0)}
    assert all(math.isnan(w["start_s"]) for w in run.windows)   # no alarm line: unknown
    s = summary(run)
    assert s["min_ns"] is None and s["max_ns"] is None and s["above_threshold"] is None
    assert "above_threshold_bound" not in s


def test_rt_eval_mail_wrapped_lines_are_joined():
    res = parse("rt-eval", "rt_eval_wrapped.txt")
    first = res.runs[0].windows
    assert [(w["mean_ns"], w["min_ns"], w["max_ns"]) for w in first] == \
        [(18000, 7950, 2008650), (11640, 7980, 1764900)]
    later = res.runs[1].windows
    assert (later[0]["max_ns"], later[0]["extra"]["max_tick"]) == (37680, 1256)
    assert later[2]["extra"]["above_threshold_bound"] == [41, 51]   # "4%" of 1024
    assert all(w["global_max_ns"] is None for w in later)          # no "global" part


def test_rt_eval_quoted_lines_equal_the_unquoted_ones():
    quoted = parse("rt-eval", "rt_eval_quoted.txt").runs
    plain = parse("rt-eval", "rt_eval_zephyr.txt").runs
    strip = [[{k: v for k, v in w.items() if k != "extra"} for w in r.windows]
             for r in quoted]
    assert strip[0] == [{k: v for k, v in w.items() if k != "extra"}
                        for w in plain[0].windows]


def test_rt_eval_tmu_driver_lines():
    run = parse("rt-eval-tmu", "rt_eval_tmu.txt").runs[0]
    assert [w["mean_ns"] for w in run.windows] == [1320, 1320, 1500, 1320, 1680, 9180, 9060]
    assert run.windows[2]["extra"]["stddev_tick"] == 129
    assert run.windows[1]["start_s"] == pytest.approx(94.136632 - 83.873162)
    # The Zephyr reader ignores the driver's lines and vice versa.
    with pytest.raises(Exception):
        parse("rt-eval", "rt_eval_tmu.txt")


def test_rt_eval_tmu_min_max_are_since_boot():
    run = parse("rt-eval-tmu", "rt_eval_tmu_minmax.txt").runs[0]
    w = run.windows[0]
    assert (w["min_ns"], w["max_ns"]) == (None, None)
    assert (w["global_min_ns"], w["global_max_ns"]) == (3750, 8283060)
    assert w["extra"]["global_max_tick"] == 276102
    s = summary(run)
    assert (s["min_ns"], s["max_ns"], s["samples"]) == (3750, 8283060, 5120)


def test_window_samples_option_overrides_the_assumption():
    run = parse("rt-eval", "rt_eval_zephyr.txt", window_samples=1000).runs[0]
    assert run.windows[0]["samples"] == 1000
    assert run.windows[0]["extra"]["above_threshold_bound"] == [0, 9]
    assert "samples_assumed" not in summary(run)


def test_tbm_tables_one_run_per_row_named_by_label():
    runs = parse("tbm", "tbm_tables.txt").runs
    assert [r.name for r in runs] == [
        "NODEBUG no WFI", "NODEBUG WFI", "NODEBUG no WFI credit2", "NODEBUG WFI credit2",
        "DEBUG no WFI", "DEBUG WFI", "DEBUG WFI, credit2", "DEBUG WFI (yield, no block)",
        "DEBUG WFI (yield, no block) credit2"]
    s = summary(runs[3])
    assert (s["source_avg_ns"], s["min_ns"], s["max_ns"], s["warm_max_ns"]) == \
        (8080, 7890, 10320, 8300)
    assert s["mean_ns"] is None and s["samples"] is None
    assert summary(runs[-1])["warm_max_ns"] == 5430


def test_tbm_live_lines_last_snapshot_wins():
    run = parse("tbm", "tbm_live.txt").runs[0]
    s = summary(run)
    assert (s["max_ns"], s["warm_max_ns"], s["min_ns"], s["source_avg_ns"]) == \
        (8470, 2990, 2830, 4596)
    assert s["mean_ns"] is None and s["tick_hz"] == 99_990_008
    assert run.provenance["snapshots"] == 10


def test_net_rtt_lines_are_network_runs():
    runs = parse("net-rtt", "net_rtt_seed003.txt").runs
    assert len(runs) == 8 and {r.kind for r in runs} == {"network"}
    s = summary(runs[0])
    assert (s["samples"], s["min_ns"], s["mean_ns"], s["max_ns"], s["stddev_ns"]) == \
        (60000, 61443, 81581, 487319, 11859)
    assert summary(runs[-1])["max_ns"] == 4302674
    assert s["kind"] == "network" and s["p99_ns"] is None


def test_cyclictest_quiet_lines():
    run = parse("cyclictest", "cyclictest_q.txt").runs[0]
    t0, t1 = run.series["thread0"], run.series["thread1"]
    assert (t0.count, t0.min_ns, t0.mean_ns, t0.max_ns) == (2987, 17000, 76000, 3768000)
    assert (t1.count, t1.extra["interval_us"]) == (1994, 1500)
    s = summary(run)
    assert (s["samples"], s["min_ns"], s["max_ns"]) == (4981, 17000, 5245000)
    assert s["mean_ns"] == round((2987 * 76000 + 1994 * 82000) / 4981)
    assert s["p50_ns"] is None and s["percentile_source"] is None


def test_cyclictest_histogram_with_overflows():
    run = parse("cyclictest", "cyclictest_h.txt").runs[0]
    t0 = run.series["thread0"]
    assert t0.count == 2969 + 20
    assert t0.buckets[-1] == (100_000, None, 20)
    assert t0.extra["overflow_cycles"][:3] == [0, 21, 74]
    assert "count_mismatch" not in t0.extra
    assert (t0.min_ns, t0.max_ns, t0.mean_ns) == (20000, 6273000, 73000)
    s = summary(run)
    assert s["percentile_source"] == "histogram" and s["overflow"] == 39
    assert (s["p50_ns"], s["p99_ns"]) == (67000, 85000)   # checked against np.repeat


def test_cyclictest_json_with_and_without_histogram():
    plain = parse("cyclictest", "cyclictest.json").runs[0]
    assert plain.series["thread0"].buckets == []
    assert (plain.series["thread0"].count, plain.series["thread1"].max_ns) == (2989, 1149000)
    hist = parse("cyclictest", "cyclictest_h.json").runs[0]
    t0 = hist.series["thread0"]
    assert t0.count == 1934 and sum(n for _l, _h, n in t0.buckets) == 1934
    assert t0.buckets[-1] == (400_000, None, 1934 - 1871)       # -h 400 from the cmdline
    over = summary(parse("cyclictest", "cyclictest_h50_overflow.json").runs[0])
    assert over["p50_ns"] is None and over["max_ns"] == 4052000   # rank in overflow


def test_stress_ng_cyclic():
    run = parse("stress-ng-cyclic", "stress-ng_cyclic.txt").runs[0]
    s = summary(run)
    assert (s["samples"], s["min_ns"], s["max_ns"], s["mean_ns"], s["stddev_ns"]) == \
        (2000, 16934, 63504, 24571, 3294)
    assert (s["p50_ns"], s["p90_ns"], s["p99_ns"], s["p999_ns"], s["p9999_ns"]) == \
        (24786, 27130, 32648, 61906, 63504)
    assert s["percentile_source"] == "source"
    assert s["source_percentiles"] == {"25.00%": 23715, "75.00%": 25628, "95.40%": 29593,
                                       "99.50%": 38807}
    assert run.period_ns == 100_000
    assert sum(n for _l, _h, n in run.series["all"].buckets) == 2000


def test_jitterdebugger_overflow_is_what_the_histogram_misses():
    run = parse("jitterdebugger", "jitterdebugger_results.json").runs[0]
    cpu1 = run.series["cpu1"]
    assert cpu1.count == 2993 and cpu1.buckets[-1] == (987_000, None, 6)
    assert (cpu1.min_ns, cpu1.max_ns) == (14000, 6084000)
    ns = parse("jitterdebugger", "jitterdebugger_nsec_results.json").runs[0]
    assert ns.series["cpu0"].resolution_ns == 1 and ns.series["cpu0"].min_ns == 13893


def test_rtla_irq_and_thread_are_separate_runs():
    irq, thr = parse("rtla-timerlat", "rtla_timerlat_hist.txt").runs
    assert (irq.name, thr.name) == ("irq", "thread")
    assert irq.series["cpu0"].buckets[:2] == [(0, 1000, 58572), (1000, 2000, 1422)]
    assert thr.series["cpu3"].buckets[-1] == (8000, 9000, 1)
    s = summary(thr)
    assert (s["samples"], s["min_ns"], s["max_ns"]) == (240004, 1000, 8000)
    assert (s["p50_ns"], s["p99_ns"]) == (1000, 2000)


def test_tscdeadline_raw_samples_need_a_tick_rate():
    with pytest.raises(Exception, match="--tick-hz"):
        parse("tscdeadline", "tscdeadline_latency.txt")
    run = parse("tscdeadline", "tscdeadline_latency.txt", tick_hz=2_000_000_000).runs[0]
    assert run.latency_tick.tolist()[:3] == [3521, 2987, 3010]
    s = summary(run)
    assert s["percentile_source"] == "samples"
    assert (s["samples"], s["min_ns"], s["max_ns"], s["p50_ns"]) == (10, 1477, 7937, 1500)


@pytest.mark.parametrize("name,fmt", [
    ("rt_eval_zephyr.txt", "rt-eval"), ("rt_eval_wrapped.txt", "rt-eval"),
    ("rt_eval_tmu.txt", "rt-eval-tmu"), ("tbm_tables.txt", "tbm"), ("tbm_live.txt", "tbm"),
    ("net_rtt_seed003.txt", "net-rtt"), ("cyclictest_q.txt", "cyclictest"),
    ("cyclictest_h.txt", "cyclictest"), ("cyclictest.json", "cyclictest"),
    ("stress-ng_cyclic.txt", "stress-ng-cyclic"),
    ("jitterdebugger_results.json", "jitterdebugger"),
    ("rtla_timerlat_hist.txt", "rtla-timerlat"), ("tscdeadline_latency.txt", "tscdeadline")])
def test_sniffing_picks_the_right_format(name, fmt):
    assert sniff(read_text(D / name))[0] == fmt
    assert fmt in FORMATS
