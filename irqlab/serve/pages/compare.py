"""Compare: pick runs (ids, names, tag:, suite:, series: selectors) -> the compare table,
its noise verdicts and the runs' tails overlaid: `irqlab compare --json`'s objects, made
by the same functions (irqlab.reports.compare.build_compare, tables.json_objects)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from irqlab.reports import noise
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


def compare_objects(dashboard: Dashboard, refs: list[str], threshold_ns: int | None,
                    charts: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """`irqlab compare REFS --json` (default seed and resamples) as a list of objects;
    with ``charts``, the runs' tails overlaid are added there (the same runs, read once)."""
    from irqlab.reports.compare import build_compare
    from irqlab.reports.data import load_runs
    from irqlab.reports.select import select_runs
    from irqlab.reports.tables import json_objects
    from irqlab.serve.charts import tail_chart

    with dashboard.access.open() as store:
        runs = load_runs(store, select_runs(store, refs, series_names=True))
        model = build_compare(runs, threshold_ns, seed=noise.DEFAULT_SEED,
                              resamples=noise.DEFAULT_RESAMPLES)
        if charts is not None:
            tail = tail_chart(runs)
            if tail:
                charts["tail"] = tail
    return json_objects(model)


def page(dashboard: Dashboard, request: Request) -> HTMLResponse:
    from irqlab.reports.tables import (HUMAN_COLUMNS, cell, differs_table, method_line,
                                       noise_lines, warning_lines)

    refs = _selectors(request)
    threshold = _threshold(request)
    charts: dict[str, Any] = {}
    objects = compare_objects(dashboard, refs, threshold, charts) if refs else []
    rows = [o for o in objects if o["type"] == "compare_run"]
    head = objects[0] if objects else None
    model = {"rows": rows, "differs": head["differs"] if head else []}
    # The terminal's table (irqlab.reports.tables: its columns and cells), the verdict
    # as compare --json words it.
    columns = [(h, key, kind) for h, key, kind in HUMAN_COLUMNS if kind != "verdict"]
    table = [{"run_id": r["run_id"], "baseline": r.get("baseline"),
              "cells": [(key, cell(r, key, kind)) for _h, key, kind in columns],
              "verdict": verdict_text(r)} for r in rows]
    return dashboard.render(
        "compare.html", title="compare", refs=refs, threshold=threshold, head=head,
        columns=columns, table=table, method=method_line(model) if rows else "",
        noise=noise_lines(model) if rows else [],
        differs=differs_table(model) if rows else ([], []),
        warnings=warning_lines([o for o in objects if o["type"] == "compare_warning"]),
        charts=charts)


def verdict_text(row: dict[str, Any]) -> str:
    """A row's verdict as `irqlab compare` says it: 'baseline' for the baseline (or the
    baseline series' runs), else the noise object's verdict."""
    if row.get("baseline") or row.get("group") == 0:
        return "baseline"
    nz = row.get("noise") or {}
    return str(nz.get("verdict") or "n/a")


def api(dashboard: Dashboard, request: Request) -> Response:
    """``{"objects": [the JSON lines of irqlab compare --json, in order]}``."""
    refs = _selectors(request)
    if not refs:
        raise PageError(400, "no run given: add runs=ID (repeatable; names, tag:KEY=VALUE, "
                             "suite:NAME and series:ID work too)")
    return json_response({"objects": compare_objects(dashboard, refs, _threshold(request))})
