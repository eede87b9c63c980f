"""``irqlab monitor``: one target measured without end, window after window, as a service.

A monitor is an ordinary run of the run flow (irqlab.measure.run.Run: record, boot,
stream, stop, finish) with no duration: it ends at SIGTERM/SIGINT (status
``interrupted``, everything stored), a failure, or the watchdog. What it adds:

- its samples always go to sample files, one per window (store/sample_files.py), so
  retention can drop them in whole files (store/retention.py);
- a retention pass, at most every max(window, keep_raw / 8), drops the raw samples older
  than ``keep_raw_s`` of every run of its series, keeping those above the threshold;
  raw storage is then bounded by about 9/8 of keep_raw's samples plus the spikes;
- a series: monitors of one name and configuration on one store are runs of one series
  (tag and metadata ``series``, as ``irqlab run --repeat`` makes them), so a restart
  (systemd, a reboot) continues it instead of starting over;
- optionally Prometheus metrics (irqlab.measure.metrics), updated after each window
  from the samples just stored.

Memory stays bounded: the run flow's statistics are constant-memory; the windows the run
returns keep only the last RECENT_WINDOWS.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from pyarrow import ArrowException

from irqlab.measure.config import Observer, RunConfig, RunResult
from irqlab.measure.metrics import MonitorMetrics
from irqlab.measure.run import Run
from irqlab.stats import RunSummary
from irqlab.store import Store, StoreError, StoreWriteError
from irqlab.store import retention, sample_files

SERIES_TAG = "series"          # the tag and metadata key of a series (irqlab.suite)
RECENT_WINDOWS = 100           # windows a monitor's result keeps in memory
# Raw samples a retention pass reads after one window at most (~0.1 s of Parquet decoding
# and filtering here): the ring fills meanwhile, so a big backlog is pruned over windows.
PASS_SAMPLES = 1_000_000
_ID_STEM_CHARS = 40
# Parameters that do not make another configuration: how long, what it is called,
# when to give up booting, and tags.
_NOT_CONFIGURATION = ("name", "duration_ns", "samples", "boot_timeout_s",
                      "stall_timeout_s", "tags", "suite", "cell")


@dataclass
class MonitorConfig:
    """What ``irqlab monitor`` is asked to do beyond the run itself."""

    run: RunConfig
    keep_raw_s: float = 86_400.0
    metrics: MonitorMetrics | None = None
    metrics_address: str | None = None     # where /metrics is served, for the metadata


def configuration_digest(cfg: RunConfig) -> str:
    """A digest of what the monitor measures (target, its options, period, window,
    threshold, warm-up, hooks by name): two monitors with the same one continue one
    series."""
    params = {k: v for k, v in cfg.params().items() if k not in _NOT_CONFIGURATION}
    params["hooks"] = sorted(getattr(h, "name", type(h).__name__) for h in cfg.hooks)
    text = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def series_id(name: str, digest: str) -> str:
    """The series of a monitor: its name made safe ([A-Za-z0-9._-], as irqlab.suite's
    ids) and 6 hex digits of its configuration's digest, the same on every restart."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:_ID_STEM_CHARS]
    return f"{stem or 'monitor'}-{digest[:6]}"


def series_runs(store: Store, sid: str) -> list[Any]:
    """The stored runs of a series, oldest first."""
    return sorted((r for r in store.runs() if r.tags.get(SERIES_TAG) == sid),
                  key=lambda r: r.run_id)


class _RecentWindows(list):
    """The run's window list, holding the last RECENT_WINDOWS (a monitor's windows are
    in the store; a list of all of them would grow without end)."""

    def append(self, item: Any) -> None:
        super().append(item)
        if len(self) > RECENT_WINDOWS:
            del self[0]


class MonitorRun(Run):
    """The run flow's Run, with files for samples and the monitor told of each window."""

    def __init__(self, mcfg: MonitorConfig, store: Store, observer: Observer) -> None:
        self.mcfg = mcfg
        self.monitor = _Monitor(mcfg, store, self)
        super().__init__(mcfg.run, store, _MonitorObserver(observer, self.monitor))
        self.windows = _RecentWindows()
        if mcfg.metrics is not None:
            self.spike_listeners.append(self.monitor)   # /metrics lists the spikes

    def record(self) -> None:
        super().record()
        # One file per window, whatever the rate: retention drops whole files.
        self.store.keep_samples_in_files(self.run_id)

    def exact_percentiles(self, summary: dict[str, Any], run_summary: RunSummary | None
                          ) -> None:
        """Exact percentiles need every raw sample: once retention dropped some of this
        run's, the live histogram's estimate stays (``percentiles_from: histogram``)."""
        if self.monitor.pruned_runs.get(self.run_id) is not None:
            return
        super().exact_percentiles(summary, run_summary)

    def finish(self) -> RunResult:
        self.monitor.final_metadata()
        return super().finish()


class _MonitorObserver:
    """The front end's observer, with the monitor told of each stored window."""

    def __init__(self, inner: Observer, monitor: _Monitor) -> None:
        self.inner, self.monitor = inner, monitor

    def on_started(self, info: dict[str, Any]) -> None:
        self.monitor.started()
        self.inner.on_started(info)

    def on_window(self, window: dict[str, Any], line: str) -> None:
        self.inner.on_window(window, line)
        self.monitor.window_stored(window)

    def on_progress(self, fraction: float, detail: str) -> None:
        self.inner.on_progress(fraction, detail)

    def on_notice(self, text: str) -> None:
        self.inner.on_notice(text)


class _Monitor:
    """Retention and metrics, after each stored window; the spikes into the metrics."""

    keeps_trace = False        # irqlab.runconfig.SpikeListener: it only counts them

    def __init__(self, mcfg: MonitorConfig, store: Store, run: MonitorRun) -> None:
        self.mcfg, self.store, self.run = mcfg, store, run
        self.pruned_runs: dict[int, retention.Pruned] = {}
        self.total = retention.Pruned()
        self.passes = 0
        self.threshold_tick = 0
        self._next_pass = 0.0
        self._counted: set[str] = set()      # this run's files already in the metrics

    @property
    def pass_every_s(self) -> float:
        return max(self.mcfg.run.window_ns / 1e9, self.mcfg.keep_raw_s / 8)

    def started(self) -> None:
        hdr = self.run.hdr
        assert hdr is not None
        self.threshold_tick = self.mcfg.run.threshold_ns * hdr.tick_hz // 1_000_000_000
        self._next_pass = time.monotonic()          # a restart prunes its series at once

    def window_stored(self, window: dict[str, Any]) -> None:
        if self.mcfg.metrics is not None:
            self._update_metrics(window)
        if time.monotonic() >= self._next_pass:
            # Half a window early: windows close on the probe's clock, a hair before or
            # after the host's, and a pass due every window must not skip every other.
            self._next_pass = (time.monotonic() + self.pass_every_s
                               - self.mcfg.run.window_ns / 2e9)
            self.prune()

    # -- metrics -------------------------------------------------------------------------
    def on_spike(self, spike: dict[str, Any]) -> None:
        assert self.mcfg.metrics is not None
        self.mcfg.metrics.add_spike(spike, spike["explain"])

    def _update_metrics(self, window: dict[str, Any]) -> None:
        """The samples of the files stored since the last window into the histogram,
        then the window's counts: the histogram holds exactly what is stored."""
        import pyarrow.parquet as pq

        metrics, run_id, hdr = self.mcfg.metrics, self.run.run_id, self.run.hdr
        assert metrics is not None and hdr is not None
        listed = {name for _f, _n, name in self.store.sample_file_rows(run_id)}
        for name in sorted(listed - self._counted):
            if name.startswith(sample_files.KEPT_PREFIX):
                continue
            table = pq.read_table(sample_files.file_path(self.store.path, run_id, name),
                                  columns=["deadline_tick", "entry_tick", "cpu"])
            lat = retention.latencies_tick(table)
            metrics.add_samples(lat * 1_000_000_000 // hdr.tick_hz,
                                table.column("cpu").to_numpy())
        self._counted = listed                    # dropped names leave the set
        source = self.run.source
        lost = overruns = 0
        if source is not None:
            lost = int(source.lost)
            try:
                overruns = int(source.header().overruns)
            except Exception:  # noqa: BLE001 - a ring gone mid-read: keep the last count
                overruns = 0
        metrics.add_window(window, lost, overruns)

    # -- retention -----------------------------------------------------------------------
    def prune(self) -> None:
        """One retention pass over every run of the series (this one included), of at
        most PASS_SAMPLES samples read: the ring is not polled meanwhile, so a pass
        with more to do goes on after the next window instead of stalling the run."""
        sid = self.mcfg.run.tags.get(SERIES_TAG)
        runs = series_runs(self.store, sid) if sid else []
        budget = PASS_SAMPLES
        for row in runs:
            if row.run_id == self.run.run_id:
                threshold_tick = self.threshold_tick
            elif row.tick_hz and row.threshold_ns is not None:
                threshold_tick = row.threshold_ns * row.tick_hz // 1_000_000_000
            else:
                continue         # never started: no samples
            if budget <= 0:
                self._next_pass = 0.0        # the rest after the next window
                break
            try:
                done = retention.prune_run(self.store, row.run_id, self.mcfg.keep_raw_s,
                                           threshold_tick, max_samples=budget)
            except StoreWriteError:
                raise                        # the disk: the run fails as on any write
            except (OSError, StoreError, ArrowException) as exc:
                # A damaged or vanished file must not end a monitor: say it, go on.
                self.run.observer.on_notice(f"retention skipped run {row.run_id} this "
                                            f"pass: {exc}")
                continue
            budget -= done.samples
            if done.more:
                self._next_pass = 0.0
            if not done.files:
                continue
            self.total.add(done)
            run_total = self.pruned_runs.setdefault(row.run_id, retention.Pruned())
            run_total.add(done)
            self._note_pruned(row, done)
        self.passes += 1

    def _note_pruned(self, row: Any, done: retention.Pruned) -> None:
        """The pruned run's metadata says so at once (a run killed later keeps it):
        ``retention`` with what went, added up over passes."""
        if row.run_id == self.run.run_id:
            meta = self.run.meta
        else:
            meta = dict(row.metadata)
        old = meta.get("retention") or {}
        meta["retention"] = {
            "keep_raw_s": self.mcfg.keep_raw_s,
            "threshold_ns": row.threshold_ns if row.run_id != self.run.run_id
            else self.mcfg.run.threshold_ns,
            **{k: int(old.get(k, 0)) + v for k, v in done.as_dict().items()}}
        self.store.update_run(row.run_id, metadata=meta)

    def final_metadata(self) -> None:
        """What this monitor process did, in its run's metadata ``monitor``."""
        self.run.meta.setdefault("monitor", {}).update(
            {"retention_passes": self.passes, "pruned_in_series": self.total.as_dict()})


def run_monitor(mcfg: MonitorConfig, store: Store, observer: Observer) -> RunResult:
    """Measure until stopped, as the next run of the monitor's series."""
    cfg = mcfg.run
    cfg.duration_ns = cfg.samples = None          # no end but a signal or a failure
    digest = configuration_digest(cfg)
    sid = series_id(cfg.name or cfg.target, digest)
    index = len(series_runs(store, sid)) + 1
    cfg.tags = {**cfg.tags, SERIES_TAG: sid}
    # count: the series' runs so far (a monitor's series is open-ended).
    cfg.metadata = {**cfg.metadata,
                    SERIES_TAG: {"id": sid, "index": index, "count": index},
                    "monitor": {"series": sid, "config_digest": digest,
                                "keep_raw_s": mcfg.keep_raw_s,
                                "retention_every_s": max(cfg.window_ns / 1e9,
                                                         mcfg.keep_raw_s / 8),
                                "metrics": mcfg.metrics_address}}
    return MonitorRun(mcfg, store, observer).execute()
