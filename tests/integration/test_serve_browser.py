"""`irqlab serve` in the real headless Chromium (Debian's chromium + chromium-driver),
driven over the W3C WebDriver protocol (plain HTTP to chromedriver: no client library).

One test, every page, over a store of real runs (the report tests' runs, and a fake-target
`irqlab run` started during the test that is writing while the pages read): no console
error, no request to anything but the server on 127.0.0.1, the values shown equal
`irqlab show/compare --json`, paging works, the live page shows new windows of the run
as they arrive. The run holds the store throughout, so every page is read through its
lending socket. Chromedriver, Chromium, the server and the run are always stopped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from irqlab.durations import format_latency
from irqlab.humanize import format_count, format_ratio
from tests.cli._report_store import make_store
from tests.conftest import call_cli
from tests.integration._browser import (CHROMEDRIVER, CHROMIUM, WebDriver, free_port,
                                        ready, start_server, stop, wait)
from tests.unit.reports._runs import add_run, latencies

XDIST_GROUP = ""              # no guest, nothing host-wide: fake runs, a browser (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slow]

WINDOW_S = 0.5
# The fake target registered in the child's own TARGETS (tests/unit/measure/fake_target).
_FAKE_RUN = ("import sys\nfrom irqlab.targets import TARGETS\n"
             "from tests.unit.measure.fake_target import FakeTarget\n"
             "TARGETS['fake'] = FakeTarget()\nfrom irqlab.cli.main import main\n"
             "sys.exit(main(sys.argv[1:]))")

if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip("needs chromium and chromium-driver (./setup.sh installs them)",
                allow_module_level=True)


# What a person must never read on a page (issue 46): a Python repr, a latency or ratio
# with more than 4 significant digits, a count of 5+ digits without separators, and
# (checked on the cells of *_ns keys) a bare nanosecond count.
_REPR = re.compile(r"\{'|'\}|\bNone\b|\bTrue\b|\bFalse\b|datetime\.|\(\)|\[\]")
_WITH_UNIT = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?) ?(?:ns|us|µs|ms)\b")
_DECIMAL = re.compile(r"(?<![\w.,])(\d+\.\d+)(?![\w.])")
_LONG_COUNT = re.compile(r"(?<![\w.,:/-])\d{5,}(?![\w.,])")
_LATENCY_CELL = re.compile(r"^(—|-?\d[\d,]*(?:\.\d+)? (ns|us|ms|s))$")
# The page's text a person reads: not code (commands, paths), not data blocks.
_PAGE_TEXT = ("const out = []; const w = document.createTreeWalker(document.body, "
              "NodeFilter.SHOW_TEXT); let n; while ((n = w.nextNode())) { "
              "if (n.parentElement.closest('code, script, style, pre, header, .u-legend'))"
              " continue; out.push(n.textContent); } return out.join(' | ');")


def _significant(number: str) -> int:
    digits = number.replace(",", "").replace(".", "").lstrip("0")
    return len(digits.rstrip("0")) if "." not in number else len(digits)


def unreadable(text: str, latency_cells: list[str]) -> list[str]:
    """What a person should not have to read in a page's text (empty: nothing)."""
    bad = [f"repr {m.group(0)!r}" for m in _REPR.finditer(text)]
    bad += [f"{m.group(0)!r}: > 4 significant digits" for m in _WITH_UNIT.finditer(text)
            if _significant(m.group(1)) > 4]
    bad += [f"{m.group(0)!r}: > 4 significant digits" for m in _DECIMAL.finditer(text)
            if _significant(m.group(1)) > 4]
    bad += [f"{m.group(0)!r}: no thousands separators" for m in _LONG_COUNT.finditer(text)]
    bad += [f"latency cell {c!r}: no unit" for c in latency_cells
            if not _LATENCY_CELL.match(c.strip())]
    return bad


def test_unreadable_finds_what_people_should_not_read():
    # The checker itself, on the issue's own examples and on what the pages print.
    assert unreadable("differs: {'fact': 'load.cpu', 'values': [None]}", [])
    assert unreadable("p50 ratio 1.1870367449929033", [])
    assert unreadable("max 5451747", [])
    assert unreadable("", ["5451747"])
    assert unreadable("p99.9 12.345 us", [])
    assert not unreadable("p99.9 12.3 us · 1,234,567 samples · ratio 1.19 · run 42 · "
                          "started 2026-11-28 16:58:43", ["9999 ns", "2.01 ms", "—"])


def _check_readable(driver: WebDriver, page: str) -> None:
    text = driver.js(_PAGE_TEXT)
    cells = driver.js("return [...document.querySelectorAll('[data-key$=\"_ns\"]')]"
                      ".map(e => e.textContent)")
    bad = unreadable(text, cells)
    assert not bad, f"{page}: {bad[:5]}"


def _store(tmp: Path) -> Path:
    db = make_store(tmp / "browser.duckdb")
    from irqlab.store import Store
    with Store(db) as st:
        for i in range(20):
            add_run(st, f"step-{i:02d}", (latencies("lognormal", 2_000, seed=i)
                                          * (1.5 if i >= 10 else 1.0)).astype("int64"),
                    tags={"series": "s1"}, raw=False)
    return db


def test_every_page_in_chromium(tmp_path):
    from irqlab.serve.web import figure_text

    db = _store(tmp_path)
    shown = {i: call_cli(["show", str(i), "--json"], db).lines[0] for i in (1, 3)}
    compared = call_cli(["compare", "1", "2", "3", "--json"], db).lines
    procs: list[subprocess.Popen] = []
    driver = None
    try:
        server, base = start_server(db)
        procs.append(server)
        # A run started now and writing until the end: every page below is served while
        # it holds the file (the server borrows it through the run's lending socket).
        procs.append(subprocess.Popen([sys.executable, "-c", _FAKE_RUN, "run", "--target",
                                       "fake", "--duration", "60s", "--window",
                                       f"{WINDOW_S}s", "--name", "live", "--db", str(db),
                                       "--json"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL,
                                      cwd=Path(__file__).parents[2]))
        cd_port = free_port()
        # Its own session: chromedriver and the Chromium it starts are one process group,
        # stopped together whatever happens.
        procs.append(subprocess.Popen([str(CHROMEDRIVER), f"--port={cd_port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        wait("chromedriver", lambda: ready(cd_port))
        driver = WebDriver(cd_port, tmp_path / "profile")

        # runs: paging (10 a page), values as list/show --json
        driver.get(f"{base}/?per_page=10&order=asc")
        ids = driver.js("return [...document.querySelectorAll('#runs tbody tr')]"
                        ".map(tr => Number(tr.dataset.runId))")
        assert ids == list(range(1, 11))
        assert driver.js("return document.getElementById('pages').textContent") == "3"
        _check_readable(driver, "runs")
        driver.click("#next")
        wait("page 2", lambda: driver.js(
            "return document.getElementById('page').textContent") == "2")
        assert driver.js("return [...document.querySelectorAll('#runs tbody tr')]"
                         ".map(tr => Number(tr.dataset.runId))") == list(range(11, 21))
        driver.get(f"{base}/?name=script")
        cells = driver.js("return [...document.querySelectorAll('#runs tbody tr')].map("
                          "tr => [tr.querySelector('.name').textContent, "
                          "tr.querySelector('[data-key=p999_ns]').textContent])")
        assert cells == [[shown[3]["name"], format_latency(shown[3]["p999_ns"])]]
        assert driver.js("return document.querySelectorAll('#runs script').length") == 0

        # a run: every figure is show --json's, as the CLI formats it; its charts drawn:
        # windows over the run's span, the fine histogram, the tail; the heat map image
        for run_id in (1, 3):
            driver.get(f"{base}/runs/{run_id}")
            figures = dict(driver.js("return [...document.querySelectorAll('#figures "
                                     "td[data-key]')].map(td => [td.dataset.key, "
                                     "td.textContent])"))
            assert len(figures) > 10
            for key, text in figures.items():
                assert text == figure_text(shown[run_id].get(key), key), key
            assert driver.js("return document.getElementById('run-name').textContent") \
                == shown[run_id]["name"]
            wait("charts", lambda: driver.js(
                "return document.querySelectorAll('.uplot canvas').length") == 3)
            assert driver.js("const i = document.getElementById('heat-map'); "
                             "return i.complete && i.naturalWidth") > 0
            # The windows' x axis spans the run: from 0 to the end of its last window.
            windows = json.loads(driver.js("return document.getElementById("
                                           "'chart-windows').textContent"))
            assert windows["x"][0] == 0 and windows["x_max"] == windows["x"][-1] > 0
            _check_readable(driver, f"run {run_id}")

        # the run's histogram: its counts are show --hist --json's
        hist = call_cli(["show", "3", "--hist", "--json"], db).lines[0]
        driver.click("#histogram")
        wait("the histogram", lambda: driver.js(
            "return document.querySelectorAll('.uplot canvas').length") == 2)
        assert driver.js("return [...document.querySelectorAll('#hist [data-key=count]')]"
                         ".map(td => td.textContent)") == [
            format_count(b["count"]) for b in hist["buckets"]]
        _check_readable(driver, "histogram")
        driver.get(f"{base}/runs/3")

        # the run's HTML report (irqlab report's page, its own CSP): its self-check ran
        driver.click("#report")
        checked = wait("the report's self-check", lambda: driver.js(
            "const r = document.documentElement; return r.getAttribute('data-images-total')"
            " === null ? null : [r.getAttribute('data-images-total'), "
            "r.getAttribute('data-images-ok'), r.getAttribute('data-errors')]"), timeout=30)
        assert checked[0] == checked[1] != "0" and checked[2] == "[]", checked

        # compare: the figures and verdicts of compare --json; what differs as a table;
        # the warnings one line per kind
        driver.get(f"{base}/compare?runs=1,2,3")
        rows = driver.js("return [...document.querySelectorAll('#compare tbody tr')].map("
                         "tr => Object.fromEntries([...tr.querySelectorAll('[data-key]')]"
                         ".map(td => [td.dataset.key, td.textContent])))")
        cli_rows = [o for o in compared if o["type"] == "compare_run"]
        assert len(rows) == len(cli_rows) == 3
        for row, cli in zip(rows, cli_rows):
            assert row["p999_ns"] == format_latency(cli["p999_ns"])
            assert row["p50_ratio"] == format_ratio(cli["p50_ratio"])
            assert row["verdict"] == ("baseline" if cli["baseline"]
                                      else cli["noise"]["verdict"])
        kinds = {o["kind"] for o in compared if o["type"] == "compare_warning"}
        assert driver.js("return document.querySelectorAll('p.warning').length") \
            == len(kinds)
        wait("overlay", lambda: driver.js(
            "return document.querySelectorAll('.uplot canvas').length") == 1)
        _check_readable(driver, "compare")

        # series: each run's figures, the spread, no earlier series to judge against
        driver.get(f"{base}/series/s1")
        assert driver.js("return document.querySelectorAll('#series-runs tbody tr')"
                         ".length") == 20
        assert driver.js("return document.querySelectorAll('#spread tbody tr').length") > 3
        _check_readable(driver, "series")

        # trends: the step at the series' 11th run, dated, linked to the run before
        driver.get(f"{base}/trends?series=tag:series%3Ds1&metric=p999_ns")
        assert driver.js("return document.getElementById('trend-changes').textContent") \
            == "1"
        assert driver.js("return document.querySelector('#changes tbody td').textContent"
                         ) == str(5 + 10)     # runs 1-4 of make_store, then step-10
        assert driver.js("return document.querySelector('#changes a.before').textContent"
                         ) == str(4 + 10)
        trend = json.loads(driver.js("return document.getElementById('chart-trend')"
                                     ".textContent"))
        assert trend["x"] == sorted(trend["x"]) and trend["x"][0] > 1.7e9   # dates (s)
        _check_readable(driver, "trends")

        # live: the run started above, read while it writes
        live_id = wait("the run in the store", lambda: _running_id(base), timeout=20)
        driver.get(f"{base}/runs/{live_id}/live")
        count = lambda: int(driver.js(
            "return document.getElementById('live-count').textContent"))
        first = wait("a first window", count, timeout=10)
        t0 = time.monotonic()
        wait("a new window", lambda: count() > first, timeout=20)
        # A window every WINDOW_S and a poll a second: seen within 2 windows + a poll.
        assert time.monotonic() - t0 <= 2 * WINDOW_S + 1.5
        assert driver.js("return document.getElementById('live-status').textContent") \
            == "running"
        _check_readable(driver, "live")
        # The running run's own page: no summary yet, every figure "—", windows drawn.
        driver.get(f"{base}/runs/{live_id}")
        assert driver.js("return document.getElementById('status').textContent") \
            == "running"
        assert driver.js("return document.querySelector('#figures td[data-key=p999_ns]')"
                         ".textContent") == "—"
        wait("its windows chart", lambda: driver.js(
            "return document.querySelectorAll('.uplot canvas').length") >= 1)

        # No console error anywhere; no request to anything but the server.
        errors = [e for e in driver.logs("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        urls = [json.loads(e["message"])["message"]["params"]["request"]["url"]
                for e in driver.logs("performance")
                if '"Network.requestWillBeSent"' in e["message"]]
        # chrome:// is the browser's own first tab, data: the page's empty favicon and
        # the heat map image: neither is a request to any host.
        away = [u for u in urls if not u.startswith((base + "/", "data:", "chrome://"))]
        assert len(urls) > 20 and not away, away
    finally:
        if driver is not None:
            try:
                driver.quit()
            except Exception:
                pass
        for proc in reversed(procs):
            stop(proc)


def _running_id(base: str) -> int | None:
    with urllib.request.urlopen(f"{base}/api/runs?status=running", timeout=10) as r:
        runs = json.loads(r.read())["runs"]
    return runs[0]["run_id"] if runs else None
