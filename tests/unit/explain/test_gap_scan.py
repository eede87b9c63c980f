"""gaps.c's switch-chain gap scan (irqlab/explain/gapscan.py) against a per-event
reference: each event's gap is found by a binary search over its CPU's switches. Tables in
time order take the per-gap path, tables out of order the per-event walk; both must agree
with the reference, ties on switch times included."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab import native
from irqlab.explain import gapscan


def _switches(rng: np.random.Generator, ncpu: int, per_cpu: int):
    """Switches in (cpu, time) order with repeated stamps, and some broken chains."""
    c_s = np.repeat(np.arange(ncpu), per_cpu).astype(np.uint16)
    t_s = np.concatenate([np.sort(rng.integers(0, 5_000, per_cpu)) for _ in range(ncpu)])
    t_s = t_s.astype(np.int64)
    same = np.flatnonzero(c_s[1:] == c_s[:-1])
    broken = np.sort(rng.choice(same, size=len(same) // 4, replace=False))
    g_a = rng.integers(1, 5, len(broken)).astype(np.int64)
    g_b = rng.integers(1, 5, len(broken)).astype(np.int64)
    return c_s, t_s, broken, t_s[broken + 1], g_a, g_b


def _reference(c_s, t_s, broken, g_a, g_b, ts, cpu, pid):
    """Per event: its gap (or -1), by a binary search of its CPU's switches."""
    gap_after = np.full(len(t_s), -1, np.int64)
    gap_after[broken] = np.arange(len(broken))
    g_t1 = t_s[broken + 1]
    gaps = np.full(len(ts), -1, np.int64)
    for i, (t, c) in enumerate(zip(ts.tolist(), cpu.tolist())):
        lo, hi = np.searchsorted(c_s, [c, c + 1])
        j = lo + int(np.searchsorted(t_s[lo:hi], t, "left")) - 1
        if j >= lo and gap_after[j] >= 0 and t < g_t1[gap_after[j]]:
            gaps[i] = gap_after[j]
    ng = len(broken)
    last_a, first_b = t_s[broken].copy(), g_t1.copy()
    other = np.zeros(ng, np.uint8)
    for i in np.flatnonzero(gaps >= 0).tolist():
        g = gaps[i]
        is_a, is_b = pid[i] == g_a[g], pid[i] == g_b[g]
        if is_a:
            last_a[g] = max(last_a[g], ts[i])
        if is_b:
            first_b[g] = min(first_b[g], ts[i])
        if not is_a and not is_b:
            other[g] = 1
    return gaps, last_a, first_b, other


@pytest.mark.parametrize("in_order", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_gap_bounds_and_events_match_reference(seed, in_order):
    assert native.lib() is not None, native.why_not()
    rng = np.random.default_rng(seed)
    ncpu = 3
    c_s, t_s, broken, g_t1, g_a, g_b = _switches(rng, ncpu, 300)
    n = 2_000
    ts = rng.integers(0, 5_200, n).astype(np.int64)
    # Many events right on switch times (the strict bounds of a gap).
    on = rng.random(n) < 0.3
    ts[on] = rng.choice(t_s, int(on.sum()))
    if in_order:
        ts = np.sort(ts)
    cpu = rng.integers(0, ncpu + 1, n).astype(np.uint16)       # CPU 3: no switches
    pid = rng.integers(0, 6, n).astype(np.int32)
    gaps, last_a, first_b, other = _reference(c_s, t_s, broken, g_a, g_b, ts, cpu, pid)
    table = {"ts": ts, "cpu": cpu, "common_pid": pid}
    scan = gapscan.Gaps(c_s, t_s, broken, g_t1, g_a, g_b)
    got_a, got_b = t_s[broken].copy(), g_t1.copy()
    got_other = np.zeros(len(broken), np.uint8)
    assert scan.bounds([table], got_a, got_b, got_other)
    assert (gaps >= 0).any()
    np.testing.assert_array_equal(got_a, last_a)
    np.testing.assert_array_equal(got_b, first_b)
    np.testing.assert_array_equal(got_other, other)
    want = (rng.random(len(broken)) < 0.5).astype(np.uint8)
    keep = np.flatnonzero((gaps >= 0) & (want[np.maximum(gaps, 0)] > 0))
    [(g, t, p)] = scan.events([table], want)
    np.testing.assert_array_equal(g, gaps[keep])                 # in table order
    np.testing.assert_array_equal(t, ts[keep])
    np.testing.assert_array_equal(p, pid[keep])


def _check_scan(c_s, t_s, broken, g_a, g_b, ts, cpu, pid, want) -> int:
    """The C gap scan's bounds and the events of the ``want``ed gaps against the
    reference; the number of events compared."""
    gaps, last_a, first_b, other = _reference(c_s, t_s, broken, g_a, g_b, ts, cpu, pid)
    table = {"ts": ts, "cpu": cpu, "common_pid": pid}
    g_t1 = t_s[broken + 1]
    scan = gapscan.Gaps(c_s, t_s, broken, g_t1, g_a, g_b)
    got_a, got_b = t_s[broken].copy(), g_t1.copy()
    got_other = np.zeros(len(broken), np.uint8)
    assert scan.bounds([table], got_a, got_b, got_other)
    np.testing.assert_array_equal(got_a, last_a)
    np.testing.assert_array_equal(got_b, first_b)
    np.testing.assert_array_equal(got_other, other)
    keep = np.flatnonzero((gaps >= 0) & (want[np.maximum(gaps, 0)] > 0))
    [(g, t, p)] = scan.events([table], want)
    np.testing.assert_array_equal(g, gaps[keep])
    np.testing.assert_array_equal(t, ts[keep])
    np.testing.assert_array_equal(p, pid[keep])
    return len(keep)


def test_long_gaps_on_many_cpus_give_the_walks_answer():
    # Every CPU's one gap spans the whole table: the gap-by-gap scan would read every
    # event once per CPU, so it gives up half way (its folds so far stay: max, min, or)
    # and the walk answers; the same bounds and events as the reference.
    rng = np.random.default_rng(3)
    ncpu, n = 12, 3_000
    c_s = np.repeat(np.arange(ncpu), 3).astype(np.uint16)
    t_s = np.tile(np.array([0, 10, 10_000], np.int64), ncpu)
    broken = np.arange(ncpu) * 3 + 1                   # the gap (10, 10_000) of each CPU
    g_a = rng.integers(1, 4, ncpu).astype(np.int64)
    g_b = rng.integers(1, 4, ncpu).astype(np.int64)
    ts = np.sort(rng.integers(0, 10_050, n)).astype(np.int64)
    cpu = rng.integers(0, ncpu, n).astype(np.uint16)
    pid = rng.integers(0, 5, n).astype(np.int32)
    _check_scan(c_s, t_s, broken, g_a, g_b, ts, cpu, pid, np.ones(ncpu, np.uint8))


def test_sparse_gaps_far_apart_in_a_long_table():
    # Few gaps, thousands of events between them: each gap's search gallops on from the
    # CPU's previous one (long doubling runs, one reaching the table's end), and gaps
    # left out of ``want`` leave that start behind; the reference's bounds and events.
    rng = np.random.default_rng(11)
    ncpu, per_cpu, n = 2, 40, 20_000
    c_s = np.repeat(np.arange(ncpu), per_cpu).astype(np.uint16)
    t_s = np.concatenate([np.sort(rng.choice(1_000_000, per_cpu, replace=False))
                          for _ in range(ncpu)]).astype(np.int64)
    broken = np.array([0, 7, 8, 30, 38, per_cpu + 2, per_cpu + 39 - 1])
    g_a = rng.integers(1, 4, len(broken)).astype(np.int64)
    g_b = rng.integers(1, 4, len(broken)).astype(np.int64)
    ts = np.sort(rng.integers(0, 1_100_000, n)).astype(np.int64)
    cpu = rng.integers(0, ncpu, n).astype(np.uint16)
    pid = rng.integers(0, 5, n).astype(np.int32)
    want = np.array([0, 0, 1, 0, 1, 0, 1], np.uint8)
    assert _check_scan(c_s, t_s, broken, g_a, g_b, ts, cpu, pid, want)


@pytest.mark.parametrize("runs", [1, 2, 8, 9, "shuffled"])
def test_last_event_before_matches_reference(runs):
    # Up to 8 time ordered runs of queries take gaps.c's sweep, more take its per-task
    # binary searches: both give the latest event of the query's task strictly before its
    # time (ties on that time included), found or not.
    rng = np.random.default_rng(7)
    n, nq, npid = 5_000, 3_000, 12
    ts = np.sort(rng.integers(0, 4_000, n)).astype(np.int64)
    pid = rng.integers(-1, npid + 3, n).astype(np.int32)       # some pids are not keyed
    keyed = np.array([1, 2, 3, 5, 8, 11])
    lut = np.full(npid + 2, -1, np.int64)
    lut[keyed] = np.arange(len(keyed))
    q_key = rng.integers(-1, len(keyed), nq).astype(np.int64)
    q_before = rng.integers(0, 4_100, nq).astype(np.int64)
    on = rng.random(nq) < 0.3                                    # right on event times
    q_before[on] = rng.choice(ts, int(on.sum()))
    if runs != "shuffled":
        q_before = np.concatenate([np.sort(part) for part in np.array_split(q_before, runs)])
    want_found = np.zeros(nq, np.int64)
    want_has = np.zeros(nq, bool)
    for i, (k, t) in enumerate(zip(q_key.tolist(), q_before.tolist())):
        if k < 0:
            continue
        mine = ts[(pid >= 0) & (lut[np.clip(pid, 0, len(lut) - 1)] == k)
                  & (pid < len(lut) - 1) & (ts < t)]
        if len(mine):
            want_found[i], want_has[i] = mine.max(), True
    got = gapscan.last_event_before({"ts": ts, "pid": pid}, lut, len(keyed), q_key, q_before)
    assert got is not None
    found, has = got
    assert want_has.any() and not want_has.all()
    np.testing.assert_array_equal(has, want_has)
    np.testing.assert_array_equal(found[has], want_found[has])


def test_several_tables_in_one_pass_match_each_alone():
    # explain hands every event table to one call: tables scanned gap by gap side by side,
    # one of them out of time order (walked instead), an empty one; the bounds fold all
    # of them, and each table's events come back as the reference finds them in it.
    rng = np.random.default_rng(5)
    ncpu = 3
    c_s, t_s, broken, g_t1, g_a, g_b = _switches(rng, ncpu, 300)
    tables, refs = [], []
    for n, in_order in ((1_500, True), (700, False), (0, True), (2_500, True)):
        ts = rng.integers(0, 5_200, n).astype(np.int64)
        on = rng.random(n) < 0.3
        ts[on] = rng.choice(t_s, int(on.sum()))
        ts = np.sort(ts) if in_order else ts
        cpu = rng.integers(0, ncpu, n).astype(np.uint16)
        pid = rng.integers(0, 6, n).astype(np.int32)
        tables.append({"ts": ts, "cpu": cpu, "common_pid": pid})
        refs.append(_reference(c_s, t_s, broken, g_a, g_b, ts, cpu, pid))
    scan = gapscan.Gaps(c_s, t_s, broken, g_t1, g_a, g_b)
    got_a, got_b = t_s[broken].copy(), g_t1.copy()
    got_other = np.zeros(len(broken), np.uint8)
    assert scan.bounds(tables, got_a, got_b, got_other)
    np.testing.assert_array_equal(got_a, np.max([r[1] for r in refs], axis=0))
    np.testing.assert_array_equal(got_b, np.min([r[2] for r in refs], axis=0))
    np.testing.assert_array_equal(got_other, np.max([r[3] for r in refs], axis=0))
    want = (rng.random(len(broken)) < 0.5).astype(np.uint8)
    found = scan.events(tables, want)
    assert len(found) == len(tables)
    for table, (gaps, *_), (g, t, p) in zip(tables, refs, found):
        keep = np.flatnonzero((gaps >= 0) & (want[np.maximum(gaps, 0)] > 0))
        np.testing.assert_array_equal(g, gaps[keep])
        np.testing.assert_array_equal(t, table["ts"][keep])
        np.testing.assert_array_equal(p, table["common_pid"][keep])
    assert sum(len(g) for g, _, _ in found) > 100


def test_gaps_of_switches_match_numpy_sort():
    # gaps.c's counting sort by CPU and chain check against timeline's numpy path: the
    # same per-CPU order (equal stamps in ring order), the same gaps in (cpu, time) order.
    from irqlab.explain.timeline import _sorted_by_cpu
    rng = np.random.default_rng(9)
    n = 5_000
    cols = {"cpu": rng.choice(np.array([0, 1, 3, 6], np.uint16), n),
            "prev_pid": rng.integers(0, 4, n).astype(np.int32),
            "next_pid": rng.integers(0, 4, n).astype(np.int32)}
    ts = np.sort(rng.integers(0, 2_000, n)).astype(np.int64)       # many equal stamps
    c_s, t_s, p_s, n_s, broken = _sorted_by_cpu(cols, ts)
    want = gapscan.Gaps(c_s, t_s, broken, t_s[broken + 1], n_s[broken].astype(np.int64),
                        p_s[broken + 1].astype(np.int64))
    got = gapscan.Gaps.of_switches(ts, cols["cpu"], cols["prev_pid"], cols["next_pid"])
    assert got is not None and got.ngaps == want.ngaps == len(broken) > 1000
    for mine, ref in zip(got._arrays, want._arrays):
        np.testing.assert_array_equal(mine, ref)
    np.testing.assert_array_equal(got.g_cpu, c_s[broken])
    np.testing.assert_array_equal(got.g_a, n_s[broken])
