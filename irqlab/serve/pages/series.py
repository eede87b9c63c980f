"""A series (`irqlab run --repeat`): each run's figures, their spread between runs, and
the verdict of the series against the one before it of the same name (compare's noise
test over the two series: Welch's t, the run as the unit), all as `irqlab compare
series:PREV series:ID --json` gives them."""

from __future__ import annotations

import statistics
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from irqlab.reports.select import SERIES_PREFIX, SERIES_TAG
from irqlab.serve.web import Dashboard, PageError
from irqlab.stats.fields import COMPARE_TABLE


def _previous_series(store: Any, rows: list[Any]) -> str | None:
    """The id of the latest series of runs of the same name before this one (None)."""
    first = min(r.run_id for r in rows)
    this = rows[0].tags.get(SERIES_TAG)
    before = [r for r in store.runs() if r.name == rows[0].name and r.run_id < first
              and r.tags.get(SERIES_TAG) and r.tags.get(SERIES_TAG) != this]
    return max(before, key=lambda r: r.run_id).tags[SERIES_TAG] if before else None


def spread(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per latency figure of the compare table: the lowest, median and highest of the
    series' runs, and highest over lowest (how far repeated runs of one configuration
    land apart)."""
    out = []
    for c in COMPARE_TABLE:
        if c.field.unit != "ns":
            continue
        values = [r[c.key] for r in rows if isinstance(r.get(c.key), (int, float))]
        if not values:
            continue
        low, high = min(values), max(values)
        out.append({"figure": c.heading, "key": c.key, "low_ns": low,
                    "median_ns": round(statistics.median(values)), "high_ns": high,
                    "ratio": high / low if low > 0 else None})
    return out


def page(dashboard: Dashboard, request: Request) -> HTMLResponse:
    from irqlab.reports.select import select_runs
    from irqlab.reports.tables import HUMAN_COLUMNS, cell
    from irqlab.serve.pages.compare import compare_objects, verdict_text

    series = request.path_params["series"]
    with dashboard.access.open() as store:
        rows = select_runs(store, [SERIES_PREFIX + series])
        if not rows:
            raise PageError(404, f"no series {series!r}: `irqlab list` shows the series")
        previous = _previous_series(store, rows)
    series_id = rows[0].tags.get(SERIES_TAG, series)
    refs = ([SERIES_PREFIX + previous] if previous else []) + [SERIES_PREFIX + series_id]
    charts: dict[str, Any] = {}
    objects = compare_objects(dashboard, refs, None, charts)
    compared = [o for o in objects if o["type"] == "compare_run"]
    mine = [r for r in compared if r.get("series") == series_id] or compared
    columns = [(h, key, kind) for h, key, kind in HUMAN_COLUMNS
               if kind not in ("verdict",) and not key.endswith("_ratio")]
    table = [{"run_id": r["run_id"], "cells": [(key, cell(r, key, kind))
                                               for _h, key, kind in columns]}
             for r in mine]
    verdict = verdict_text(mine[-1]) if previous and mine else None
    return dashboard.render(
        "series.html", title=f"series {series_id}", series=series_id,
        name=rows[0].name, runs=len(mine), columns=columns, table=table,
        spread=spread(mine), previous=previous, verdict=verdict,
        ratios=[(h, cell(mine[-1], key, kind)) for h, key, kind in HUMAN_COLUMNS
                if key.endswith("_ratio")] if previous and mine else [],
        compare_refs=",".join(refs), charts=charts)
