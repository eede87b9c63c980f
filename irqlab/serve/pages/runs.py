"""The runs page: a filtered, sorted table of runs, paged by the database."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from irqlab.serve.runs_query import SORTS, RunsQuery, runs_page
from irqlab.serve.web import Dashboard, json_response

# Columns of the table: (heading, row key, sort key or None).
COLUMNS = (("run", "run_id", "run_id"), ("name", "name", "name"),
           ("started (UTC)", "started_at", "started_at"), ("target", "target", "target"),
           ("host", "host", None), ("tags", "tags", None), ("status", "status", "status"),
           ("samples", "samples", "samples"), ("p50", "p50_ns", "p50_ns"),
           ("p99.9", "p999_ns", "p999_ns"), ("max", "max_ns", "max_ns"))


def _query(request: Request) -> RunsQuery:
    return RunsQuery.from_params(dict(request.query_params))


def page(dashboard: Dashboard, request: Request) -> HTMLResponse:
    query = _query(request)
    with dashboard.access.open() as store:
        result = runs_page(store, query, dashboard.figures)
    return dashboard.render("runs.html", title="runs", page=result, q=query,
                            columns=COLUMNS, sorts=SORTS)


def api(dashboard: Dashboard, request: Request) -> Response:
    """``{"type": "runs_page", "version": 1, "total", "page", "pages", "per_page",
    "runs": [rows as irqlab list --json, plus host, p50_ns, p999_ns]}``."""
    query = _query(request)
    with dashboard.access.open() as store:
        result = runs_page(store, query, dashboard.figures)
    return json_response({"type": "runs_page", "version": 1, "total": result.total,
                         "page": query.page, "pages": result.pages,
                         "per_page": query.per_page, "runs": result.rows})
