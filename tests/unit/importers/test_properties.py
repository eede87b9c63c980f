"""Property tests: generated logs parse back to the same numbers; any text gives either
runs or a clean ImportFormatError (file:line, what was expected), never a crash."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from irqlab.importers import FORMATS, ImportFormatError, ParseOptions, parse_text
from irqlab.importers.summary import build_summary

D = Path(__file__).resolve().parents[2] / "fixtures" / "import"
FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

ticks = st.integers(min_value=0, max_value=10_000_000)


def _tv(t: int) -> str:
    return f"{t} ({t * 30} ns)"


@st.composite
def rt_eval_windows(draw):
    n = draw(st.integers(1, 6))
    out = []
    for _ in range(n):
        lo, hi = sorted(draw(st.lists(ticks, min_size=2, max_size=2)))
        out.append((draw(ticks), draw(ticks), draw(st.integers(0, 100)), lo, hi))
    return out


@FAST
@given(rt_eval_windows(), st.integers(30, 160), st.sampled_from(["", "> ", ">> ", "> >> "]))
def test_rt_eval_round_trip_through_mail_wrapping(windows, width, quote):
    gmin = gmax = None
    lines = ["Counter freq is 33280000 Hz. Period is 30 ns"]
    for mean, sd, pct, lo, hi in windows:
        gmin = lo if gmin is None else min(gmin, lo)
        gmax = hi if gmax is None else max(gmax, hi)
        line = (f"Mean: {_tv(mean)} stddev: {_tv(sd)} above thr: {pct}% [{_tv(lo)} - "
                f"{_tv(hi)}] global [{_tv(gmin)} {_tv(gmax)}]")
        # A mail archive breaks long lines at spaces and quotes every piece.
        parts = textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False)
        lines += [quote + part for part in parts]
    res = parse_text("rt-eval", "gen.txt", "\n".join(lines) + "\n", ParseOptions())
    got = [w for r in res.runs for w in r.windows]
    assert [(w["extra"]["mean_tick"], w["extra"]["stddev_tick"],
             w["extra"]["above_threshold_pct"], w["extra"]["min_tick"],
             w["extra"]["max_tick"]) for w in got] == windows
    assert all(w["mean_ns"] == w["extra"]["mean_tick"] * 30 for w in got)
    lo_hi = [w["extra"]["above_threshold_bound"] for w in got]
    assert all(lo * 100 // 1024 == pct == hi * 100 // 1024
               for (lo, hi), (_m, _s, pct, _l, _h) in zip(lo_hi, windows))


decimals = st.integers(0, 10_000_000).map(lambda v: (v, f"{v // 1000}.{v % 1000:03d}"))


@FAST
@given(st.lists(st.tuples(decimals, decimals, decimals, decimals), min_size=1, max_size=5))
def test_net_rtt_round_trip_is_exact_in_ns(rows):
    text = "\n".join(f"  latency min/avg/max/stddev (usec): {a[1]}/{b[1]}/{c[1]}/{d[1]}"
                     for a, b, c, d in rows)
    runs = parse_text("net-rtt", "gen.txt", text, ParseOptions()).runs
    got = [(r.figures["min_ns"], r.figures["mean_ns"], r.figures["max_ns"],
            r.figures["stddev_ns"]) for r in runs]
    assert got == [(a[0], b[0], c[0], d[0]) for a, b, c, d in rows]


@FAST
@given(st.lists(st.lists(st.integers(0, 5000), min_size=2, max_size=2), min_size=1,
                max_size=60), st.lists(st.integers(0, 50), min_size=2, max_size=2))
def test_cyclictest_histogram_round_trip(rows, overflows):
    lines = ["# Histogram"]
    lines += [f"{i:06d} {a:06d}\t{b:06d}" for i, (a, b) in enumerate(rows)]
    totals = [sum(r[t] for r in rows) for t in (0, 1)]
    lines += [f"# Total: {totals[0]:09d} {totals[1]:09d}",
              f"# Histogram Overflows: {overflows[0]:05d} {overflows[1]:05d}"]
    run = parse_text("cyclictest", "gen.txt", "\n".join(lines), ParseOptions()).runs[0]
    for t in (0, 1):
        s = run.series[f"thread{t}"]
        expect = [(i * 1000, (i + 1) * 1000, r[t]) for i, r in enumerate(rows) if r[t]]
        if overflows[t]:
            expect.append((len(rows) * 1000, None, overflows[t]))
        assert s.buckets == expect and s.count == totals[t] + overflows[t]
    build_summary(run, 1, "x")   # percentiles from any bucket shape never crash


@FAST
@given(st.lists(st.integers(-1000, 10**12), min_size=1, max_size=200))
def test_tscdeadline_round_trip(values):
    text = "breakmax=0\n" + "".join(f"latency: {v}\n" for v in values)
    run = parse_text("tscdeadline", "gen.txt", text, ParseOptions(tick_hz=10**9)).runs[0]
    assert run.latency_tick.tolist() == values
    s = build_summary(run, 1, "x")
    assert (s["min_ns"], s["max_ns"]) == (min(values), max(values))


@FAST
@given(st.lists(st.tuples(st.from_regex(r"[A-Za-z][A-Za-z ,()]{0,20}[A-Za-z)]", fullmatch=True),
                          st.lists(st.integers(0, 10**7), min_size=4, max_size=4)),
                min_size=1, max_size=6))
@pytest.mark.slow
def test_tbm_table_round_trip(rows):
    text = "              AVG     MIN     MAX     WARM MAX\n" + "".join(
        f"{label:<24}{'    '.join(map(str, v))}\n" for label, v in rows)
    runs = parse_text("tbm", "gen.txt", text, ParseOptions()).runs
    assert [(r.name, [r.figures[k] for k in ("source_avg_ns", "min_ns", "max_ns",
                                             "warm_max_ns")]) for r in runs] == \
        [(" ".join(label.split()), v) for label, v in rows]


def _clean(fmt: str, text: str, skip_bad: bool) -> None:
    try:
        res = parse_text(fmt, "fuzz.txt", text, ParseOptions(tick_hz=10**9, skip_bad=skip_bad))
    except ImportFormatError as exc:
        assert str(exc).startswith("fuzz.txt") and "expected" in str(exc)
        return
    for run in res.runs:
        build_summary(run, 1, "x")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(FORMATS)), st.text(max_size=400), st.booleans())
def test_arbitrary_text_gives_runs_or_a_clean_error(fmt, text, skip_bad):
    _clean(fmt, text, skip_bad)


FIXTURES = sorted(p.name for p in D.iterdir() if p.suffix in (".txt", ".json"))


@st.composite
def mutated_fixture(draw):
    """A real file, damaged the way logs are: lines dropped, duplicated, truncated,
    bytes flipped, numbers replaced by huge or odd ones."""
    text = (D / draw(st.sampled_from(FIXTURES))).read_text(errors="replace")
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 8))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.integers(0, 5))
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[i])
        elif op == 2:
            lines[i] = lines[i][:draw(st.integers(0, max(0, len(lines[i]))))]
        elif op == 3 and lines[i]:
            j = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:j] + draw(st.characters()) + lines[i][j + 1:]
        elif op == 4:
            lines[i] = lines[i].replace("1", draw(st.sampled_from(
                ["99999999999999999999999", "-1", "", "1.5", "x", "nan"])), 1)
        else:
            lines.insert(i, draw(st.text(max_size=60)))
    return "\n".join(lines)


_MUTATED = given(st.sampled_from(sorted(FORMATS)), mutated_fixture(), st.booleans())
_FUZZ_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]


# The same fuzz twice: 150 examples for the edit loop (./run-tests.sh --quick), 1,500 in
# the whole suite (marked slow: there the number of examples is the point).
@settings(max_examples=150, deadline=None, suppress_health_check=_FUZZ_HEALTH)
@_MUTATED
def test_fuzz_mutated_real_files_never_crash(fmt, text, skip_bad):
    _clean(fmt, text, skip_bad)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=_FUZZ_HEALTH)
@_MUTATED
def test_fuzz_mutated_real_files_never_crash_1500_examples(fmt, text, skip_bad):
    _clean(fmt, text, skip_bad)
