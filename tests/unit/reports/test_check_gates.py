"""check's gates: run status, lost samples, hardware, samples a percentile needs; stable
JUnit names."""

import dataclasses

import pytest

from irqlab.durations import format_latency
from irqlab.reports.check import Gates, evaluate, samples_needed, show_value, suite_name
from irqlab.reports.data import load_run
from irqlab.stats import quantile_rank
from irqlab.stats.fields import CHECK_LIMITS, SUMMARY_TABLE
from irqlab.store import Store
from tests.unit.reports._runs import add_run, latencies


@pytest.fixture(scope="module")
def gdb(tmp_path_factory):
    path = tmp_path_factory.mktemp("gates") / "g.duckdb"
    with Store(path) as st:
        add_run(st, "stopped", latencies("ramp", 3_000), status="interrupted")
        add_run(st, "lossy", latencies("ramp", 3_000), lost=7)
        add_run(st, "uncounted", latencies("ramp", 3_000), lost=None)
        add_run(st, "emu", latencies("ramp", 3_000), accel="tcg", emulated=True)
        add_run(st, "unsaid", latencies("ramp", 3_000), accel=None, emulated=None)
        add_run(st, "short", latencies("ramp", 999))
    return path


def _run(path, ref):
    with Store(path, read_only=True) as st:
        return load_run(st, st.resolve(ref))


def _gate(res, name):
    (g,) = [g for g in res.gates if g["gate"] == name]
    return g


@pytest.mark.parametrize("col", [c for c in CHECK_LIMITS if c.field.quantile is not None],
                         ids=lambda c: c.heading)
def test_samples_needed_is_where_nearest_rank_leaves_the_max(col):
    q = col.field.quantile
    n = samples_needed(q)
    assert n == round(1 / col.field.exceedance)          # p99.9 -> 1000, p50 -> 2
    assert quantile_rank(q, n) == n - 1                  # one sample lies beyond it
    assert quantile_rank(q, n - 1) == n - 1              # one fewer: it is the max


def test_interrupted_fails_unless_allowed(gdb):
    run = _run(gdb, "stopped")
    strict = evaluate(run, [("max", 10_000)])
    assert not strict.passed and strict.outcomes[0]["passed"]
    assert _gate(strict, "status")["text"].startswith("FAIL status interrupted")
    allowed = evaluate(run, [("max", 10_000)], gates=Gates(allow_interrupted=True))
    assert allowed.passed
    assert any("judged on the samples it has" in n for n in allowed.notes)


def test_lost_over_the_limit_fails_and_unknown_is_skipped(gdb):
    lossy = _run(gdb, "lossy")
    assert not evaluate(lossy, [("max", 10_000)]).passed
    assert evaluate(lossy, [("max", 10_000)], gates=Gates(max_lost=7)).passed
    unknown = evaluate(_run(gdb, "uncounted"), [("max", 10_000)])
    g = _gate(unknown, "lost")
    assert unknown.passed and g["skipped"] and g["value"] is None


def test_hardware_gate(gdb):
    hw = Gates(require_hardware=True)
    emu = evaluate(_run(gdb, "emu"), [("max", 10_000)])
    assert emu.passed and emu.emulated is True and emu.accel == "tcg"
    assert not [g for g in emu.gates if g["gate"] == "hardware"]   # asked for only
    assert not evaluate(_run(gdb, "emu"), [("max", 10_000)], gates=hw).passed
    assert not evaluate(_run(gdb, "unsaid"), [("max", 10_000)], gates=hw).passed
    assert evaluate(_run(gdb, "lossy"), [("max", 10_000)],
                    gates=dataclasses.replace(hw, max_lost=10)).passed


def test_too_few_samples_for_a_percentile_fails_naming_the_number(gdb):
    res = evaluate(_run(gdb, "short"), [("p99.9", 10_000), ("p99", 10_000)])
    g = _gate(res, "samples")
    assert not res.passed and all(o["passed"] for o in res.outcomes)
    assert g["value"] == 999 and g["allowed"] == 1000
    assert "p99.9 needs at least 1000" in g["text"] and "p99 " not in g["text"]
    assert [o["samples_needed"] for o in res.outcomes] == [1000, 100]
    ok = evaluate(_run(gdb, "stopped"), [("p99.9", 10_000)],
                  gates=Gates(allow_interrupted=True))
    assert ok.passed and any("rests on 3 samples beyond it" in n for n in ok.notes)
    # Limits on the max need no sample count: no samples gate.
    assert not [g for g in evaluate(_run(gdb, "short"), [("max", 999)]).gates
                if g["gate"] == "samples"]


def test_values_print_as_the_run_summary_prints_them():
    # The summary table (irqlab run / show) prints latencies with format_latency.
    assert any(c.key == "p999_ns" for c in SUMMARY_TABLE)
    for ns in (930, 9_999, 823_249, 2_012_345, 1_500_000_000):
        assert show_value(ns, "ns") == format_latency(ns)
    assert show_value(823_249, "ns") == "823.2 us"
    assert show_value(12, "count") == "12"


def test_suite_name_is_the_name_or_the_configuration_of_a_default_name(tmp_path):
    with Store(tmp_path / "n.duckdb") as st:
        for name in ("nightly", "guest-20261126-101010", "guest-20261126-121212",
                     "suite-20261126-101010-guest", "guest-2026"):
            add_run(st, name, latencies("ramp", 10), tags={"cfg": "a"})
        rows = [st.resolve(str(i)) for i in range(1, 6)]
    names = [suite_name(r) for r in rows]
    assert names[0] == "nightly" and names[4] == "guest-2026"
    assert names[1] == names[2] == names[3] == "guest (period=1ms, window=1000ms, cfg=a)"
    # Another configuration (a parameter off its default) is another suite.
    poll = dataclasses.replace(rows[1], params={**rows[1].params, "idle": "poll"})
    assert suite_name(poll) == "guest (period=1ms, idle=poll, window=1000ms, cfg=a)"
    # A target whose defaults cannot be made without options: every set parameter.
    serial = dataclasses.replace(rows[1], target="serial", name="serial-20261126-101010")
    assert suite_name(serial) == "serial (period=1ms, warmup=1, window=1000ms, cfg=a)"
    # Runs of a --repeat series carry its (random) id as a tag: not part of the name.
    tagged = dataclasses.replace(rows[1], tags={**rows[1].tags, "series": "g-1a2b3c"})
    assert suite_name(tagged) == names[1]
