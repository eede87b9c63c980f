"""Importers never trace back (issue 20, item 6): out-of-range numbers are one clean error
naming file:line, parsing is linear in the input, inserts are batched, and a bounded
hypothesis fuzz over every importer, storing included, finds no crash."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from irqlab.cli.main import main
from irqlab.importers import ImportFormatError, ParseOptions, parse_text
from irqlab.importers.fuzz import FIXTURES, fixture_texts, fuzz, mutate, run_case
from irqlab.store import Store

D = Path(__file__).parents[2] / "fixtures" / "import"
ZEPHYR = ("Mean: 600 (18000 ns) stddev: 3737 (112110 ns) above thr: 0% [265 (7950 ns) - "
          "66955 (2008650 ns)] global [265 (7950 ns) 66955 (2008650 ns)]")


def _import(tmp_path, capsys, fmt: str, text: str, *extra: str) -> tuple[int, str]:
    f = tmp_path / "input.txt"
    f.write_text(text)
    try:
        code = main(["import", fmt, str(f), "--db", str(tmp_path / "i.duckdb"), *extra])
    except SystemExit as exc:          # argparse refused an argument
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("fmt,text,line", [
    # The cases: a 400-digit ns value, an Avg of 400 nines, a negative count.
    ("rt-eval", "Counter freq is 33280000 Hz. Period is 30 ns\n"
     + ZEPHYR.replace("18000 ns", "9" * 400 + " ns") + "\n", 2),
    ("cyclictest", "T: 0 (22465) P: 0 I:1000 C:   2987 Min:     17 Act:   65 Avg:   "
     + "9" * 400 + " Max:    3768\n", 1),
    ("rt-eval", "Counter freq is 33280000 Hz. Period is 30 ns\n"
     + ZEPHYR.replace("66955 (2008650 ns)]", "66955 (" + "1" + "0" * 25 + " ns)]") + "\n", 2),
    ("net-rtt", "Total: 99999999999999999999999 packets\n"
     "  latency min/avg/max/stddev (usec): 61.443/81.581/487.319/11.859\n", 1),
])
def test_out_of_range_numbers_are_one_located_error(tmp_path, capsys, fmt, text, line):
    code, err = _import(tmp_path, capsys, fmt, text)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert f"input.txt:{line}" in lines[0], lines[0]


def _line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


def test_cyclictest_json_negative_histogram_count_is_refused(tmp_path, capsys):
    doc = json.loads((D / "cyclictest_h.json").read_text())
    hist = doc["thread"]["1"]["histogram"]
    hist[next(iter(hist))] = -5
    text = json.dumps(doc, indent=2)
    code, err = _import(tmp_path, capsys, "cyclictest", text)
    assert code == 2 and len(err.strip().splitlines()) == 1
    # The line that opens thread 1's object, not line 1.
    line = _line_of(text, '"1": {')
    assert f"input.txt:{line}:" in err, err


def test_json_out_of_range_names_the_cpu_line(tmp_path, capsys):
    doc = json.loads((D / "jitterdebugger_results.json").read_text())
    last = list(doc["cpu"])[-1]
    doc["cpu"][last]["max"] = 10**20
    text = json.dumps(doc, indent=1)
    code, err = _import(tmp_path, capsys, "jitterdebugger", text)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    line = _line_of(text, f'"{last}": {{')
    assert f"input.txt:{line}:" in err, err


def test_tick_hz_out_of_range_is_refused_up_front(tmp_path, capsys):
    code, err = _import(tmp_path, capsys, "tscdeadline",
                        (D / "tscdeadline_latency.txt").read_text(),
                        "--tick-hz", "1" + "0" * 30)
    assert code == 2 and "--tick-hz" in err


def _cpu_s(fn, *args):
    """(CPU seconds of this process spent in ``fn(*args)``, its result). The bounds below
    catch super-linear work (quadratic parsing, one INSERT per row): CPU time, not wall
    time, so other processes on a loaded host do not count against them."""
    t0 = time.process_time()
    out = fn(*args)
    return time.process_time() - t0, out


def test_net_rtt_is_linear_on_long_digit_runs():
    text = ("9" * 50_000 + " packets transmitted\n"
            + "  latency min/avg/max/stddev (usec): " + "1" * 20_000 + "\n")

    def parse():
        with pytest.raises(ImportFormatError):
            parse_text("net-rtt", "big.txt", text, ParseOptions())
    took, _ = _cpu_s(parse)
    assert took < 1.0, f"{took:.2f} CPU s"


@pytest.mark.slow
def test_ten_thousand_rt_eval_tmu_lines_import_fast(tmp_path, capsys):
    # One run of 10,000 windows (kernel time rising, extremes never narrowing).
    text = "".join(f"[{10.0 * (i + 1):.6f}] rt_eval_tmu e6fc0000.tmu: Mean: 44 (1320 ns) "
                   f"stddev: 8 (240 ns)\n" for i in range(10_000))
    took, (code, err) = _cpu_s(_import, tmp_path, capsys, "rt-eval-tmu", text)
    assert code == 0, err
    assert took < 5.0, f"{took:.1f} CPU s: inserts must be batched"


def _case_or_crash(store, name, fmt, text, hz, skip_bad) -> str:
    try:
        return run_case(store, name, fmt, text, hz, skip_bad)
    except Exception:           # counted as a crash by fuzz() above: here only timed
        return "crash"


# 57 cases = every fixture (19) mutated three times, for the edit loop; the 300-case slice
# (15 a fixture) is the whole suite's (marked slow: the number of cases is the point).
@pytest.mark.parametrize("cases", [57, pytest.param(300, marks=pytest.mark.slow)])
def test_seeded_mutation_fuzz_storing_included(cases):
    """A fixed slice of what scripts/fuzz-import runs: no crash, no case over 1 s."""
    out = fuzz(cases, D, seed=20)
    assert out.crashes == 0, out.crash_examples
    assert out.rejected and out.accepted
    # The slowest cases timed again alone, in CPU time (fuzz() retimes them in wall
    # time, which a loaded machine stretches).
    again = []
    for _dt, name, case_seed, skip_bad in out.slowest:
        fmt, hz = FIXTURES[name]
        text = mutate(random.Random(case_seed), (D / name).read_text(encoding="utf-8",
                                                                     errors="replace"))
        with Store(":memory:") as store:
            took, _ = _cpu_s(_case_or_crash, store, name, fmt, text, hz, skip_bad)
        again.append((took, name, case_seed))
    assert max(again)[0] < 1.0, again


_SOURCES = fixture_texts(D)


@pytest.mark.slow
@settings(max_examples=70, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(_SOURCES) - 1), seed=st.integers(0, 2**32),
       edits=st.integers(1, 6), skip_bad=st.booleans())
def test_hypothesis_every_importer_storing_included(index, seed, edits, skip_bad):
    name, fmt, text, hz = _SOURCES[index]
    mutated = mutate(random.Random(seed), text, edits)
    with Store(":memory:") as store:
        took, kind = _cpu_s(run_case, store, name, fmt, mutated, hz, skip_bad)
        assert kind in ("rejected", "accepted")
        assert took < 5.0, f"{took:.1f} CPU s: super-linear parsing"


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(sorted({f for f, _hz in FIXTURES.values()})),
       text=st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FF),
                    max_size=400))
@pytest.mark.slow
def test_hypothesis_arbitrary_text_never_crashes(fmt, text):
    with Store(":memory:") as store:
        assert run_case(store, "x.txt", fmt, text, 1_000_000_000) in ("rejected", "accepted")
