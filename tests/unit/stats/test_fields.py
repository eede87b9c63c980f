"""The catalog of summary fields (irqlab.stats.fields), the one summary builder and the
one ns formatter (irqlab.durations.format_ns)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from irqlab.durations import NS_STYLES, format_ns, parse_duration_ns
from irqlab.importers.base import ParsedRun, Series
from irqlab.importers.summary import build_summary as import_summary
from irqlab.measure.config import RunConfig
from irqlab.measure.summary import build_summary as run_summary
from irqlab.runner.accel import AccelPlan
from irqlab.stats import PERCENTILES, RunStats, RunSummary, ticks_to_ns
from irqlab.stats import fields
from irqlab.stats.fields import (CHECK_LIMITS, IMPORT_FIELDS, LATENCY_FIELDS,
                                 PERCENTILE_FIELDS, SUMMARY_FIELDS, SUMMARY_TABLE,
                                 make_summary, stats_figures)

HZ = 33_333_333   # 30 ns per tick, as in the seed logs
RUN_KEYS = [f.key for f in SUMMARY_FIELDS]
IMPORT_KEYS = RUN_KEYS + [f.key for f in IMPORT_FIELDS]


def _stats(latency_tick: list[int], window_tick: int = 10) -> RunSummary:
    """A finished run over ``latency_tick``, one sample per tick of guest time."""
    st = RunStats(tick_hz=HZ, threshold_tick=300, window_tick=window_tick, warmup_windows=1)
    lat = np.asarray(latency_tick, dtype=np.int64)
    st.add(np.arange(lat.size, dtype=np.int64), lat)
    return st.finish()[1]


def _measured(s: RunSummary | None, with_header: bool = True) -> dict:
    hdr = SimpleNamespace(tick_hz=HZ, arch="x86_64") if with_header else None
    plan = AccelPlan("tcg", "tcg", True) if with_header else None
    return run_summary(RunConfig(), 7, "t", plan, hdr, "ok", s, 1, 2, 3, None)


# ---- the catalog covers exactly what the builders produce ---------------------------

def test_a_measured_summary_has_exactly_the_catalog_keys_in_order() -> None:
    assert list(_measured(_stats(list(range(250, 400))))) == RUN_KEYS
    # A run that never booted: same keys, counts 0, statistics None.
    empty = _measured(None, with_header=False)
    assert list(empty) == RUN_KEYS
    assert empty["samples"] == 0 and empty["above_threshold"] == 0
    assert all(empty[f.key] is None for f in LATENCY_FIELDS)


def test_a_measured_summary_converts_every_statistic_of_the_run() -> None:
    s = _stats(list(range(250, 400)) + [5000])
    out = _measured(s)
    assert out["type"] == "summary" and out["version"] == fields.SUMMARY_VERSION
    assert (out["run_id"], out["name"], out["lost"], out["overruns"], out["injected"]) == \
        (7, "t", 1, 2, 3)
    assert out["samples"] == 151 and out["above_threshold"] == s.above_threshold > 0
    assert out["max_ns"] == ticks_to_ns(5000, HZ) and out["min_ns"] == ticks_to_ns(250, HZ)
    for f in LATENCY_FIELDS:
        assert out[f.key] == ticks_to_ns(getattr(s, f.tick_attr), HZ), f.key
    assert out["warm_max_ns"] is not None


@pytest.mark.parametrize("how", ["samples", "series", "windows", "figures"])
def test_an_imported_summary_starts_with_the_catalog_keys(how: str) -> None:
    run = ParsedRun(source="cyclictest", path="x.log", line=1, tick_hz=HZ)
    if how == "samples":
        run.latency_tick = np.arange(100, 200)
    elif how == "series":
        run.series = {"T0": Series(buckets=[(0, 1000, 5), (1000, 2000, 3)], resolution_ns=1000)}
    elif how == "windows":
        run.windows = [{"index": i, "samples": 10, "mean_ns": 5, "stddev_ns": 1, "min_ns": 1,
                        "max_ns": 9 + i, "global_min_ns": 1, "global_max_ns": 9 + i,
                        "above_threshold": 0} for i in range(3)]
    else:
        run.figures = {"max_ns": 900}
    out = import_summary(run, 3, "imp")
    assert list(out)[:len(IMPORT_KEYS)] == IMPORT_KEYS
    assert out["source"] == "cyclictest" and out["target"] == "import"
    # Whatever statistic a resolution fills in is a catalog key (no private spelling).
    filled = {k for k in out if k.endswith("_ns") and out[k] is not None}
    assert filled and filled <= {f.key for f in SUMMARY_FIELDS}


def test_make_summary_refuses_a_key_outside_the_catalog() -> None:
    with pytest.raises(ValueError, match="p99_9_ns"):
        make_summary(1, "x", {"p99_9_ns": 5})
    with pytest.raises(ValueError, match="source"):
        make_summary(1, "x", {"source": "tbm"})          # import-only without imported
    assert make_summary(1, "x", {"source": "tbm"}, imported=True)["source"] == "tbm"


def test_stats_figures_without_samples_or_tick_rate() -> None:
    s = _stats([300, 310])
    assert stats_figures(s, None)["samples"] == 0
    assert stats_figures(None, HZ) == stats_figures(s, None)
    assert stats_figures(s, HZ)["p50_ns"] == ticks_to_ns(s.p50_tick, HZ)


# ---- the catalog agrees with the statistics and with itself ------------------------

def test_percentile_fields_are_the_percentiles_the_stats_layer_computes() -> None:
    # 1..10000 ticks: the nearest-rank percentile q is q * 10000, within the histogram's
    # 1/128 relative error.
    s = _stats(list(range(1, 10_001)), window_tick=100_000)
    assert [name for name, _q in PERCENTILES] == [f.tick_attr for f in PERCENTILE_FIELDS]
    for f in PERCENTILE_FIELDS:
        assert abs(getattr(s, f.tick_attr) - f.quantile * 10_000) <= f.quantile * 10_000 / 128


def test_every_latency_field_is_a_run_statistic() -> None:
    attrs = set(RunSummary.__dataclass_fields__)
    assert {f.tick_attr for f in LATENCY_FIELDS} <= attrs
    with pytest.raises(ValueError):
        fields.field("samples").tick_attr


def test_the_summary_table_shows_every_count_and_latency() -> None:
    shown = {c.key for c in SUMMARY_TABLE}
    assert {f.key for f in SUMMARY_FIELDS if f.kind in ("count", "latency")} == shown


def test_keys_and_labels_are_unique() -> None:
    every = SUMMARY_FIELDS + IMPORT_FIELDS + fields.IMPORT_EXTRA_FIELDS
    assert len({f.key for f in every}) == len(every)
    assert len({f.label for f in every}) == len(every)
    for view in (fields.SUMMARY_TABLE, fields.SUITE_TABLE, fields.COMPARE_TABLE,
                 fields.MATRIX_TABLE, fields.LIST_TABLE, fields.WINDOW_TABLE, CHECK_LIMITS):
        assert len({c.heading for c in view}) == len(view)


def test_check_limit_names_are_option_names() -> None:
    assert all(re.fullmatch(r"[a-z][a-z0-9.-]*", c.heading) for c in CHECK_LIMITS)


def test_unknown_key_names_itself() -> None:
    with pytest.raises(KeyError, match="p95_ns"):
        fields.field("p95_ns")


def test_exceedance_is_the_decimal_fraction() -> None:
    assert [f.exceedance for f in fields.TAIL_FIELDS] == [1e-3, 1e-4]
    assert fields.field("p50_ns").exceedance == 0.5


# ---- the one ns formatter ------------------------------------------------------------

@pytest.mark.parametrize("ns,fixed,sig3,exact", [
    (29, "29 ns", "29 ns", "0.029 us"),
    (930, "930 ns", "930 ns", "0.93 us"),
    (5000, "5000 ns", "5.00 us", "5 us"),
    (12_345, "12.3 us", "12.3 us", "12.345 us"),
    (30_000, "30.0 us", "30.0 us", "30 us"),
    (123_456, "123.5 us", "123 us", "123.456 us"),
    (1_000_000, "1.00 ms", "1.00 ms", "1 ms"),
    (2_010_000, "2.01 ms", "2.01 ms", "2.01 ms"),
    (1_500_000_000, "1.50 s", "1.50 s", "1500 ms"),
    (-12_345, "-12.3 us", "-12.3 us", "-12.345 us"),
])
def test_format_ns_styles(ns: int, fixed: str, sig3: str, exact: str) -> None:
    assert [format_ns(ns), format_ns(ns, "sig3"), format_ns(ns, "exact")] == \
        [fixed, sig3, exact]


def test_format_ns_none_and_floats() -> None:
    assert {format_ns(None, style) for style in NS_STYLES} == {"—"}
    assert format_ns(29.6, "sig3") == "30 ns"          # plot axes pass floats
    assert format_ns(100_000.0, "sig3") == "100 us"     # '100.' loses its dot


@pytest.mark.parametrize("ns", [500, 30_000, 100_000, 1_000_000, 1_500_000, 250_000_000])
def test_exact_style_reads_back_as_a_duration(ns: int) -> None:
    # Warnings suggest `--threshold 30us`: the text must parse to the same value.
    assert parse_duration_ns(format_ns(ns, "exact").replace(" ", "")) == ns


def test_format_ns_unknown_style() -> None:
    with pytest.raises(ValueError, match="sig3"):
        format_ns(5, "sig4")  # type: ignore[arg-type]
