"""Trends: one summary figure (p99.9, max, ...) of a series of runs in time order, with
the runs at which it changed: `irqlab trend SEL --metric M --json`'s lines, built by the
same function (irqlab.reports.trend.build_trend: E-divisive means, defaults)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from irqlab.serve.web import Dashboard, PageError, json_response

DEFAULT_METRIC = "p99.9"


def _selectors(request: Request) -> list[str]:
    return [s.strip() for s in request.query_params.get("series", "").split(",")
            if s.strip()]


def trend_lines(dashboard: Dashboard, selectors: list[str],
                metric: str) -> list[dict[str, Any]]:
    """The JSON lines of `irqlab trend SELECTORS --metric METRIC --json`."""
    from irqlab.reports.trend import TrendError, build_trend

    with dashboard.access.open() as store:
        try:
            return build_trend(store, selectors, metric).lines()
        except TrendError as exc:
            raise PageError(400, str(exc)) from None


def page(dashboard: Dashboard, request: Request) -> HTMLResponse:
    from irqlab.reports.trend import metric_names

    selectors = _selectors(request)
    metric = request.query_params.get("metric") or DEFAULT_METRIC
    lines = trend_lines(dashboard, selectors, metric) if selectors else []
    head = lines[0] if lines else None
    runs = [x for x in lines if x["type"] == "trend_run"]
    changes = [x for x in lines if x["type"] == "trend_change"]
    by_id = {r["run_id"]: r for r in runs}
    for c in changes:     # the run on each side of the change, with its date
        c["before"] = by_id.get(c["before_run_id"])
    chart = None
    if runs:
        # Runs at their start dates (s since the epoch, UTC): the x axis is time.
        import datetime as dt

        from irqlab.serve.charts import latency_unit

        unit, scale = latency_unit(max((r["value_ns"] or 0) for r in runs))
        chart = {"kind": "trend", "metric": head["metric"], "unit": unit,
                 "x": [dt.datetime.fromisoformat(r["started_at"]).replace(
                     tzinfo=dt.timezone.utc).timestamp() for r in runs],
                 "y": [None if r["value_ns"] is None else r["value_ns"] / scale
                       for r in runs],
                 "marks": [c["index"] for c in changes], "dated": True}
        if head.get("order", "started_at") != "started_at":
            # Ordered by a tag: the runs in that order, not at their dates.
            chart["x"], chart["dated"] = [r["index"] for r in runs], False
    return dashboard.render("trends.html", title="trends", selector=",".join(selectors),
                            metric=metric, metrics=metric_names(), head=head, runs=runs,
                            changes=changes, chart=chart)


def api(dashboard: Dashboard, request: Request) -> Response:
    """``{"lines": [the lines of irqlab trend --json, in order]}``."""
    selectors = _selectors(request)
    if not selectors:
        raise PageError(400, "no series given: add series=SELECTOR (series:ID, "
                             "tag:KEY=VALUE, suite:NAME, run ids; comma-separated)")
    return json_response({"lines": trend_lines(
        dashboard, selectors, request.query_params.get("metric") or DEFAULT_METRIC)})
