"""One run: every figure, its windows over the run's time span, its distribution (fine
bins, per CPU), tail and heat map (irqlab.reports.plotdata, as the HTML report draws
them), its configuration and host facts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from irqlab.reports.provenance import configuration_lines, host_lines
from irqlab.reports.select import SERIES_TAG
from irqlab.serve.charts import run_charts
from irqlab.serve.web import Dashboard, PageError, json_response
from irqlab.stats.fields import SUMMARY_TABLE
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


def _load(dashboard: Dashboard, run_id: int) -> tuple[RunRow, list[dict[str, Any]]]:
    with dashboard.access.open() as store:
        row = store.resolve(str(run_id))
        return row, store.windows(row.run_id)


def page(dashboard: Dashboard, request: Request) -> HTMLResponse:
    from irqlab.explain.registry import capture_kind
    from irqlab.reports.data import RunData, load_run

    with dashboard.access.open() as store:
        row = store.resolve(str(request.path_params["run_id"]))
        # A running run: its windows only (its samples are still being written).
        run = (RunData(row=row, windows=store.windows(row.run_id)) if row.status == "running"
               else load_run(store, row))
        # The store stays open while the plot data is made: a big run's samples are
        # read from it (reports/scan.py).
        charts = run_charts(run)
    shown = show_object(row)
    record = provenance(row)
    return dashboard.render(
        "run.html", title=f"run {row.run_id}", row=row, summary=shown,
        figures=[(c.field.label, c.key, shown.get(c.key)) for c in SUMMARY_TABLE],
        configuration=_pairs(configuration_lines(record)), host=_pairs(host_lines(record)),
        windows=run.windows, charts=charts, series=row.tags.get(SERIES_TAG),
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


def _pairs(lines: list[str]) -> list[tuple[str, str]]:
    """``fact: value`` lines (irqlab show's blocks) as table rows."""
    return [(k, v) for k, _, v in (line.partition(": ") for line in lines)]


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


def histogram_object(dashboard: Dashboard, run_id: int,
                     charts: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's `irqlab show ID --hist --json` line (irqlab.reports.termhist: exact from
    the raw samples, else the stored histogram); with ``charts``, its distribution and
    tail charts are added there (the same RunData, read once)."""
    from irqlab.reports.data import load_run
    from irqlab.reports.termhist import run_histograms
    from irqlab.serve.charts import distribution_chart, tail_chart

    with dashboard.access.open() as store:
        row = store.resolve(str(run_id))
        run = load_run(store, row)
        try:
            model = run_histograms(store, [run])[0]
        except ValueError as exc:
            raise PageError(404, str(exc)) from None
        if charts is not None:
            charts.update({k: v for k, v in (("distribution", distribution_chart(run)),
                                             ("tail", tail_chart([run]))) if v})
        return model


def histogram(dashboard: Dashboard, request: Request) -> HTMLResponse:
    from irqlab.reports.termhist import bucket_share, cumulative_share

    charts: dict[str, Any] = {}
    model = histogram_object(dashboard, request.path_params["run_id"], charts)
    total = model["samples"] or 1
    cumulative, rows = 0, []
    for b in model["buckets"]:
        cumulative += b["count"]
        rows.append({**b, "pct": bucket_share(b["count"], total).strip(),
                     "cum_pct": cumulative_share(cumulative, total).strip()})
    return dashboard.render("histogram.html", title=f"run {model['run_id']} histogram",
                            model=model, rows=rows, charts=charts)


def histogram_api(dashboard: Dashboard, request: Request) -> Response:
    return json_response(histogram_object(dashboard, request.path_params["run_id"]))


# Explain page: this many causes and spikes (the JSON has them all).
TOP_CAUSES = 10
TOP_SPIKES = 10
BAR_WIDTH_PX = 600


def spike_bars(sample: dict[str, Any], longest_ns: int) -> list[dict[str, Any]]:
    """A spike's path as bars: one per step between consecutive traced stages, from the
    deadline, at x and width in px of BAR_WIDTH_PX for ``longest_ns`` (the page's worst
    spike), so spikes line up on one scale."""
    stages = sorted(sample.get("stages") or [], key=lambda s: s["at_ns"])
    scale = BAR_WIDTH_PX / max(longest_ns, 1)
    bars, prev = [], {"stage": "deadline", "at_ns": 0}
    for stage in stages + [{"stage": "ISR entry", "at_ns": sample["latency_ns"]}]:
        if stage["at_ns"] <= prev["at_ns"] and bars:
            continue
        width_ns = max(stage["at_ns"] - prev["at_ns"], 0)
        bars.append({"from": prev["stage"], "to": stage["stage"], "ns": width_ns,
                     "x": round(prev["at_ns"] * scale, 1),
                     "width": max(round(width_ns * scale, 1), 1.0)})
        prev = stage
    return bars


def tail(dashboard: Dashboard, request: Request) -> HTMLResponse:
    """The tail beyond the data (`irqlab tail ID`): the extreme-value fit's checks,
    exceedance probabilities and pWCET, computed on request from the raw samples."""
    from irqlab.reports.data import load_run
    from irqlab.reports.tail import build_tail, tail_lines

    with dashboard.access.open() as store:
        row = store.resolve(str(request.path_params["run_id"]))
        data = load_run(store, row)
        if not data.has_raw:
            raise PageError(404, f"run {row.run_id} kept no raw samples: a tail fit "
                                 f"needs them")
        model = build_tail([data])
    return dashboard.render("tail.html", title=f"run {row.run_id} tail", row=row,
                            model=model, lines=tail_lines(model))


def explain(dashboard: Dashboard, request: Request) -> HTMLResponse:
    """Where the time goes (`irqlab explain ID --json`): the causes that took time, and
    the worst traced spikes with their path's stages as bars."""
    from irqlab.explain.registry import capture_kind, explain_json
    from irqlab.store.errors import StoreError

    with dashboard.access.open() as store:
        row = store.resolve(str(request.path_params["run_id"]))
        if capture_kind(row) is None:
            raise PageError(404, f"run {row.run_id} has no capture to explain: record one "
                                 f"with `irqlab run --trace`")
        try:
            js = explain_json(store, row)
        except (StoreError, OSError, ValueError) as exc:
            raise PageError(400, f"run {row.run_id} cannot be explained: {exc}") from None
    causes = [c for c in js["culprits"] if c.get("samples")][:TOP_CAUSES]
    # The worst traced spikes first: a sample outside the capture has no path to show.
    traced = sorted((s for s in js["samples"] if s.get("status") != "not traced"),
                    key=lambda s: -s["latency_ns"])[:TOP_SPIKES]
    longest = max((s["latency_ns"] for s in traced), default=1)
    spikes = [{**s, "bars": spike_bars(s, longest)} for s in traced]
    return dashboard.render("explain.html", title=f"run {row.run_id} explained", row=row,
                            js=js, causes=causes, spikes=spikes, bar_width=BAR_WIDTH_PX)
