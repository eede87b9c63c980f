"""explain's set-up C passes (irqlab/native/explain.c via irqlab.explain.fastsetup) give
exactly the numpy reference's arrays on the real captures of data/: every thread's
states (not only the golden test's few), the switch repair's merged columns, the IRQ
intervals and the string columns they label."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from irqlab import native
from irqlab.explain import fastsetup, timeline
from irqlab.trace import fastpath
from irqlab.explain.load import decode_capture
from irqlab.trace.archive import read_archive
from tests.unit.native_paths import both_ways

DATA = Path(__file__).parent / "data"
CAPTURES = sorted(DATA.glob("*.irqtrace.gz"))


def assert_same_arrays(a: np.ndarray, b: np.ndarray, what: str) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert np.array_equal(a, b), f"{what}: first difference at " \
        f"{np.flatnonzero(a.ravel() != b.ravel())[:5]}"


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
def test_every_thread_timeline_and_interval_matches_numpy(capture):
    header, per_cpu = read_archive(capture)
    (tr_f, tr_s) = both_ways(lambda: decode_capture(header, per_cpu))
    for name, table in tr_s.tables.items():
        for col, b in table.cols.items():
            assert_same_arrays(tr_f.tables[name][col], b, f"{name}.{col}")

    def setup():
        sw = timeline.complete_switches(tr_f)
        tids = np.unique(np.concatenate([sw["prev_pid"], sw["next_pid"],
                                         tr_f.t("sched_waking")["pid"]])).tolist()
        end = int(sw["ts"][-1]) + 1
        return sw, timeline.thread_timelines(tr_f, tids + [-5, 1 << 40], end, sw), \
            timeline.irq_intervals(tr_f)

    (sw_f, th_f, irq_f), (sw_s, th_s, irq_s) = both_ways(setup)
    # The C pass did the work (a fallback would compare numpy with itself).
    assert fastsetup.thread_timelines(sw_f.cols, tr_f.t("sched_waking").cols,
                                      len(tr_f.t("sched_waking")), list(th_f), 1) is not None
    assert sw_s["inferred"].sum() > 0                      # rows were put in
    assert sw_f.cols.keys() == sw_s.cols.keys()
    for col in sw_s.cols:
        assert_same_arrays(sw_f[col], sw_s[col], f"switches.{col}")
    assert th_f.keys() == th_s.keys() and sum(len(t) for t in th_s.values()) > 1000
    for tid, t in th_s.items():
        for k in ("starts", "ends", "states", "cpus", "wakers", "ends_max"):
            assert_same_arrays(getattr(th_f[tid], k), getattr(t, k), f"thread {tid} {k}")
    for kind, per_f, per_s in zip(("hard", "soft"), irq_f, irq_s):
        assert per_f.keys() == per_s.keys()
        for c, iv in per_s.items():
            for k in ("start", "end", "label"):
                assert_same_arrays(getattr(per_f[c], k), getattr(iv, k), f"{kind} {c} {k}")


def test_thread_timeline_falls_back_when_a_thread_goes_back_in_time():
    """A part whose times go back for one thread: the C pass says so (the numpy stable
    sort then orders it), it never returns a wrongly merged timeline."""
    sw = {"ts": np.array([10, 5], np.int64), "cpu": np.zeros(2, np.uint16),
          "prev_pid": np.array([7, 7], np.int32), "next_pid": np.array([0, 0], np.int32),
          "prev_state": np.ones(2, np.int64), "ts_max": np.array([10, 5], np.int64)}
    assert fastsetup.thread_timelines(sw, {}, 0, [7], 20) is None
    assert fastsetup.thread_timelines(sw, {}, 0, [8], 20) == {}


def test_insert_rows_puts_rows_at_their_places_and_refuses_bad_places():
    col = np.array([b"a", b"b", b"c"], "S4")
    got = fastsetup.insert_rows(col, np.array([b"x", b"y"], "S4"), np.array([0, 3]))
    assert got.tolist() == [b"x", b"a", b"b", b"y", b"c"]
    assert fastsetup.insert_rows(col, np.array([b"x", b"y"], "S4"), np.array([3, 3])) is None
    assert fastsetup.insert_rows(col, np.array([b"x"], "S4"), np.array([4])) is None


def test_factorize_rows_is_exact_and_keeps_first_appearance_order():
    rows = np.array([[1, 2], [3, 4], [1, 2], [1, 2], [3, 4]], np.uint64)
    rep, code = fastpath.factorize_rows(rows)
    assert rep.tolist() == [0, 1] and code.tolist() == [0, 1, 0, 0, 1]
    rep, code = fastpath.factorize_rows(rows, np.array([0, 0, 9, 0, 0]))
    assert rep.tolist() == [0, 1, 2] and code.tolist() == [0, 1, 2, 0, 1]
    many = np.arange(5000, dtype=np.uint64).reshape(-1, 1) % 1234     # the table grows
    rep, code = fastpath.factorize_rows(many)
    assert len(rep) == 1234 and np.array_equal(many[rep][code], many)


def test_interval_pairing_matches_numpy_on_nested_tied_and_unclosed_entries():
    """Entries without their exit, an exit before any entry, equal stamps of an entry and
    an exit, two CPUs interleaved, a CPU with entries only: the C pairing keeps exactly
    the numpy rule (an entry pairs with its CPU's next exit unless the next entry comes
    first)."""
    rng = np.random.default_rng(29)
    ts_in = np.sort(rng.integers(0, 400, 300)).astype(np.int64)
    ts_out = np.sort(rng.integers(0, 400, 250)).astype(np.int64)
    cpu_in = rng.integers(0, 3, 300).astype(np.uint16)
    cpu_out = rng.integers(0, 2, 250).astype(np.uint16)          # CPU 2: no exit
    names = np.array(["a", "b", "c"], dtype=object)
    codes = rng.integers(0, 3, 300).astype(np.int64)
    args = (ts_in, cpu_in, names, codes, ts_out, cpu_out)
    assert fastsetup.pair_intervals(ts_in, cpu_in, ts_out, cpu_out) is not None
    fast, slow = both_ways(lambda: timeline._pair_sorted(*args))
    assert list(fast) == list(slow) == [0, 1]
    for c in slow:
        for a, b in zip(fast[c], slow[c]):
            assert_same_arrays(a, b, f"cpu {c}")
