"""`irqlab bench import compare` on tiny inputs: every command runs and is measured."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from irqlab.bench.compare import bench_compare, bench_import

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "docs/schema/bench.schema.json")
                    .read_text())


@pytest.mark.slow
def test_import_and_compare_figures():
    # Tiny inputs: what is checked is that every command runs and is measured, not how
    # fast (the cost here is the ten child interpreters, not the samples).
    figures = bench_import(lines=4_000) + bench_compare(samples=5_000)
    assert [f["name"] for f in figures] == ["import", "compare:compare", "compare:report",
                                            "compare:check"]
    for f in figures:
        jsonschema.validate({"type": "bench", "version": 1, **f}, SCHEMA)
        assert f["value"] > 0 and 0 < f["peak_mib"] < 4096
        assert f["baseline"] > 0 and f["baseline_peak_mib"] > 0
    assert figures[0]["lines"] == 4_000 and figures[0]["bytes"] > 4_000 * 10
