"""A real Prometheus (Debian's /usr/bin/prometheus, on 127.0.0.1 in a temp dir) scrapes a
real `irqlab monitor` of the native probe (issue 33): its histogram_quantile(0.99) agrees
with irqlab's exact p99 of the same stored samples within the bucket resolution, and
its max gauge equals the stored window's max. ~25 s; Prometheus is stopped also on
failure. No QEMU (no TCG lock)."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from irqlab.measure.metrics import BUCKET_FACTOR
from irqlab.store import Store
from irqlab.store.retention import latencies_tick

PROMETHEUS = Path("/usr/bin/prometheus")
# Windows of 2 s Prometheus has seen before it is asked (IRQLAB_PROM_WINDOWS=90: the
# issue's 3-minute figure, run by hand, not in the suite).
WINDOWS_WANTED = int(os.environ.get("IRQLAB_PROM_WINDOWS", "8"))

XDIST_GROUP = "host"          # no guest: a native probe (tests/conftest.py)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not PROMETHEUS.exists(),
                                 reason="no /usr/bin/prometheus (Debian package "
                                        "prometheus; setup.sh installs it)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5) -> bytes:
    return urllib.request.urlopen(url, timeout=timeout).read()


def _query(port: int, expr: str, at: float | None = None) -> list[dict]:
    params = {"query": expr}
    if at is not None:
        params["time"] = repr(at)
    body = json.loads(_get(f"http://127.0.0.1:{port}/api/v1/query?"
                           + urllib.parse.urlencode(params)))
    assert body["status"] == "success", body
    return body["data"]["result"]


def _one(port: int, expr: str, at: float) -> float:
    (res,) = _query(port, expr, at)
    return float(res["value"][1])


def _wait(cond, timeout_s: float, what: str, proc: subprocess.Popen | None = None):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what}: the process ended ({proc.returncode}): "
                        f"{proc.stderr.read()[-2000:] if proc.stderr else ''}")
        try:
            got = cond()
            if got:
                return got
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


GRAFANA = Path(__file__).parents[2] / "contrib" / "grafana-irqlab.json"
# Grafana's variables as a dashboard over every host, target and configuration fills
# them: regex "all", and rate windows of several 1 s scrapes.
_GRAFANA_VARS = {"$host": ".*", "$target": ".*", "$configuration": ".*",
                 "$__rate_interval": "8s", "$__interval": "4s"}


def grafana_queries() -> list[str]:
    """Every PromQL expression of the dashboard, its variables filled."""
    board = json.loads(GRAFANA.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])
             if t.get("expr")]
    # label_values(METRIC, LABEL) variables: METRIC must have series.
    exprs += [v["query"]["query"].split("(", 1)[1].split(",")[0]
              for v in board.get("templating", {}).get("list", [])
              if isinstance(v.get("query"), dict) and "label_values" in v["query"]["query"]]
    assert len(exprs) >= 8
    for name, value in _GRAFANA_VARS.items():
        exprs = [e.replace(name, value) for e in exprs]
    return exprs


def test_grafana_queries_are_filled_and_valid():
    assert all("$" not in e for e in grafana_queries())


def test_prometheus_quantile_and_max_agree_with_irqlab(tmp_path):
    db = tmp_path / "m.duckdb"
    mport, pport = _free_port(), _free_port()
    irqlab = [sys.executable, "-m", "irqlab.cli.main", "monitor", "--target", "native",
              "--rt-fallback", "--cpus", "1", "--period", "500us", "--window", "2s",
              "--keep-raw", "1h", "--metrics", f"127.0.0.1:{mport}", "--quiet", "--json",
              "--db", str(db)]
    config = tmp_path / "prometheus.yml"
    config.write_text(f"global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      f"scrape_configs:\n  - job_name: irqlab\n    static_configs:\n"
                      f"      - targets: ['127.0.0.1:{mport}']\n")
    mon = subprocess.Popen(irqlab, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    prom = None
    try:
        prom = subprocess.Popen([str(PROMETHEUS), f"--config.file={config}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{pport}",
                                 "--log.level=warn"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait(lambda: _get(f"http://127.0.0.1:{pport}/-/ready"), 30, "prometheus ready",
              prom)
        _wait(lambda: [r for r in _query(pport, "irqlab_windows_total")
                       if float(r["value"][1]) >= WINDOWS_WANTED], 30 + 3 * WINDOWS_WANTED,
              f"{WINDOWS_WANTED} windows scraped", mon)
        # One scrape: every series of it has the same timestamp; ask all at that time.
        at = _one(pport, "timestamp(irqlab_windows_total)", time.time())
        windows_seen = int(_one(pport, "irqlab_windows_total", at))
        count = int(_one(pport, "irqlab_latency_seconds_count", at))
        p99 = _one(pport, "histogram_quantile(0.99, irqlab_latency_seconds_bucket)", at)
        max_s = _one(pport, "irqlab_window_max_latency_seconds", at)
        (labels,) = [r["metric"] for r in _query(pport, "irqlab_samples_total", at)]
        cpus = {r["metric"]["cpu"] for r in _query(pport, "irqlab_latency_seconds_count", at)}
        # contrib/grafana-irqlab.json: every panel's query, its variables as Grafana
        # fills them (all values; intervals of a few scrapes), returns data here.
        empty = [expr for expr in grafana_queries()
                 if not _query(pport, expr, at)]
    finally:
        mon.send_signal(signal.SIGTERM)
        try:
            mon_out, mon_err = mon.communicate(timeout=60)
        finally:
            if prom is not None:
                prom.terminate()
                try:
                    prom.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    prom.kill()
                    prom.wait()
    assert mon.returncode == 0, mon_err[-2000:]
    assert labels["target"] == "native" and labels["configuration"] == "monitor-native"
    assert cpus == {"1"}                         # --cpus 1: one histogram, labelled
    assert not empty, empty
    with Store(db) as store:
        (run,) = store.runs()
        windows = store.windows(run.run_id)[:windows_seen]
        assert sum(w["samples"] for w in windows) == count
        lat = np.concatenate([latencies_tick(b) for b in store.iter_samples(run.run_id)])
        tick_hz = run.tick_hz
    ns = np.sort(lat[:count] * 1_000_000_000 // tick_hz)
    exact_p99_s = ns[math.ceil(0.99 * count) - 1] / 1e9          # nearest rank
    # histogram_quantile interpolates inside the bucket holding the rank: within one
    # bucket's width (factor 1.25) of the exact value.
    assert 1 / BUCKET_FACTOR <= p99 / exact_p99_s <= BUCKET_FACTOR, (p99, exact_p99_s)
    assert max_s * 1e9 == pytest.approx(windows[-1]["max_ns"], abs=0.5)
    print(f"prometheus p99 {p99 * 1e6:.2f} us, irqlab exact p99 {exact_p99_s * 1e6:.2f} "
          f"us over {count} samples / {windows_seen} windows; max gauge "
          f"{max_s * 1e6:.2f} us == window max {windows[-1]['max_ns'] / 1e3:.2f} us")
