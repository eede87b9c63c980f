"""The dashboard's ASGI application (Starlette): routes, templates, security headers, token.

Safety, as the HTML report (irqlab/reports/html.py): every value from a run reaches the
page through Jinja2 with autoescape on (names, tags, metadata are data, never markup);
chart data travels as JSON in ``<script type="application/json">`` (Jinja2's ``tojson``
escapes ``<``, ``>``, ``&`` and quotes); and a Content-Security-Policy allows scripts,
styles and fetches from this server only: no inline script, no other origin, so even a
missed escape could neither run code nor send anything anywhere.
"""

from __future__ import annotations

import hmac
import html
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from irqlab.serve.runs_query import BadQuery, RunsQuery, runs_page
from irqlab.serve.web import Dashboard, PageError, json_response
from irqlab.store.errors import StoreError
from irqlab.store.location import redact

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()),
           (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"),
           (b"x-frame-options", b"DENY")]
TOKEN_COOKIE = "irqlab_token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
# A bound on the work one request can ask for, checked on the event loop before any of
# it: the longest query a page makes (20 selectors of run names, a filter) is well under
# this, and 30 requests of 16 k characters in flight stalled every page for 33 s (issue
# 47: each held a worker thread and the store for its selectors).
MAX_QUERY_BYTES = 8192
# Pages that compute over runs' samples (compare, trends, a report, a histogram) run at
# most this many at once, in threads of their own: the runs list and a run's page keep
# the rest of anyio's workers however many slow requests are in flight.
SLOW_AT_ONCE = 1

Handler = Callable[[Request], Awaitable[Response]]


class _SlowPages:
    """The limiter the slow pages share (made on first use: it belongs to the event
    loop that serves)."""

    def __init__(self, at_once: int) -> None:
        self.at_once = at_once
        self._limiter: Any = None

    def limiter(self) -> Any:
        import anyio
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.at_once)
        return self._limiter


def _page(dashboard: Dashboard, fn: Callable[[Dashboard, Request], Response],
          json: bool = False, slow: _SlowPages | None = None) -> Handler:
    """A route handler: the page function in a worker thread (it reads the store, which
    blocks; a ``slow`` page in one of its few), a store or query problem as an error
    page (or JSON) naming the fix."""
    import anyio.to_thread

    async def handler(request: Request) -> Response:
        try:
            return await anyio.to_thread.run_sync(
                fn, dashboard, request, limiter=slow.limiter() if slow else None)
        except (PageError, BadQuery, StoreError) as exc:
            status = exc.status if isinstance(exc, PageError) else (
                400 if isinstance(exc, BadQuery) else 404 if "no run" in str(exc) else 400)
            text = redact(str(exc))
            if json:
                return json_response({"error": text}, status)
            return dashboard.render("error.html", status=status, title="error",
                                    message=text)
    return handler


def build_app(db: str | Path, token: str | None = None,
              allowed_hosts: tuple[str, ...] | None = LOOPBACK_HOSTS,
              warm: bool = False) -> Guard:
    """The application over the store ``db``. ``token``: every request must carry it
    (``Authorization: Bearer``, the ``irqlab_token`` cookie, or ``?token=`` once, which
    sets the cookie). ``allowed_hosts``: the Host headers answered (None: any), so a web
    page elsewhere cannot reach a loopback server through DNS rebinding. ``warm``: read
    every run's sort figures now (one scan), not in the first sort a visitor asks for."""
    from irqlab.serve.pages import compare, live, run, runs, series, trends

    dashboard = Dashboard(db)
    if warm:
        with dashboard.access.open() as store:
            runs_page(store, RunsQuery(sort="p999_ns", per_page=1), dashboard.figures)
    slow = _SlowPages(SLOW_AT_ONCE)
    routes = [
        Route("/", _page(dashboard, runs.page)),
        Route("/runs/{run_id:int}", _page(dashboard, run.page)),
        Route("/runs/{run_id:int}/live", _page(dashboard, live.page)),
        Route("/runs/{run_id:int}/report", _page(dashboard, run.report, slow=slow)),
        Route("/runs/{run_id:int}/histogram", _page(dashboard, run.histogram, slow=slow)),
        Route("/runs/{run_id:int}/spikes/{seq:int}", _page(dashboard, run.spike, slow=slow)),
        Route("/runs/{run_id:int}/explain", _page(dashboard, run.explain, slow=slow)),
        Route("/runs/{run_id:int}/tail", _page(dashboard, run.tail, slow=slow)),
        Route("/series/{series}", _page(dashboard, series.page, slow=slow)),
        Route("/compare", _page(dashboard, compare.page, slow=slow)),
        Route("/trends", _page(dashboard, trends.page, slow=slow)),
        Route("/api/runs", _page(dashboard, runs.api, json=True)),
        Route("/api/runs/{run_id:int}", _page(dashboard, run.api, json=True)),
        Route("/api/runs/{run_id:int}/windows", _page(dashboard, live.api, json=True)),
        Route("/api/runs/{run_id:int}/histogram",
              _page(dashboard, run.histogram_api, json=True, slow=slow)),
        Route("/api/compare", _page(dashboard, compare.api, json=True, slow=slow)),
        Route("/api/trends", _page(dashboard, trends.api, json=True, slow=slow)),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static")),
    ]
    return Guard(Starlette(routes=routes), token, allowed_hosts)


class Guard:
    """Pure ASGI middleware: Host check, token check, security headers on every answer."""

    def __init__(self, app: Any, token: str | None,
                 allowed_hosts: tuple[str, ...] | None) -> None:
        self.app, self.token, self.allowed_hosts = app, token, allowed_hosts

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                # A page that sets its own policy (the report: its script by hash)
                # keeps it; every other answer gets the dashboard's.
                have = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = list(message.get("headers", [])) + [
                    (k, v) for k, v in HEADERS if k not in have]
            await send(message)

        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._refused(scope, headers)
        if problem is not None:
            await problem(scope, receive, send_with_headers)
            return
        if self.token is not None and _query_token(scope) is not None:
            # The token came in the URL (the one printed at start): keep it in a cookie
            # and drop it from the address bar, history and Referer.
            await _redirect_without_token(scope, self.token)(scope, receive,
                                                             send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _refused(self, scope: dict, headers: dict[str, str]) -> Response | None:
        query = scope.get("query_string", b"")
        if len(query) > MAX_QUERY_BYTES:
            text = (f"irqlab serve: a query of {len(query):,} bytes: at most "
                    f"{MAX_QUERY_BYTES:,} (name runs by id, or by a tag:, suite: or "
                    f"series: selector)")
            if scope.get("path", "").startswith("/api/"):
                return json_response({"error": text}, 414)
            return Response(text + "\n", 414, media_type="text/plain")
        if self.allowed_hosts is not None:
            host = headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in self.allowed_hosts:
                return Response(f"irqlab serve: host {host!r} is not served: open "
                                f"http://127.0.0.1:PORT/\n", 421, media_type="text/plain")
        if self.token is None:
            return None
        given = _bearer(headers) or _cookie(headers) or _query_token(scope) or ""
        if hmac.compare_digest(given.encode(), self.token.encode()):
            return None
        return Response("irqlab serve: 401: a token is required: open the URL `irqlab "
                        "serve` printed (it ends in ?token=...), or send "
                        "'Authorization: Bearer TOKEN'\n", 401, media_type="text/plain",
                        headers={"www-authenticate": 'Bearer realm="irqlab"'})


def _bearer(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    return value[7:].strip() if value.lower().startswith("bearer ") else None


def _cookie(headers: dict[str, str]) -> str | None:
    jar = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:           # a malformed cookie header is no token
        return None
    morsel = jar.get(TOKEN_COOKIE)
    return morsel.value if morsel else None


def _query_token(scope: dict) -> str | None:
    for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1")):
        if key == "token":
            return value
    return None


def _redirect_without_token(scope: dict, token: str) -> Response:
    rest = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
            if k != "token"]
    # One leading slash: "//host/..." would send the browser to another host.
    target = "/" + scope.get("path", "/").lstrip("/") + (f"?{urlencode(rest)}" if rest
                                                         else "")
    response = Response(f"<a href=\"{html.escape(target)}\">continue</a>", 303,
                        headers={"location": target}, media_type="text/html")
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
    return response
