"""`irqlab serve`: pages and JSON over a real DuckDB store of real stored runs (the
report tests' runs: real statistics and store code), held equal to the CLI's JSON;
escaping, CSP, the token rule and the Host check. Starlette's TestClient drives the
application in-process; the token rule is also checked on a real `irqlab serve`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import pytest

from tests.cli._report_store import make_store
from tests.conftest import call_cli
from tests.unit.reports._runs import add_run, latencies

with warnings.catch_warnings():
    warnings.simplefilter("ignore")         # starlette: httpx -> httpx2 notice
    from starlette.testclient import TestClient

from irqlab.durations import format_latency
from irqlab.serve.app import CSP, build_app
from irqlab.serve.web import figure_text
from irqlab.humanize import format_count
from irqlab.serve.runs_query import (SORTS, FigureCache, RunsQuery, runs_page,
                                     select_page)
from irqlab.store import Store
from irqlab.store.interface import NewRun

HOSTILE = "<script>alert(1)</script>"
LOCAL = "http://127.0.0.1"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Runs 1-4 of make_store (3 has a script for a name and an HTML tag), then a series
    of 24 runs whose p99.9 steps up by half at its 13th run."""
    path = make_store(tmp_path_factory.mktemp("serve") / "serve.duckdb")
    with Store(path) as st:
        for i in range(24):
            scale = 1.5 if i >= 12 else 1.0
            lat = (latencies("lognormal", 3_000, seed=i) * scale).astype("int64")
            add_run(st, f"step-{i:02d}", lat, tags={"series": "s1", "board": "b1"},
                    raw=False, hostname="board-1" if i % 2 else "board-2")
    return path


@pytest.fixture(scope="module")
def client(store) -> TestClient:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TestClient(build_app(store), base_url=LOCAL)


def _cli_json(args: list[str], db: Path) -> list[dict]:
    res = call_cli([*args, "--json"], db)
    assert res.code == 0, res.stderr
    return res.lines


def _roundtrip(obj):
    """As it reads back from JSON text (the CLI's and the server's answers alike)."""
    return json.loads(json.dumps(obj, default=str))


def test_run_json_equals_irqlab_show_json(client, store):
    for run_id in (1, 2, 3, 4, 20):
        shown = _cli_json(["show", str(run_id)], store)[0]
        got = client.get(f"/api/runs/{run_id}")
        assert got.status_code == 200
        assert got.json() == shown


def test_runs_rows_equal_irqlab_list_json(client, store):
    listed = {r["run_id"]: r for r in _cli_json(["list"], store)}
    got = client.get("/api/runs?per_page=500&order=asc").json()
    assert got["total"] == len(listed) == 28
    assert [r["run_id"] for r in got["runs"]] == sorted(listed)
    for row in got["runs"]:
        extra = {k: row.pop(k) for k in ("host", "p50_ns", "p999_ns")}
        cli = {k: v for k, v in listed[row["run_id"]].items() if k not in ("type", "version")}
        assert row == cli
        if row["run_id"] <= 4:     # the extra figures are show's (a few runs: time)
            shown = _cli_json(["show", str(row["run_id"])], store)[0]
            assert (extra["p50_ns"], extra["p999_ns"]) == (shown["p50_ns"],
                                                           shown["p999_ns"])
            assert extra["host"] == shown["host"]["hostname"]


def test_compare_json_equals_irqlab_compare_json(client, store):
    cli = _cli_json(["compare", "1", "2", "3"], store)
    got = client.get("/api/compare?runs=1&runs=2,3")
    assert got.status_code == 200
    assert got.json()["objects"] == _roundtrip(cli)
    page = client.get("/compare?runs=1,2,3").text
    for row in cli[1:4]:
        assert (f'<td class="num" data-key="p999_ns">{format_latency(row["p999_ns"])}</td>'
                in page)
        verdict = "baseline" if row["baseline"] else row["noise"]["verdict"]
        assert f'<td data-key="verdict">{verdict}</td>' in page


def test_run_page_shows_the_show_figures_and_provenance(client, store):
    shown = _cli_json(["show", "1"], store)[0]
    page = client.get("/runs/1").text
    for key in ("samples", "p50_ns", "p99_ns", "p999_ns", "p9999_ns", "max_ns"):
        text = figure_text(shown[key], key)
        assert f'<td class="num" data-key="{key}">{text}</td>' in page
    assert "<th>hostname</th><td>h1</td>" in page
    assert "<th>target</th><td>guest x86_64 accel kvm" in page
    assert 'id="chart-windows"' in page


def test_histogram_equals_irqlab_show_hist_json(client, store):
    for run_id in (1, 4):        # raw samples (exact); summary only: no histogram
        res = call_cli(["show", str(run_id), "--hist", "--json"], store)
        got = client.get(f"/api/runs/{run_id}/histogram")
        if res.code == 0:
            assert got.status_code == 200 and got.json() == res.lines[0]
            page = client.get(f"/runs/{run_id}/histogram").text
            counts = re.findall(r'<td class="num" data-key="count">([\d,]+)</td>', page)
            assert counts == [format_count(b["count"]) for b in res.lines[0]["buckets"]]
        else:
            assert got.status_code == 404 and "has no histogram" in got.json()["error"]


@pytest.mark.slow        # matplotlib's import and plots: ~2 s, 5 s on a loaded host
def test_the_report_link_serves_irqlab_report_under_its_own_csp(client):
    from irqlab.reports.html import CSP as REPORT_CSP

    got = client.get("/runs/3/report")
    assert got.status_code == 200 and got.text.startswith("<!DOCTYPE html>")
    assert got.headers["content-security-policy"] == REPORT_CSP
    assert HOSTILE not in got.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in got.text
    assert got.headers["x-content-type-options"] == "nosniff"
    assert 'href="/runs/3/report"' in client.get("/runs/3").text


def test_hostile_names_and_tags_are_shown_inert(client):
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    for url in ("/", "/runs/3", "/compare?runs=1,3", "/runs/3/live", "/?name=%3Cscript"):
        got = client.get(url)
        assert got.status_code == 200, url
        assert HOSTILE not in got.text and "<b>" not in got.text, url
        assert escaped in got.text, url
        assert got.headers["content-security-policy"] == CSP
        assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP
    # In the JSON blocks the charts read, '<' is escaped too (no </script> break-out).
    chart = re.search(r'<script type="application/json" id="chart-tail">(.*?)</script>',
                      client.get("/compare?runs=1,3").text, re.S).group(1)
    assert "<" not in chart and HOSTILE in json.loads(chart)["series"].__repr__()


def test_paging_filters_and_sorting(client, store):
    page1 = client.get("/api/runs?per_page=10&tag=series%3Ds1").json()
    assert (page1["total"], page1["pages"]) == (24, 3)
    page3 = client.get("/api/runs?per_page=10&tag=series%3Ds1&page=3").json()
    assert len(page3["runs"]) == 4
    ids = [r["run_id"] for p in (1, 2, 3) for r in client.get(
        f"/api/runs?per_page=10&tag=series%3Ds1&page={p}").json()["runs"]]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 24
    by_p999 = client.get("/api/runs?sort=p999_ns&order=asc&per_page=500").json()["runs"]
    values = [r["p999_ns"] for r in by_p999]
    assert values == sorted(values)
    hosts = client.get("/api/runs?host=board-1&per_page=500").json()["runs"]
    assert len(hosts) == 12 and {r["host"] for r in hosts} == {"board-1"}
    html = client.get("/?per_page=10&tag=series%3Ds1").text
    assert 'id="next" href="/?tag=series%3Ds1&amp;page=2&amp;per_page=10"' in html
    assert client.get("/?sort=nonsense").status_code == 400
    assert "sort &#39;nonsense&#39;: one of" in client.get("/?sort=nonsense").text


@pytest.mark.parametrize("params", [
    {}, {"sort": "p999_ns"}, {"sort": "name", "order": "asc", "per_page": "7", "page": "2"},
    {"tag": "board=b1", "sort": "max_ns"}, {"name": "STEP-1"}, {"host": "board-2"},
    {"sort": "samples", "order": "asc"}, {"since": "2000-01-01", "sort": "started_at"}])
def test_sql_pages_equal_the_python_pages(store, params):
    # The Python path serves a borrowed store (a run holds the file): same rows; so do
    # the pages sorted from the figure cache, fresh and warm.
    q = RunsQuery.from_params(params)
    cache = FigureCache()
    with Store(store, read_only=True) as st:
        expected = select_page(st.runs(), q)
        for page in (runs_page(st, q), runs_page(st, q, cache), runs_page(st, q, cache)):
            assert (page.rows, page.total) == (expected.rows, expected.total)


@pytest.mark.parametrize("older_holder", [False, True])
def test_a_borrowed_store_is_paged_by_the_holder(store, older_holder):
    """While another process holds the file (a run), the page is cut by the holder's
    named operations (store/share.py), not from every row: same pages. A holder without
    those operations (an older irqlab) refuses them: the page is cut from every row."""
    from irqlab.store import share

    assert SORTS == share.RUNS_PAGE_SORTS
    forget = ("from irqlab.store import share\nfor op in ('run_count', 'run_ids_page', "
              "'runs_by_ids'):\n    del share.OPS[op]\n") if older_holder else ""
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys\n{forget}from irqlab.store import Store\n"
         f"s = Store({str(store)!r})\nprint('held', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with Store(store, read_only=True) as st:
            assert st.holder_pid == holder.pid
            everything = st.runs()
            for params in ({}, {"sort": "p999_ns", "per_page": "5", "page": "3"},
                           {"tag": "series=s1", "sort": "name", "order": "asc"},
                           {"name": "step-1", "host": "board-1", "since": "2000-01-01"}):
                q = RunsQuery.from_params(params)
                got, expected = runs_page(st, q, FigureCache()), select_page(everything, q)
                assert (got.rows, got.total) == (expected.rows, expected.total), params
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    refused = "request refused: no operation 'run_count'" in holder.stderr.read()
    assert refused == older_holder


def test_the_figure_cache_follows_a_run_from_running_to_finished(tmp_path):
    db = tmp_path / "c.duckdb"
    with Store(db) as st:
        for i in range(3):
            add_run(st, f"r{i}", latencies("ramp", 1_000) * (i + 1), raw=False)
    cache = FigureCache()
    q = RunsQuery(sort="p999_ns")
    with Store(db) as st:
        assert [r["run_id"] for r in runs_page(st, q, cache).rows] == [3, 2, 1]
        rid = st.create_run(NewRun("late", "guest", {}, {}))          # running: no summary yet
        assert [r["run_id"] for r in runs_page(st, q, cache).rows] == [3, 2, 1, rid]
        st.finish_run(rid, "ok", {"p999_ns": 10**9, "samples": 1})
        page = runs_page(st, q, cache)
        assert [r["run_id"] for r in page.rows] == [rid, 3, 2, 1]
        assert page.rows == select_page(st.runs(), q).rows


def test_trend_equals_irqlab_trend_json_and_finds_the_step(client, store):
    cli = _cli_json(["trend", "tag:series=s1", "--metric", "p99.9"], store)
    got = client.get("/api/trends?series=tag:series%3Ds1&metric=p99.9")
    assert got.status_code == 200
    assert got.json()["lines"] == _roundtrip(cli)
    changes = [x for x in cli if x["type"] == "trend_change"]
    assert [c["index"] for c in changes] == [12] and changes[0]["p_value"] <= 0.05
    page = client.get("/trends?series=tag:series%3Ds1").text
    assert 'id="chart-trend"' in page
    assert f'<td class="num" data-key="p_value">{changes[0]["p_value"]}</td>' in page
    assert client.get("/trends?series=tag:series%3Ds1&metric=nonsense").status_code == 400


def test_live_windows_after_an_index(client, store):
    all_w = client.get("/api/runs/1/windows").json()["windows"]
    assert all_w == _roundtrip(_windows(store, 1))
    later = client.get("/api/runs/1/windows?after=5").json()["windows"]
    assert [w["index"] for w in later] == [w["index"] for w in all_w if w["index"] >= 5]


def _windows(db: Path, run_id: int) -> list[dict]:
    with Store(db, read_only=True) as st:
        return st.windows(run_id)


def test_the_server_leaves_the_file_free_for_a_writer(client, store, monkeypatch):
    # A run opening the file after pages were served gets it at once (no waiting for a
    # reader: IRQLAB_DB_WAIT_S=0 makes a held file an error).
    monkeypatch.setenv("IRQLAB_DB_WAIT_S", "0")
    assert client.get("/").status_code == 200
    assert client.get("/runs/1").status_code == 200
    with Store(store) as writer:
        assert writer.holder_pid is None and writer.resolve("1").run_id == 1


def test_token_is_required_when_set(store):
    token = "t" * 32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = TestClient(build_app(store, token, None), base_url="http://192.0.2.1")
    assert c.get("/").status_code == 401
    assert c.get("/api/runs/1").status_code == 401
    assert c.get("/static/irqlab.js").status_code == 401
    assert c.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.get("/", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    first = c.get(f"/runs/1?token={token}", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/runs/1"
    assert "httponly" in first.headers["set-cookie"].lower()
    assert c.get("/runs/1").status_code == 200          # the cookie now carries it


def test_loopback_server_answers_loopback_host_names_only(client):
    assert client.get("/", headers={"Host": "evil.example"}).status_code == 421
    assert client.get("/", headers={"Host": "localhost:8470"}).status_code == 200


def _start(db: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "serve", "--db",
                             str(db), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def test_a_non_loopback_bind_answers_401_without_the_token(store):
    proc, line = _start(store, "--bind", "0.0.0.0:0")
    try:
        m = re.fullmatch(r"irqlab serve: http://0\.0\.0\.0:(\d+)/\?token=(\S+)", line)
        assert m, line
        assert "a token is required" in proc.stdout.readline()
        base = f"http://127.0.0.1:{m.group(1)}"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/api/runs/1", timeout=10)
        assert refused.value.code == 401
        req = urllib.request.Request(f"{base}/api/runs/1",
                                     headers={"Authorization": f"Bearer {m.group(2)}"})
        with urllib.request.urlopen(req, timeout=10) as ok:
            assert json.loads(ok.read())["run_id"] == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("args, words", [
    (["--bind", "nowhere:80"], "is not an IP address"),
    (["--bind", "127.0.0.1:99999"], "the port must be 0-65535"),
    (["--token", "short"], "at least 16 characters"),
])
def test_bad_options_are_one_line_and_exit_2(store, args, words):
    res = call_cli(["serve", *args], store)
    assert res.code == 2 and words in res.stderr and len(res.stderr.splitlines()) == 1


def test_a_missing_store_is_one_line(tmp_path):
    res = call_cli(["serve"], tmp_path / "none.duckdb")
    assert res.code == 2 and "no database at" in res.stderr


def test_help_does_not_import_the_web_stack():
    code = ("import sys, contextlib, io\nfrom irqlab.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: main(['--help'])\n    except SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('starlette', 'uvicorn', 'jinja2', 'irqlab') and 'serve' in m or "
            "m.split('.')[0] in ('starlette', 'uvicorn')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.slow
def test_a_lab_store_pages_in_sql_as_list_shows_it(store, pg_server):
    """PostgreSQL (JSONB) pages: the rows of `irqlab list --db URL --json`, and the same
    pages as the Python path for a sort by a figure and a tag filter."""
    from irqlab.store import open_store

    url = pg_server.database("serve_pages")
    res = call_cli(["push", *map(str, range(1, 29)), "--to", url, "--json"], store)
    assert res.code == 0, res.stderr
    listed = {r["run_id"]: r for r in _cli_json(["list"], url)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lab = TestClient(build_app(url), base_url=LOCAL)
    got = lab.get("/api/runs?per_page=500").json()
    assert got["total"] == len(listed) == 28
    for row in got["runs"]:
        cli = {k: v for k, v in listed[row["run_id"]].items() if k not in ("type", "version")}
        assert {k: v for k, v in row.items() if k not in ("host", "p50_ns", "p999_ns")} == cli
    assert lab.get("/api/runs/3").json() == _cli_json(["show", "3"], url)[0]
    with open_store(url, read_only=True) as st:
        for params in ({"sort": "p999_ns", "per_page": "10", "page": "2"},
                       {"tag": "series=s1", "sort": "name", "order": "asc"},
                       {"name": "STEP", "host": "board-1", "sort": "max_ns"}):
            q = RunsQuery.from_params(params)
            expected = select_page(st.runs(), q).rows
            assert runs_page(st, q).rows == expected, params
            assert runs_page(st, q, FigureCache()).rows == expected, params
