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

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.cli._report_store import make_store
from tests.conftest import call_cli
from tests.unit.reports._runs import add_run, latencies

XDIST_GROUP = ""              # no guest, nothing host-wide: fake runs, a browser (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WINDOW_S = 0.5
# The fake target registered in the child's own TARGETS (tests/unit/measure/fake_target).
_FAKE_RUN = ("import sys\nfrom irqlab.targets import TARGETS\n"
             "from tests.unit.measure.fake_target import FakeTarget\n"
             "TARGETS['fake'] = FakeTarget()\nfrom irqlab.cli.main import main\n"
             "sys.exit(main(sys.argv[1:]))")

if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip("needs chromium and chromium-driver (./setup.sh installs them)",
                allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriver:
    """The few W3C WebDriver commands the test needs, plus chromedriver's log endpoint."""

    def __init__(self, port: int, profile: Path) -> None:
        self.base = f"http://127.0.0.1:{port}"
        caps = {"browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": str(CHROMIUM),
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                             "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                             "--no-first-run", "--disable-background-networking",
                             "--disable-component-update", "--disable-sync",
                             "--window-size=1280,900"],
                    "perfLoggingPrefs": {"enableNetwork": True, "enablePage": False}},
                "goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"}}
        self.session = self._call("POST", "/session",
                                  {"capabilities": {"alwaysMatch": caps}})["sessionId"]

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())["value"]

    def cmd(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    def get(self, url: str) -> None:
        self.cmd("POST", "/url", {"url": url})

    def js(self, script: str, *args: Any) -> Any:
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def click(self, css: str) -> None:
        el = self.cmd("POST", "/element", {"using": "css selector", "value": css})
        self.cmd("POST", f"/element/{next(iter(el.values()))}/click", {})

    def logs(self, kind: str) -> list[dict]:
        return self.cmd("POST", "/se/log", {"type": kind})

    def quit(self) -> None:
        self.cmd("DELETE", "")


def _wait(what: str, check, timeout: float = 10.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.args[0] == str(CHROMEDRIVER):
        # Chromium outlives a chromedriver that was stopped before the session ended.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


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
    db = _store(tmp_path)
    shown = {i: call_cli(["show", str(i), "--json"], db).lines[0] for i in (1, 3)}
    compared = call_cli(["compare", "1", "2", "3", "--json"], db).lines
    procs: list[subprocess.Popen] = []
    driver = None
    try:
        server = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "serve", "--db",
                                   str(db), "--bind", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(server)
        line = server.stdout.readline().strip()
        assert line.startswith("irqlab serve: http://127.0.0.1:"), line
        base = line.split(": ", 1)[1].rstrip("/")
        # A run started now and writing until the end: every page below is served while
        # it holds the file (the server borrows it through the run's lending socket).
        procs.append(subprocess.Popen([sys.executable, "-c", _FAKE_RUN, "run", "--target",
                                       "fake", "--duration", "60s", "--window",
                                       f"{WINDOW_S}s", "--name", "live", "--db", str(db),
                                       "--json"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL,
                                      cwd=Path(__file__).parents[2]))
        cd_port = _free_port()
        # Its own session: chromedriver and the Chromium it starts are one process group,
        # stopped together whatever happens.
        procs.append(subprocess.Popen([str(CHROMEDRIVER), f"--port={cd_port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        _wait("chromedriver", lambda: _ready(cd_port))
        driver = WebDriver(cd_port, tmp_path / "profile")

        # runs: paging (10 a page), values as list/show --json
        driver.get(f"{base}/?per_page=10&order=asc")
        ids = driver.js("return [...document.querySelectorAll('#runs tbody tr')]"
                        ".map(tr => Number(tr.dataset.runId))")
        assert ids == list(range(1, 11))
        assert driver.js("return document.getElementById('pages').textContent") == "3"
        driver.click("#next")
        _wait("page 2", lambda: driver.js(
            "return document.getElementById('page').textContent") == "2")
        assert driver.js("return [...document.querySelectorAll('#runs tbody tr')]"
                         ".map(tr => Number(tr.dataset.runId))") == list(range(11, 21))
        driver.get(f"{base}/?name=script")
        cells = driver.js("return [...document.querySelectorAll('#runs tbody tr')].map("
                          "tr => [tr.querySelector('.name').textContent, "
                          "tr.querySelector('[data-key=p999_ns]').textContent])")
        assert cells == [[shown[3]["name"], str(shown[3]["p999_ns"])]]
        assert driver.js("return document.querySelectorAll('#runs script').length") == 0

        # a run: every figure equals show --json; the chart is drawn
        for run_id in (1, 3):
            driver.get(f"{base}/runs/{run_id}")
            figures = dict(driver.js("return [...document.querySelectorAll('#figures "
                                     "td[data-key]')].map(td => [td.dataset.key, "
                                     "td.textContent])"))
            for key, text in figures.items():
                value = shown[run_id].get(key)     # a key the run lacks: "—"
                assert text == ("—" if value is None else str(value)), key
            assert driver.js("return document.getElementById('run-name').textContent") \
                == shown[run_id]["name"]
            _wait("charts", lambda: driver.js(
                "return document.querySelectorAll('.uplot canvas').length") == 2)

        # the run's histogram: its counts are show --hist --json's
        hist = call_cli(["show", "3", "--hist", "--json"], db).lines[0]
        driver.click("#histogram")
        _wait("the histogram", lambda: driver.js(
            "return document.querySelectorAll('.uplot canvas').length") == 1)
        assert driver.js("return [...document.querySelectorAll('#hist [data-key=count]')]"
                         ".map(td => Number(td.textContent))") == [
            b["count"] for b in hist["buckets"]]
        driver.get(f"{base}/runs/3")

        # the run's HTML report (irqlab report's page, its own CSP): its self-check ran
        driver.click("#report")
        checked = _wait("the report's self-check", lambda: driver.js(
            "const r = document.documentElement; return r.getAttribute('data-images-total')"
            " === null ? null : [r.getAttribute('data-images-total'), "
            "r.getAttribute('data-images-ok'), r.getAttribute('data-errors')]"), timeout=30)
        assert checked[0] == checked[1] != "0" and checked[2] == "[]", checked

        # compare: the figures and verdicts of compare --json
        driver.get(f"{base}/compare?runs=1,2,3")
        rows = driver.js("return [...document.querySelectorAll('#compare tbody tr')].map("
                         "tr => Object.fromEntries([...tr.querySelectorAll('[data-key]')]"
                         ".map(td => [td.dataset.key, td.textContent])))")
        for row, cli in zip(rows, [o for o in compared if o["type"] == "compare_run"]):
            assert row["p999_ns"] == str(cli["p999_ns"])
            assert row["p50_ratio"] == str(cli["p50_ratio"])
            assert row["verdict"] == ("baseline" if cli["baseline"]
                                      else cli["noise"]["verdict"])
        _wait("overlay", lambda: driver.js(
            "return document.querySelectorAll('.uplot canvas').length") == 1)

        # trends: the step at the series' 11th run
        driver.get(f"{base}/trends?series=tag:series%3Ds1&metric=p999_ns")
        assert driver.js("return document.getElementById('trend-changes').textContent") \
            == "1"
        assert driver.js("return document.querySelector('#changes tbody td').textContent"
                         ) == str(5 + 10)     # runs 1-4 of make_store, then step-10

        # live: the run started above, read while it writes
        live_id = _wait("the run in the store", lambda: _running_id(base), timeout=20)
        driver.get(f"{base}/runs/{live_id}/live")
        count = lambda: int(driver.js(
            "return document.getElementById('live-count').textContent"))
        first = _wait("a first window", count, timeout=10)
        t0 = time.monotonic()
        _wait("a new window", lambda: count() > first, timeout=20)
        # A window every WINDOW_S and a poll a second: seen within 2 windows + a poll.
        assert time.monotonic() - t0 <= 2 * WINDOW_S + 1.5
        assert driver.js("return document.getElementById('live-status').textContent") \
            == "running"
        # The running run's own page: no summary yet, every figure "—", windows drawn.
        driver.get(f"{base}/runs/{live_id}")
        assert driver.js("return document.getElementById('status').textContent") \
            == "running"
        assert driver.js("return document.querySelector('#figures td[data-key=p999_ns]')"
                         ".textContent") == "—"
        _wait("its windows chart", lambda: driver.js(
            "return document.querySelectorAll('.uplot canvas').length") >= 1)

        # No console error anywhere; no request to anything but the server.
        errors = [e for e in driver.logs("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        urls = [json.loads(e["message"])["message"]["params"]["request"]["url"]
                for e in driver.logs("performance")
                if '"Network.requestWillBeSent"' in e["message"]]
        # chrome:// is the browser's own first tab, data: the page's empty favicon:
        # neither is a request to any host.
        away = [u for u in urls if not u.startswith((base + "/", "data:", "chrome://"))]
        assert len(urls) > 20 and not away, away
    finally:
        if driver is not None:
            try:
                driver.quit()
            except Exception:
                pass
        for proc in reversed(procs):
            _stop(proc)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as r:
            return json.loads(r.read())["value"]["ready"]
    except OSError:
        return False


def _running_id(base: str) -> int | None:
    with urllib.request.urlopen(f"{base}/api/runs?status=running", timeout=10) as r:
        runs = json.loads(r.read())["runs"]
    return runs[0]["run_id"] if runs else None
