"""JSON lines, the machine-readable format of every command (docs/formats.md section 4):
each line a versioned object; ``JsonLines`` is its exporter on the output seam."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Callable

# Version of each JSON line type (docs/formats.md section 4; schemas in docs/schema/).
# A type's version goes up when one of its keys changes meaning or goes away; added keys
# keep it. Types whose builder lives elsewhere carry their own constant (summary: fields.py,
# compare: reports/compare.py, check, report, explain, model, push); the renderer stamps the
# others here, so no line leaves without one.
LINE_VERSIONS: dict[str, int] = {"window": 1, "run": 1, "bench": 1, "suite": 1,
                                 "import": 1, "cell": 1}


def versioned(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with ``type`` and ``version`` as its first two keys (a version it already
    has is kept: its builder owns it)."""
    kind = obj["type"]
    version = obj.get("version", LINE_VERSIONS.get(kind))
    if version is None:
        raise KeyError(f"JSON line type {kind!r} has no version (add it to LINE_VERSIONS)")
    rest = {k: v for k, v in obj.items() if k not in ("type", "version")}
    return {"type": kind, "version": version, **rest}


def json_line(obj: dict[str, Any]) -> str:
    """One JSON line: every machine-readable line of every command goes through here."""
    return json.dumps(versioned(obj), sort_keys=False, default=str)



def _compare_objects(model: dict[str, Any]) -> list[dict[str, Any]]:
    # The compare tables pull in the store (DuckDB, Arrow): imported when used.
    from irqlab.reports.tables import json_objects
    return json_objects(model)


# A model whose JSON is not the model itself: type -> its objects, one line each. Every
# other model is one line as it is.
OBJECTS: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    "compare": _compare_objects,
    "run_list": lambda m: [{"type": "run", **r} for r in m["rows"]],
    "run_detail": lambda m: [m["summary"]],
    "bench_figures": lambda m: [{"type": "bench", **f} for f in m["figures"]],
    "check_result": lambda m: [m["result"]],
    "compare_histograms": lambda m: list(m["runs"]),
    "run_histograms": lambda m: list(m["runs"]),
    "trend_result": lambda m: m["trend"].lines(),
    "export_result": lambda m: [m["line"]],
    "push_result": lambda m: [m["line"]],
    "xentrace_summary": lambda m: list(m["lines"]),
    # irqlab.doctor.Check objects, a line each: {"type": "doctor", "version", **fields}.
    "doctor_checks": lambda m: [{"type": "doctor", "version": m["version"], **asdict(c)}
                                for _heading, checks in m["groups"] for c in checks],
    "series_result": lambda m: [m["series"].json_object()],
    "auto_result": lambda m: [],
    "matrix_results": lambda m: [r.row() for r in m["results"]],
}


class JsonLines:
    """The JSON-lines exporter: a model's objects (OBJECTS), one versioned line each."""

    def lines(self, model: dict[str, Any]) -> list[str]:
        make = OBJECTS.get(model["type"])
        return [json_line(obj) for obj in (make(model) if make else [model])]
