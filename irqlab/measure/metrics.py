"""``irqlab monitor --metrics ADDR:PORT``: the monitor's figures as Prometheus/OpenMetrics
text at ``/metrics``, served by the standard client library (prometheus_client).

The metrics are one snapshot of the windows stored so far, taken under a lock, so a
scrape never sees a histogram from one window and a counter from the next:

- ``irqlab_latency_seconds`` (histogram): every stored raw sample of this monitor
  process, in exponential buckets (BUCKETS_S);
- ``irqlab_window_max_latency_seconds`` (gauge): the last stored window's max (a
  histogram loses the max: its top bucket only bounds it);
- ``irqlab_samples_total``, ``irqlab_above_threshold_total`` (counters): the windows'
  sample and above-threshold counts (irqlab's own figures, as stored);
- ``irqlab_lost_total``, ``irqlab_overruns_total`` (counters): the source's lost
  records and the probe's skipped periods;
- ``irqlab_windows_total`` (counter): windows stored, and ``irqlab_threshold_seconds``;
- ``irqlab_spikes_total`` (counter): samples above ``--on-threshold``, and
  ``irqlab_spike_latency_seconds`` (gauge) of the last RECENT_SPIKES of them, labelled
  ``seq``, ``cpu`` and ``explain`` (the command explaining the flight recorder's window
  around it, empty without one): the link from a dashboard's alert to the cause.

Labels: target, host, configuration (the monitor's name). Counters start at 0 with each
monitor process; Prometheus' rate()/increase() take such resets in their stride.
A registry of its own: no process/GC/platform collectors of the default registry (their
names would clash with another client in the same process, and they say nothing here).
"""

from __future__ import annotations

import ipaddress
import math
from fractions import Fraction
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

# Bucket upper bounds: 1 us * 1.25^k up to the first above 1 s (63 finite buckets).
# Why 1.25: histogram_quantile() interpolates linearly inside the bucket that holds the
# rank (Prometheus docs, "histograms and summaries": the error is bounded by the bucket
# width), so a quantile is off by at most 25 % of its value; interrupt latencies span
# 1 us (idle bare metal) to milliseconds (a loaded VM), and Prometheus' default buckets
# begin at 5 ms. Factor 2 (the usual exponential choice) would allow 100 %, and 1.1 would
# need 145 series per label set for the same span: 64 series is the compromise.
BUCKET_FACTOR = 1.25
BUCKET_FIRST_S = 1e-6
# Each bound is 1 us x 1.25^k to 4 significant digits (1.25e-06, 1.563e-06, 1.953e-06):
# the float product printed le="1.2499999999999999e-06"; consecutive bounds still grow
# by 1.25 to within 0.05 %.
BUCKET_DIGITS = 4
BUCKETS_S: tuple[float, ...] = tuple(
    float(f"{float(Fraction(5, 4) ** k / 10**6):.{BUCKET_DIGITS}g}")
    for k in range(int(math.ceil(math.log(1.0 / BUCKET_FIRST_S) / math.log(BUCKET_FACTOR))) + 1))
# The same bounds in ns, for counting integer-ns latencies (le: value <= bound).
_BUCKETS_NS = np.array([b * 1e9 for b in BUCKETS_S])

# Spikes /metrics lists one by one (the newest): a bounded set of label values.
RECENT_SPIKES = 20
DEFAULT_PORT = 9464      # OpenTelemetry's Prometheus exporter port, as the issue names it


class MetricsAddressError(ValueError):
    """A bad --metrics value: one line, with the fix."""


def parse_address(text: str, allow_remote: bool) -> tuple[str, int]:
    """``ADDR:PORT`` (``[v6]:PORT``; ``:PORT`` is 127.0.0.1) -> (addr, port). Only a
    loopback address unless ``allow_remote``: the metrics name the host and its
    latencies, and the endpoint has no authentication."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise MetricsAddressError(f"--metrics {text!r} is not ADDR:PORT: write e.g. "
                                  f"--metrics 127.0.0.1:{DEFAULT_PORT}")
    host = host.strip("[]") or "127.0.0.1"
    if host == "localhost":
        host = "127.0.0.1"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise MetricsAddressError(f"--metrics {text!r}: {host!r} is not an IP address: "
                                  f"write e.g. --metrics 127.0.0.1:{port_text}") from None
    if not ip.is_loopback and not allow_remote:
        raise MetricsAddressError(f"--metrics {text}: {host} is not a loopback address and "
                                  f"the endpoint has no authentication: add "
                                  f"--metrics-allow-remote to serve it there")
    return host, int(port_text)


@dataclass
class Snapshot:
    """The figures served, as of the last stored window."""

    # Per CPU (the `cpu` label): bucket counts, and the sum of latencies in s.
    buckets: dict[int, np.ndarray] = field(default_factory=dict)
    sums_s: dict[int, float] = field(default_factory=dict)
    samples: int = 0
    above: int = 0
    lost: int = 0
    overruns: int = 0
    windows: int = 0
    window_max_s: float | None = None


class MonitorMetrics:
    """The collector (prometheus_client's custom-collector interface: ``collect()``
    yields metric families) and its HTTP server."""

    def __init__(self, labels: dict[str, str], threshold_ns: int) -> None:
        self.labels = labels
        self.threshold_ns = threshold_ns
        self._lock = threading.Lock()
        self._snap = Snapshot()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.registry: CollectorRegistry | None = None
        self._spikes: list[tuple[str, str, str, float]] = []   # seq, cpu, explain, s
        self._spikes_total = 0

    # -- fed by the monitor ------------------------------------------------------------
    def add_samples(self, latency_ns: np.ndarray, cpu: np.ndarray | None = None) -> None:
        """Stored samples' latencies (ns), and the CPU of each (None: all CPU 0), into
        each CPU's histogram."""
        if not len(latency_ns):
            return
        cpus = np.zeros(len(latency_ns), np.int64) if cpu is None else np.asarray(cpu)
        idx = np.searchsorted(_BUCKETS_NS, latency_ns, side="left")   # first bound >= v
        with self._lock:
            for c in np.unique(cpus):
                mine = cpus == c
                counts = np.bincount(idx[mine], minlength=len(BUCKETS_S) + 1)
                key = int(c)
                if key not in self._snap.buckets:
                    self._snap.buckets[key] = np.zeros(len(BUCKETS_S) + 1, np.int64)
                self._snap.buckets[key] += counts
                self._snap.sums_s[key] = (self._snap.sums_s.get(key, 0.0)
                                          + float(latency_ns[mine].sum()) / 1e9)

    def add_window(self, window: dict[str, Any], lost: int, overruns: int) -> None:
        """A stored window's counts and max; the source's lost and overrun totals."""
        with self._lock:
            s = self._snap
            s.samples += int(window.get("samples") or 0)
            s.above += int(window.get("above_threshold") or 0)
            s.windows += 1
            s.lost, s.overruns = max(s.lost, lost), max(s.overruns, overruns)
            if window.get("max_ns") is not None:
                s.window_max_s = int(window["max_ns"]) / 1e9

    def add_spike(self, spike: dict[str, int], explain: str) -> None:
        """A sample above --on-threshold; ``explain``: the command explaining its kept
        trace window ("" without a flight recorder)."""
        with self._lock:
            self._spikes_total += 1
            self._spikes.append((str(spike["seq"]), str(spike["cpu"]), explain,
                                 spike["latency_ns"] / 1e9))
            del self._spikes[:-RECENT_SPIKES]

    def snapshot(self) -> Snapshot:
        with self._lock:
            s = self._snap
            return Snapshot({c: b.copy() for c, b in s.buckets.items()}, dict(s.sums_s),
                            s.samples, s.above, s.lost, s.overruns, s.windows,
                            s.window_max_s)

    # -- prometheus_client's collector interface ---------------------------------------
    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                            HistogramMetricFamily)
        names, values = list(self.labels), list(self.labels.values())
        s = self.snapshot()
        h = HistogramMetricFamily("irqlab_latency_seconds",
                                  "timer-interrupt latency of the stored samples, per CPU",
                                  labels=names + ["cpu"], unit="seconds")
        for cpu in sorted(s.buckets):
            cumulative = np.cumsum(s.buckets[cpu])
            bounds = [(_le(b), int(c)) for b, c in zip(BUCKETS_S, cumulative[:-1])]
            bounds.append(("+Inf", int(cumulative[-1])))
            h.add_metric(values + [str(cpu)], bounds, s.sums_s[cpu])
        yield h
        g = GaugeMetricFamily("irqlab_window_max_latency_seconds",
                              "max latency of the last stored window", labels=names)
        if s.window_max_s is not None:
            g.add_metric(values, s.window_max_s)
        yield g
        t = GaugeMetricFamily("irqlab_threshold_seconds", "the latency threshold counted",
                              labels=names)
        t.add_metric(values, self.threshold_ns / 1e9)
        yield t
        for name, doc, val in (
                ("irqlab_samples", "samples in stored windows", s.samples),
                ("irqlab_above_threshold", "samples above the threshold", s.above),
                ("irqlab_lost", "records lost by the source", s.lost),
                ("irqlab_overruns", "periods the probe skipped", s.overruns),
                ("irqlab_windows", "windows stored", s.windows)):
            c = CounterMetricFamily(name, doc, labels=names)
            c.add_metric(values, val)
            yield c
        with self._lock:
            spikes, total = list(self._spikes), self._spikes_total
        c = CounterMetricFamily("irqlab_spikes", "samples above --on-threshold",
                                labels=names)
        c.add_metric(values, total)
        yield c
        g = GaugeMetricFamily("irqlab_spike_latency_seconds",
                              f"latency of the last {RECENT_SPIKES} samples above "
                              f"--on-threshold; explain: the command explaining its kept "
                              f"trace window", labels=[*names, "seq", "cpu", "explain"])
        for seq, cpu, explain, lat_s in spikes:
            g.add_metric([*values, seq, cpu, explain], lat_s)
        yield g

    # -- the server --------------------------------------------------------------------
    def serve(self, addr: str, port: int) -> int:
        """Serve /metrics on addr:port (0: a free port) from a daemon thread; returns
        the port. OSError (address in use ...) is the caller's to report."""
        from prometheus_client import CollectorRegistry, start_http_server

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._server, self._thread = start_http_server(port, addr=addr,
                                                       registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _le(bound_s: float) -> str:
    """A bucket bound as Prometheus writes floats (shortest repr round-trips)."""
    return repr(float(bound_s))
