"""A store of deterministic runs shared by the report unit tests (built once)."""

from __future__ import annotations

import pytest

from irqlab.store import Store
from tests.unit.reports._runs import add_run, latencies


@pytest.fixture(scope="session")
def report_db(tmp_path_factory):
    """Runs: 1 base (ramp), 2 same host shifted x2, 3 other host/kernel/accel, 4 summary only,
    5 hostile names, 6 lognormal, 7 lognormal seed 2 (same distribution)."""
    path = tmp_path_factory.mktemp("reports") / "r.duckdb"
    with Store(path) as st:
        add_run(st, "base", latencies("ramp", 10_000), tags={"kernel": "6.1"}, suite="s")
        add_run(st, "double", latencies("ramp", 10_000) * 2, tags={"kernel": "6.1"},
                suite="s")
        add_run(st, "elsewhere", latencies("ramp", 10_000), hostname="h2", kernel="6.6",
                accel="tcg", emulated=True, period_ns=500_000, threshold_ns=5_000,
                tick_method="calibrated-pit", timer_mode="lapic-oneshot")
        add_run(st, "summary-only", latencies("ramp", 10_000), raw=False)
        add_run(st, "<script>alert(1)</script>", latencies("ramp", 2_000) * 20,
                tags={"<b>k</b>": "<img src=x onerror=alert(2)>"},
                extra_meta={"imported_lines": ["</pre><script>alert(3)</script>"]})
        add_run(st, "logn-a", latencies("lognormal", 20_000, seed=1))
        add_run(st, "logn-b", latencies("lognormal", 20_000, seed=2))
    return path


@pytest.fixture
def store(report_db):
    with Store(report_db, read_only=True) as st:
        yield st
