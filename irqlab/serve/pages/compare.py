"""Compare: pick runs (ids, names, tag:, suite:, series: selectors) -> the compare table,
its noise verdicts and the runs' tails overlaid: `irqlab compare --json`'s objects, made
by the same functions (irqlab.reports.compare.build_compare, tables.json_objects)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from irqlab.reports import noise
from irqlab.serve.pages.run import ccdf_points
from irqlab.serve.web import Dashboard, PageError, json_response

MAX_SELECTORS = 20


def _selectors(request: Request) -> list[str]:
    refs = [r.strip() for r in request.query_params.getlist("runs") for r in r.split(",")]
    refs = [r for r in refs if r]
    if len(refs) > MAX_SELECTORS:
        raise PageError(400, f"{len(refs)} selectors: at most {MAX_SELECTORS} (a tag:, "
                             f"suite: or series: selector names many runs at once)")
    return refs


def _threshold(request: Request) -> int | None:
    text = request.query_params.get("threshold_ns", "")
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 10**15:
        raise PageError(400, f"threshold_ns {text!r}: a whole number of ns, e.g. 30000")
    return int(text)


def compare_objects(dashboard: Dashboard, refs: list[str],
                    threshold_ns: int | None) -> list[dict[str, Any]]:
    """`irqlab compare REFS --json` (default seed and resamples) as a list of objects."""
    from irqlab.reports.compare import build_compare
    from irqlab.reports.data import load_runs
    from irqlab.reports.select import select_runs
    from irqlab.reports.tables import json_objects

    with dashboard.access.open() as store:
        runs = load_runs(store, select_runs(store, refs, series_names=True))
        model = build_compare(runs, threshold_ns, seed=noise.DEFAULT_SEED,
                              resamples=noise.DEFAULT_RESAMPLES)
    return json_objects(model)


def page(dashboard: Dashboard, request: Request) -> HTMLResponse:
    refs = _selectors(request)
    threshold = _threshold(request)
    objects = compare_objects(dashboard, refs, threshold) if refs else []
    rows = [o for o in objects if o["type"] == "compare_run"]
    ccdf = {"kind": "ccdf", "series": {f"#{r['run_id']} {r['name']}": ccdf_points(r)
                                       for r in rows}}
    return dashboard.render(
        "compare.html", title="compare", refs=refs, threshold=threshold,
        head=objects[0] if objects else None, rows=rows,
        warnings=[o for o in objects if o["type"] == "compare_warning"],
        ccdf=ccdf if rows else None)


def api(dashboard: Dashboard, request: Request) -> Response:
    """``{"objects": [the JSON lines of irqlab compare --json, in order]}``."""
    refs = _selectors(request)
    if not refs:
        raise PageError(400, "no run given: add runs=ID (repeatable; names, tag:KEY=VALUE, "
                             "suite:NAME and series:ID work too)")
    return json_response({"objects": compare_objects(dashboard, refs, _threshold(request))})
