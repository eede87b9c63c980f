"""What every page shares: the store access, the templates, JSON answers, errors.

(Its own module: the page modules import it, and app.py imports the pages.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.responses import HTMLResponse, Response

from irqlab import __version__
from irqlab.durations import format_latency
from irqlab.serve.access import StoreAccess
from irqlab.serve.runs_query import FigureCache
from irqlab.reports.tables import fmt_p
from irqlab.humanize import format_count, format_ratio, format_when
from irqlab.store.location import redact

HERE = Path(__file__).parent


class PageError(Exception):
    """A request the page cannot answer: ``status`` and a line naming the fix."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


def format_seconds(seconds: float | None) -> str:
    """A time into the run: '2.5 s', '1,234 s' (windows start on whole steps)."""
    if seconds is None:
        return "—"
    return f"{seconds:,.0f} s" if abs(seconds) >= 1000 else f"{seconds:.4g} s"


def figure_text(value: Any, key: str) -> str:
    """A summary figure by its key: a latency (``*_ns``), a ratio (``*_ratio``), else a
    count."""
    if value is None:
        return "—"
    if key.endswith("_ns"):
        return format_latency(value)
    if key.endswith("_ratio"):
        return format_ratio(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return format_count(value) if isinstance(value, int) else f"{value:.3g}"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    # Every figure through the CLI's formatters (one definition each): a latency as
    # `irqlab show` prints it, counts with separators, ratios to 3 significant digits,
    # times to the second.
    env.filters["latency"] = format_latency
    env.filters["count"] = format_count
    env.filters["ratio"] = format_ratio
    env.filters["when"] = format_when
    env.filters["seconds"] = format_seconds
    env.filters["figure"] = figure_text
    env.filters["pvalue"] = lambda p: fmt_p(p).removeprefix("p").lstrip("=")
    env.filters["or_dash"] = lambda v: "—" if v is None or v == "" else v
    env.globals["version"] = __version__
    env.globals["qs"] = lambda params: urlencode(params, doseq=True)
    return env


class Dashboard:
    """What every page shares: the store, the templates and the store's name for titles."""

    def __init__(self, db: str | Path) -> None:
        self.access = StoreAccess(db)
        # Figures the runs page sorts by, kept between requests (read under access's lock).
        self.figures = FigureCache()
        self.db_name = redact(str(db))
        self.templates = _environment()
        for name in self.templates.list_templates():    # compiled now, not on a request
            self.templates.get_template(name)

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        text = self.templates.get_template(template).render(db=self.db_name, **values)
        return HTMLResponse(text, status_code=status)


def json_response(obj: Any, status: int = 200) -> Response:
    """JSON as the CLI writes its lines (irqlab/cli/output/json_lines.py json_line:
    datetimes and other non-JSON values as text), so an endpoint and `--json` agree to
    the byte."""
    return Response(json.dumps(obj, default=str), status, media_type="application/json")
