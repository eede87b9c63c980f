"""One run: windows over time, every percentile, its configuration and host facts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from irqlab.reports.provenance import configuration_lines, host_lines
from irqlab.serve.web import Dashboard, PageError, json_response
from irqlab.stats.fields import PERCENTILE_FIELDS, SUMMARY_TABLE
from irqlab.store.provenance import provenance

if TYPE_CHECKING:
    from irqlab.store.db import RunRow


def show_object(row: RunRow) -> dict[str, Any]:
    """The run's `irqlab show --json` line: its summary (every key, None where unknown
    while it runs) and its provenance record (irqlab/cli/cmd_runs.py builds the same; a
    test holds the two equal)."""
    summary = row.shown_summary()
    record = provenance(row)
    return {**summary, "provenance_version": record["version"],
            "configuration": record["configuration"], "host": record["host"]}


def ccdf_points(summary: dict[str, Any]) -> list[tuple[int, float]]:
    """(latency ns, fraction of samples above it) of the summary's percentiles: the
    distribution's tail as the stored figures give it, no sample read."""
    points = [(summary[f.key], f.exceedance) for f in PERCENTILE_FIELDS
              if isinstance(summary.get(f.key), (int, float))]
    samples = summary.get("samples")
    if isinstance(summary.get("max_ns"), (int, float)) and samples:
        points.append((summary["max_ns"], 1.0 / samples))
    return sorted(points)


def _load(dashboard: Dashboard, run_id: int) -> tuple[RunRow, list[dict[str, Any]]]:
    with dashboard.access.open() as store:
        row = store.resolve(str(run_id))
        return row, store.windows(row.run_id)


def page(dashboard: Dashboard, request: Request) -> HTMLResponse:
    from irqlab.explain.registry import capture_kind

    row, windows = _load(dashboard, request.path_params["run_id"])
    shown = show_object(row)
    record = provenance(row)
    chart = {"kind": "windows",
             "x": [w["start_s"] for w in windows],
             "series": {k: [w.get(k) for w in windows]
                        for k in ("max_ns", "mean_ns", "min_ns")}}
    ccdf = ccdf_points(shown)
    return dashboard.render(
        "run.html", title=f"run {row.run_id}", row=row, summary=shown,
        figures=[(c.field.label, c.key, shown.get(c.key)) for c in SUMMARY_TABLE],
        configuration=configuration_lines(record), host=host_lines(record),
        windows=windows, chart=chart,
        ccdf={"kind": "ccdf", "series": {row.name: ccdf}} if ccdf else None,
        explainable=capture_kind(row) is not None, spikes=_kept_spikes(row))


def _kept_spikes(row: RunRow) -> list[dict[str, Any]]:
    """The flight recorder's kept windows of a run (docs/formats.md section 9)."""
    trace = ((row.metadata or {}).get("hooks") or {}).get("trace") or {}
    return list((trace.get("recorder") or {}).get("spikes") or [])


def spike(dashboard: Dashboard, request: Request) -> Response:
    """`irqlab explain RUN --spike SEQ` as text: the flight recorder's kept window."""
    from irqlab.explain.registry import EXPLAINERS
    from irqlab.explain.report import render_json
    from irqlab.explain.seam import Request as ExplainRequest
    from irqlab.explain.seam import Silent
    from irqlab.explain.spikes import spike_capture
    from irqlab.store.errors import StoreError

    seq = int(request.path_params["seq"])
    with dashboard.access.open() as store:
        row = store.resolve(str(request.path_params["run_id"]))
        try:
            path, kind = spike_capture(store.path, row.run_id, seq)
            res = EXPLAINERS[kind].explain(store, row, ExplainRequest(sample=seq,
                                                                      capture=path),
                                           Silent())
        except StoreError as exc:
            raise PageError(404, str(exc)) from None
    return PlainTextResponse(render_json(res.js))


def api(dashboard: Dashboard, request: Request) -> Response:
    """The `irqlab show --json` summary line of the run, as one JSON object."""
    row, _ = _load(dashboard, request.path_params["run_id"])
    return json_response(show_object(row))


def report(dashboard: Dashboard, request: Request) -> HTMLResponse:
    """The run's `irqlab report` page (irqlab.reports.html.build_report, with the explain
    section when the run has a capture, as the CLI makes it), under the report's own
    CSP: inline styles, images as data: URLs, its one script by hash."""
    from irqlab.explain.registry import capture_kind, explain_json
    from irqlab.reports.data import load_runs
    from irqlab.reports.html import CSP as REPORT_CSP
    from irqlab.reports.html import build_report
    from irqlab.store.errors import StoreError

    with dashboard.access.open() as store:
        row = store.resolve(str(request.path_params["run_id"]))
        explained: dict[int, dict[str, Any] | str] = {}
        if capture_kind(row) is not None:
            try:
                explained[row.run_id] = explain_json(store, row)
            except (StoreError, OSError, ValueError) as exc:   # said in the report
                explained[row.run_id] = str(exc)
        # The store stays open while plotting: big runs' samples are read from it.
        text, _ = build_report(load_runs(store, [row]), explained=explained)
    return HTMLResponse(text, headers={"content-security-policy": REPORT_CSP})


def histogram_object(dashboard: Dashboard, run_id: int) -> dict[str, Any]:
    """The run's `irqlab show ID --hist --json` line (irqlab.reports.termhist: exact from
    the raw samples, else the stored histogram)."""
    from irqlab.reports.data import load_run
    from irqlab.reports.termhist import run_histograms

    with dashboard.access.open() as store:
        row = store.resolve(str(run_id))
        try:
            return run_histograms(store, [load_run(store, row)])[0]
        except ValueError as exc:
            raise PageError(404, str(exc)) from None


def histogram(dashboard: Dashboard, request: Request) -> HTMLResponse:
    model = histogram_object(dashboard, request.path_params["run_id"])
    total = model["samples"] or 1
    cumulative, rows = 0, []
    for b in model["buckets"]:
        cumulative += b["count"]
        rows.append({**b, "pct": 100.0 * b["count"] / total,
                     "cum_pct": 100.0 * cumulative / total})
    chart = {"kind": "bars", "labels": [f"{b['low_ns']}" for b in model["buckets"]],
             "x": list(range(len(model["buckets"]))),
             "y": [b["count"] for b in model["buckets"]]}
    return dashboard.render("histogram.html", title=f"run {model['run_id']} histogram",
                            model=model, rows=rows, chart=chart)


def histogram_api(dashboard: Dashboard, request: Request) -> Response:
    return json_response(histogram_object(dashboard, request.path_params["run_id"]))

