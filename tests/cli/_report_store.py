"""A small deterministic store for the CLI tests of compare, report and check."""

from __future__ import annotations

from pathlib import Path

from irqlab.store import Store
from tests.unit.reports._runs import add_run, latencies


def make_store(path: Path) -> Path:
    """1 base (ramp 1..10000 ns), 2 double (x2), 3 hostile name, 4 summary only."""
    with Store(path) as st:
        add_run(st, "base", latencies("ramp", 10_000), tags={"cfg": "a"})
        add_run(st, "double", latencies("ramp", 10_000) * 2, tags={"cfg": "a"})
        add_run(st, "<script>alert(1)</script>", latencies("ramp", 2_000) * 20,
                tags={"<b>": "<i>"})
        add_run(st, "summary-only", latencies("ramp", 10_000), raw=False)
    return path
