"""`--metric irq|thread|total` of compare, check and report (issue 44): the split run's
IRQ or thread part is fed in where the total latency was, and a run without a split is
one line naming the fix, exit 2."""

from __future__ import annotations

import numpy as np
import pytest

from irqlab.store import Store
from tests.conftest import call_cli
from tests.unit.reports._runs import PERIOD_NS, add_run

N = 4_000


@pytest.fixture
def split_db(tmp_path):
    """Run 1: split (IRQ part 1..N ns, thread part 10x that), with 100 unsplit samples;
    run 2: the same latencies, no split."""
    rng = np.random.default_rng(3)
    irq = rng.permutation(np.arange(1, N + 1, dtype=np.int64))
    thread = 10 * rng.permutation(np.arange(1, N + 1, dtype=np.int64))
    db = tmp_path / "m.duckdb"
    with Store(db) as st:
        rid = add_run(st, "split", irq + thread)
        add_run(st, "whole", irq + thread)
        seq = np.arange(N, dtype=np.uint64)
        deadline = 10_000_000 + seq * PERIOD_NS
        keep = seq >= 100                      # the first 100: unsplit
        st.add_sample_parts(rid, seq[keep], np.zeros(int(keep.sum()), np.uint32),
                            deadline[keep] + irq[keep].astype(np.uint64))
    return db, irq[100:], thread[100:]


def _nearest(values, q):
    return int(np.quantile(values, q, method="inverted_cdf"))


@pytest.mark.parametrize("metric", ["irq", "thread", "total"])
def test_compare_feeds_the_chosen_part(split_db, metric):
    db, irq, thread = split_db
    res = call_cli(["compare", "split", "--metric", metric, "--json"], db)
    assert res.code == 0, res.stderr
    head, row = res.lines[0], res.lines[1]
    assert head["metric"] == metric
    want = {"irq": irq, "thread": thread, "total": None}[metric]
    if want is None:
        assert row["samples"] == N
        return
    assert row["samples"] == N - 100
    assert row["p99_ns"] == _nearest(want, 0.99)
    assert row["max_ns"] == int(want.max()) and row["min_ns"] == int(want.min())


def test_check_gates_the_part_and_says_which(split_db):
    db, irq, thread = split_db
    limit = _nearest(irq, 0.99)
    ok = call_cli(["check", "split", "--metric", "irq", "--p99", f"{limit}ns",
                   "--json"], db)
    bad = call_cli(["check", "split", "--metric", "thread", "--p99", f"{limit}ns",
                    "--json"], db)
    assert (ok.code, bad.code) == (0, 1), (ok.stderr, bad.stderr)
    assert ok.lines[0]["metric"] == "irq" and ok.lines[0]["passed"]
    assert bad.lines[0]["limits"][0]["value"] == _nearest(thread, 0.99)
    assert any(n.startswith("metric: thread latency") for n in bad.lines[0]["notes"])


@pytest.mark.parametrize("command", [["compare"], ["check", "--max", "1ms"]])
def test_a_run_without_a_split_is_one_line_and_exit_2(split_db, command):
    db, _irq, _thread = split_db
    res = call_cli([command[0], "whole", *command[1:], "--metric", "irq"], db)
    assert res.code == 2
    assert "has no IRQ/thread split for --metric irq" in res.stderr
    assert "irqlab run --target native --trace" in res.stderr
    assert "Traceback" not in res.stderr
