"""The real headless Chromium (Debian's chromium + chromium-driver) over the W3C WebDriver
protocol (plain HTTP to chromedriver: no client library), for the dashboard's browser
test and its screenshots (scripts/serve-screenshots.py). Chromedriver and the Chromium it
starts are one process group, always stopped together."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriver:
    """The few W3C WebDriver commands the tests need, plus chromedriver's log endpoint."""

    def __init__(self, port: int, profile: Path, width: int = 1280,
                 height: int = 900) -> None:
        self.base = f"http://127.0.0.1:{port}"
        caps = {"browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": str(CHROMIUM),
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                             "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                             "--no-first-run", "--disable-background-networking",
                             "--disable-component-update", "--disable-sync",
                             "--hide-scrollbars", f"--window-size={width},{height}"],
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

    def screenshot(self) -> bytes:
        """The viewport as PNG bytes."""
        return base64.b64decode(self.cmd("GET", "/screenshot"))

    def set_size(self, width: int, height: int) -> None:
        self.cmd("POST", "/window/rect", {"width": width, "height": height})

    def quit(self) -> None:
        self.cmd("DELETE", "")


def wait(what: str, check: Callable[[], Any], timeout: float = 10.0,
         every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def stop(proc: subprocess.Popen) -> None:
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


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as r:
            return json.loads(r.read())["value"]["ready"]
    except OSError:
        return False


@contextlib.contextmanager
def chromium(profile: Path, width: int = 1280, height: int = 900) -> Iterator[WebDriver]:
    """A headless Chromium session; chromedriver and Chromium stopped at the end."""
    port = free_port()
    # Its own session: chromedriver and the Chromium it starts are one process group.
    proc = subprocess.Popen([str(CHROMEDRIVER), f"--port={port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    driver = None
    try:
        wait("chromedriver", lambda: ready(port))
        driver = WebDriver(port, profile, width, height)
        yield driver
    finally:
        if driver is not None:
            with contextlib.suppress(Exception):
                driver.quit()
        stop(proc)


def start_server(db: Path) -> tuple[subprocess.Popen, str]:
    """`irqlab serve` on a free loopback port: the process and its base URL."""
    import sys

    server = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "serve", "--db",
                               str(db), "--bind", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline().strip()
    if not line.startswith("irqlab serve: http://127.0.0.1:"):
        stop(server)
        raise AssertionError(f"irqlab serve said {line!r}")
    return server, line.split(": ", 1)[1].rstrip("/")
