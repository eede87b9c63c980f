"""Trends: one summary figure (p99.9, max, ...) of a series of runs, in run order, with
the runs at which it changed (E-divisive means: irqlab.stats.changepoint, the function
`irqlab trend` uses)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from irqlab.serve.web import Dashboard, PageError, json_response
from irqlab.stats.fields import field

METRICS = ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "p9999_ns", "max_ns", "warm_max_ns",
           "mean_ns")
DEFAULT_METRIC = "p999_ns"
MIN_RUNS = 2


def trend(dashboard: Dashboard, selector: str, metric: str) -> dict[str, Any]:
    """The series' runs with ``metric`` (runs without it are listed, not used) and the
    change points found in the values, each at a run (``index`` counts used runs)."""
    from irqlab.reports.select import select_runs
    from irqlab.stats.changepoint import find_change_points

    if metric not in METRICS:
        raise PageError(400, f"metric {metric!r}: one of {', '.join(METRICS)}")
    with dashboard.access.open() as store:
        rows = sorted(select_runs(store, [selector]), key=lambda r: r.run_id)
    points = []
    for row in rows:
        value = (row.summary or {}).get(metric)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            points.append({"run_id": row.run_id, "name": row.name,
                           "started_at": row.started_at.isoformat(),
                           "status": row.status, "tags": row.tags, metric: value})
    found = []
    if len(points) >= MIN_RUNS:
        try:
            found = find_change_points([p[metric] for p in points])
        except ValueError as exc:        # too many values: the message says so
            raise PageError(400, f"{selector}: {exc}") from None
    changes = [{"index": c.index, "run_id": points[c.index]["run_id"],
                "p_value": c.p_value, "mean_before": c.mean_before,
                "mean_after": c.mean_after, "ratio": c.ratio} for c in found]
    return {"type": "trend", "version": 1, "selector": selector, "metric": metric,
            "runs": points, "skipped": len(rows) - len(points), "change_points": changes}


def page(dashboard: Dashboard, request: Request) -> HTMLResponse:
    selector = request.query_params.get("series", "").strip()
    metric = request.query_params.get("metric") or DEFAULT_METRIC
    result = trend(dashboard, selector, metric) if selector else None
    chart = None
    if result and result["runs"]:
        at = {c["index"] for c in result["change_points"]}
        chart = {"kind": "trend", "metric": field(metric).label,
                 "x": list(range(len(result["runs"]))),
                 "y": [p[metric] for p in result["runs"]],
                 "marks": sorted(at),
                 "labels": [f"#{p['run_id']} {p['name']}" for p in result["runs"]]}
    return dashboard.render("trends.html", title="trends", selector=selector,
                            metric=metric, metrics=[(m, field(m).label) for m in METRICS],
                            result=result, chart=chart)


def api(dashboard: Dashboard, request: Request) -> Response:
    selector = request.query_params.get("series", "").strip()
    if not selector:
        raise PageError(400, "no series given: add series=SELECTOR (series:ID, tag:KEY=VALUE, "
                             "suite:NAME or a run name)")
    return json_response(trend(dashboard, selector,
                               request.query_params.get("metric") or DEFAULT_METRIC))
