"""Live: a run's windows as they arrive. The page polls the JSON endpoint once a second
(a plain GET: each poll opens the store read-only, borrowing a running run's connection
through its lending socket, and closes it; nothing waits on the writer)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from irqlab.durations import format_latency
from irqlab.serve.web import Dashboard, PageError, format_seconds, json_response
from irqlab.humanize import format_count

POLL_MS = 1000


def page(dashboard: Dashboard, request: Request) -> HTMLResponse:
    with dashboard.access.open() as store:
        row = store.resolve(str(request.path_params["run_id"]))
    return dashboard.render("live.html", title=f"run {row.run_id} live", row=row,
                            poll_ms=POLL_MS)


def api(dashboard: Dashboard, request: Request) -> Response:
    """``{"type": "run_windows", "version": 1, "run_id", "status", "windows": [window
    objects of irqlab show/run --json whose index >= after], "cells": [each window's
    row of the live table, as text]}``."""
    text = request.query_params.get("after", "0")
    if not (text.isascii() and text.isdigit()):
        raise PageError(400, f"after {text!r}: a window index (0 or more)")
    after = int(text)
    with dashboard.access.open() as store:
        row = store.resolve(str(request.path_params["run_id"]))
        windows = [w for w in store.windows(row.run_id) if w["index"] >= after]
    return json_response({"type": "run_windows", "version": 1, "run_id": row.run_id,
                          "status": row.status, "windows": windows,
                          "cells": [window_cells(w) for w in windows]})


def window_cells(window: dict[str, Any]) -> list[str]:
    """A window's row of the live table as the page shows it (the CLI's formatters)."""
    return [str(window["index"]), format_seconds(window.get("start_s")),
            format_count(window.get("samples")), format_latency(window.get("mean_ns")),
            format_latency(window.get("max_ns"))]
