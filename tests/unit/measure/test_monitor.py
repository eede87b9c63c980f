"""irqlab monitor (issue 33) with the fake target: retention in whole files, SIGTERM, the
series a restart continues, and /metrics against the store. Real store, real files,
real HTTP server; no QEMU."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
import urllib.request
from pathlib import Path

import jsonschema
import numpy as np
import pyarrow.parquet as pq
import pytest

from irqlab.measure import config_for_target
from irqlab.measure.metrics import BUCKETS_S, MonitorMetrics, parse_address
from irqlab.measure.monitor import MonitorConfig, run_monitor, series_runs
from irqlab.store import Store, sample_files
from irqlab.store.retention import latencies_tick, prune_run
from irqlab.targets import TARGETS
from tests.conftest import call_cli
from tests.unit.measure.fake_target import LATENCY_NS, SPIKE_NS, FakeTarget

PERIOD_NS = 1_000_000            # the fake probe: one sample a period, every 50th a spike
WINDOW_NS = 200_000_000
THRESHOLD_NS = 30_000            # between LATENCY_NS and SPIKE_NS


class Quiet:
    """An observer that sends this process SIGTERM ``stop_after_s`` after the run started
    (its StopFlag is in place by then: an earlier signal would end pytest)."""

    def __init__(self, stop_after_s: float) -> None:
        self.stop_after_s = stop_after_s
        self.timer: threading.Timer | None = None

    def on_started(self, info):
        self.timer = _sigterm_after(self.stop_after_s)

    def on_window(self, window, line):
        pass

    def on_progress(self, fraction, detail):
        pass

    def on_notice(self, text):
        pass


@pytest.fixture
def fake(monkeypatch):
    target = FakeTarget()
    monkeypatch.setitem(TARGETS, "fake", target)
    # A SIGTERM that lands after a monitor's StopFlag is gone must not end pytest.
    old = signal.signal(signal.SIGTERM, lambda *_: None)
    yield target
    signal.signal(signal.SIGTERM, old)
    target.close()


def _sigterm_after(seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    return timer


def _sigterm_once(folder: Path, timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if folder.is_dir() and any(folder.glob("*.parquet")):
            os.kill(os.getpid(), signal.SIGTERM)
            return
        time.sleep(0.05)


def _monitor(db: Path, seconds: float, keep_raw_s: float = 3600.0, name: str = "mon",
             threshold_ns: int = THRESHOLD_NS, metrics: MonitorMetrics | None = None):
    cfg = config_for_target("fake", {}, period_ns=PERIOD_NS, window_ns=WINDOW_NS,
                            threshold_ns=threshold_ns, name=name)
    observer = Quiet(seconds)
    try:
        with Store(db) as store:
            return run_monitor(MonitorConfig(cfg, keep_raw_s, metrics), store, observer)
    finally:
        if observer.timer is not None:
            observer.timer.cancel()


def _stored_latencies(store: Store, run_id: int) -> np.ndarray:
    parts = [latencies_tick(b) for b in store.iter_samples(run_id)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def test_sigterm_stops_cleanly_with_every_window_stored(fake, tmp_path):
    res = _monitor(tmp_path / "m.duckdb", 0.8)
    assert res.status == "interrupted" and "SIGTERM" in res.summary["message"]
    with Store(tmp_path / "m.duckdb") as store:
        row = store.resolve(str(res.run_id))
        windows = store.windows(res.run_id)
        assert row.status == "interrupted" and row.ended_at is not None
        assert len(windows) >= 3
        # Every measured sample is stored (keep-raw 1 h: nothing pruned), one file a window.
        assert sum(w["samples"] for w in windows) == res.summary["samples"] \
            == store.sample_count(res.run_id)
        assert len(store.sample_file_rows(res.run_id)) >= len(windows) - 1
        assert row.summary["percentiles_from"] == "exact"


@pytest.mark.slow
def test_retention_drops_old_files_keeps_spikes_and_windows(fake, tmp_path):
    """keep-raw 0.5 s, windows of 0.2 s, 1.6 s: the first windows' files go, their spikes stay
    in kept-* files; the windows and the counts add up."""
    db = tmp_path / "m.duckdb"
    res = _monitor(db, 1.6, keep_raw_s=0.5)
    with Store(db) as store:
        row = store.resolve(str(res.run_id))
        windows = store.windows(res.run_id)
        ret = row.metadata["retention"]
        files = store.sample_file_rows(res.run_id)
        lat = _stored_latencies(store, res.run_id)
        measured = sum(w["samples"] for w in windows)
        above = sum(w["above_threshold"] for w in windows)
        assert ret["dropped_files"] > 0 and ret["dropped_samples"] > 0
        assert len(lat) + ret["dropped_samples"] == measured
        # Every sample above the threshold is still stored, and only those were kept.
        assert int((lat > THRESHOLD_NS).sum()) == above > 0
        assert ret["kept_above_threshold"] == sum(
            n for _f, n, name in files if name.startswith(sample_files.KEPT_PREFIX))
        for _f, _n, name in files:
            if name.startswith(sample_files.KEPT_PREFIX):
                table = pq.read_table(sample_files.file_path(db, res.run_id, name))
                assert (latencies_tick(table) == SPIKE_NS).all()
        # No file on disk that no row names, and no row without its file.
        on_disk = {p.name for p in sample_files.run_dir(db, res.run_id).iterdir()}
        assert on_disk == {name for _f, _n, name in files}
        # The summary could not be exact any more: the histogram's, said so.
        assert row.summary["percentiles_from"] == "histogram"
        assert row.summary["samples"] == measured


def test_prune_is_whole_files_and_crash_safe(fake, tmp_path):
    """prune_run with a clock 2 h ahead drops every file; a failure inside the swap
    leaves the store as it was (the kept file unnamed, removed at the next open), and a
    crash after the commit leaves only unnamed old files, removed at the next open."""
    db = tmp_path / "m.duckdb"
    res = _monitor(db, 0.7)
    later = time.time() + 7200
    with Store(db) as store:
        before = store.sample_file_rows(res.run_id)
        n_before = store.sample_count(res.run_id)
        spikes = int((_stored_latencies(store, res.run_id) > THRESHOLD_NS).sum())
        real = store.transaction

        def failing():
            raise OSError("disk gone")
        store.transaction = failing                       # type: ignore[method-assign]
        with pytest.raises(OSError):
            prune_run(store, res.run_id, 3600, THRESHOLD_NS, now_s=later)
        store.transaction = real                          # type: ignore[method-assign]
        assert store.sample_file_rows(res.run_id) == before
        assert store.sample_count(res.run_id) == n_before
        # Crash after the commit, before the old files were unlinked: keep copies.
        saved = tmp_path / "saved"
        shutil.copytree(sample_files.run_dir(db, res.run_id), saved)
        # A budget of 1 sample: one file a call, the rest left for the next.
        first = prune_run(store, res.run_id, 3600, THRESHOLD_NS, now_s=later, max_samples=1)
        assert first.files == 1 and first.more
        done = prune_run(store, res.run_id, 3600, THRESHOLD_NS, now_s=later)
        assert not done.more
        done.add(first)
        assert done.files == len(before) and done.samples == n_before
        assert store.sample_count(res.run_id) == done.kept == spikes > 0
        assert (_stored_latencies(store, res.run_id) == SPIKE_NS).all()
    for f in saved.iterdir():
        shutil.copy(f, sample_files.run_dir(db, res.run_id) / f.name)
    with Store(db) as store:          # a writable open sweeps what no row names
        names = {name for _f, _n, name in store.sample_file_rows(res.run_id)}
        assert {p.name for p in sample_files.run_dir(db, res.run_id).iterdir()} == names
        assert names and all(n.startswith(sample_files.KEPT_PREFIX) for n in names)


@pytest.mark.slow
def test_a_restart_continues_the_series_and_prunes_its_old_runs(fake, tmp_path):
    db = tmp_path / "m.duckdb"
    first = _monitor(db, 0.6, keep_raw_s=60)
    # The first monitor's files made an hour old (its windows closed long ago).
    old = time.time() - 3600
    for p in sample_files.run_dir(db, first.run_id).iterdir():
        os.utime(p, (old, old))
    second = _monitor(db, 0.6, keep_raw_s=60)
    other = _monitor(db, 0.4, keep_raw_s=60, threshold_ns=40_000)   # another configuration
    with Store(db) as store:
        a, b, c = (store.resolve(str(r.run_id)) for r in (first, second, other))
        sid = a.tags["series"]
        assert b.tags["series"] == sid and c.tags["series"] != sid
        assert [r.run_id for r in series_runs(store, sid)] == [a.run_id, b.run_id]
        assert (a.metadata["series"]["index"], b.metadata["series"]["index"]) == (1, 2)
        assert a.name == b.name == "mon"
        # The second monitor pruned the first run (old files) but not its own.
        assert a.metadata["retention"]["dropped_files"] >= 1
        assert "retention" not in b.metadata
        lat = _stored_latencies(store, a.run_id)
        assert len(lat) and (lat == SPIKE_NS).all()
        assert store.sample_count(b.run_id) == b.summary["samples"]
    # series:ID selects both runs of the series.
    res = call_cli(["list", "--json"], db)
    assert sum(1 for x in res.lines if x.get("series") == sid) == 2


@pytest.mark.slow
def test_metrics_parse_and_equal_the_stored_counts(fake, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    db = tmp_path / "m.duckdb"
    metrics = MonitorMetrics({"target": "fake", "host": "h", "configuration": "mon"},
                             THRESHOLD_NS)
    port = metrics.serve("127.0.0.1", 0)
    try:
        res = _monitor(db, 0.8, metrics=metrics)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) \
            .read().decode()
    finally:
        metrics.close()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    values = {(s.name, s.labels.get("le")): s.value for f in fams.values() for s in f.samples}
    labels = fams["irqlab_latency_seconds"].samples[0].labels
    assert {labels[k] for k in ("target", "host", "configuration")} == {"fake", "h", "mon"}
    # One histogram per CPU (the fake target's samples are all on CPU 0), bounds at
    # their nominal values: le="1.25e-06", never "1.2499999999999999e-06" (issue 46).
    assert {s.labels["cpu"] for s in fams["irqlab_latency_seconds"].samples} == {"0"}
    assert 'le="1.25e-06",' in text and 'le="1.563e-06",' in text
    assert all(len(s.labels["le"].split("e")[0].replace(".", "").strip("0")) <= 4
               for s in fams["irqlab_latency_seconds"].samples if "le" in s.labels
               and s.labels["le"] != "+Inf")
    with Store(db) as store:
        windows = store.windows(res.run_id)
        lat = _stored_latencies(store, res.run_id)
    assert values[("irqlab_latency_seconds_count", None)] == len(lat) \
        == sum(w["samples"] for w in windows) == values[("irqlab_samples_total", None)]
    assert values[("irqlab_above_threshold_total", None)] == \
        sum(w["above_threshold"] for w in windows) == int((lat > THRESHOLD_NS).sum())
    assert values[("irqlab_windows_total", None)] == len(windows)
    assert values[("irqlab_window_max_latency_seconds", None)] == windows[-1]["max_ns"] / 1e9
    assert values[("irqlab_latency_seconds_sum", None)] == pytest.approx(lat.sum() / 1e9)
    # Each bucket holds the stored samples at or below its bound (tick = 1 ns here).
    for bound in BUCKETS_S:
        le = repr(float(bound))
        assert values[("irqlab_latency_seconds_bucket", le)] == \
            int((lat <= bound * 1e9).sum()), le
    assert values[("irqlab_latency_seconds_bucket", "+Inf")] == len(lat)
    assert {LATENCY_NS, SPIKE_NS} == set(np.unique(lat).tolist())


def test_buckets_reach_from_1us_past_1s_by_1_25():
    assert BUCKETS_S[0] == 1e-6 and 1.0 <= BUCKETS_S[-1] < 1.25 * 1.0 + 1e-9
    ratios = np.array(BUCKETS_S[1:]) / np.array(BUCKETS_S[:-1])
    # 4 significant digits per bound: each step 1.25 to within 0.05 %.
    assert np.allclose(ratios, 1.25, rtol=1e-3)


@pytest.mark.parametrize("text, allow, ok", [
    ("127.0.0.1:9464", False, ("127.0.0.1", 9464)), (":9464", False, ("127.0.0.1", 9464)),
    ("localhost:1", False, ("127.0.0.1", 1)), ("[::1]:9464", False, ("::1", 9464)),
    ("0.0.0.0:9464", False, None), ("0.0.0.0:9464", True, ("0.0.0.0", 9464)),
    ("127.0.0.1", False, None), ("example.org:80", False, None),
    ("127.0.0.1:70000", False, None)])
def test_metrics_address_is_loopback_unless_allowed(text, allow, ok):
    if ok is None:
        with pytest.raises(ValueError):
            parse_address(text, allow)
    else:
        assert parse_address(text, allow) == ok


@pytest.mark.parametrize("args, says", [
    (["--metrics", "0.0.0.0:9464"], "--metrics-allow-remote"),
    (["--keep-raw", "0s"], "--keep-raw must be more than 0"),
    (["--keep-raw", "soon"], "is not a duration"),
    (["--target", "fake,native"], "one target"),
])
def test_bad_input_is_one_line_and_exit_2(fake, tmp_path, args, says):
    res = call_cli(["monitor", "--target", "fake", *args], tmp_path / "m.duckdb")
    assert res.code == 2, res.stderr
    err = res.stderr.strip()
    assert says in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_cli_sigterm_is_a_clean_exit_0(fake, tmp_path):
    db = tmp_path / "m.duckdb"
    # SIGTERM once the first window's file exists: the run (and its StopFlag) is on.
    first_file = sample_files.run_dir(db, 1)
    stopper = threading.Thread(target=_sigterm_once, args=(first_file,), daemon=True)
    stopper.start()
    res = call_cli(["monitor", "--target", "fake", "--window", "200ms", "--json",
                    "--keep-raw", "30m"], db)
    stopper.join(10)
    assert res.code == 0, res.stderr
    assert res.summary["status"] == "interrupted" and res.summary["name"] == "monitor-fake"
    # Its JSON lines are run's own kinds, each valid against its schema (docs/schema/).
    schemas = Path(__file__).resolve().parents[3] / "docs" / "schema"
    kinds = set()
    for line in res.lines:
        kinds.add(line["type"])
        schema = json.loads((schemas / f"{line['type']}.schema.json").read_text())
        jsonschema.validate(line, schema)
    assert {"window", "summary"} <= kinds


def test_a_metrics_port_in_use_is_one_line_and_exit_2(fake, tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = call_cli(["monitor", "--target", "fake", "--metrics", f"127.0.0.1:{port}"],
                       tmp_path / "m.duckdb")
    assert res.code == 2
    err = res.stderr.strip()
    assert f"127.0.0.1:{port}" in err and "pick another port" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "m.duckdb").exists()


@pytest.mark.slow
def test_kept_files_are_merged_beyond_the_limit(fake, tmp_path, monkeypatch):
    """One file pruned a call (budget 1) makes a kept file a call; past KEPT_FILES_MAX
    (2 here) they are merged, in order, with every spike still stored once."""
    from irqlab.store import retention

    monkeypatch.setattr(retention, "KEPT_FILES_MAX", 2)
    db = tmp_path / "m.duckdb"
    res = _monitor(db, 1.2)
    later = time.time() + 7200
    with Store(db) as store:
        lat = _stored_latencies(store, res.run_id)
        seq_before = [int(x) for b in store.iter_samples(res.run_id)
                      for x in b.column("seq").to_pylist()]
        while prune_run(store, res.run_id, 3600, THRESHOLD_NS, now_s=later,
                        max_samples=1).files:
            kept = [name for _f, _n, name in store.sample_file_rows(res.run_id)
                    if name.startswith(sample_files.KEPT_PREFIX)]
            assert len(kept) <= 2
        after = _stored_latencies(store, res.run_id)
        seq_after = [int(x) for b in store.iter_samples(res.run_id)
                     for x in b.column("seq").to_pylist()]
    assert len(after) == int((lat > THRESHOLD_NS).sum()) and (after == SPIKE_NS).all()
    assert seq_after == [s for s, v in zip(seq_before, lat) if v > THRESHOLD_NS]


@pytest.mark.slow
def test_metrics_list_the_spikes_above_on_threshold(fake, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    db = tmp_path / "s.duckdb"
    metrics = MonitorMetrics({"target": "fake", "host": "h", "configuration": "spk"},
                             THRESHOLD_NS)
    port = metrics.serve("127.0.0.1", 0)
    cfg = config_for_target("fake", {}, period_ns=PERIOD_NS, window_ns=WINDOW_NS,
                            threshold_ns=THRESHOLD_NS, name="spk",
                            on_threshold_ns=SPIKE_NS - 1)
    observer = Quiet(0.8)
    try:
        with Store(db) as store:
            res = run_monitor(MonitorConfig(cfg, 3600.0, metrics), store, observer)
            told = store.resolve(str(res.run_id)).metadata["on_threshold"]["spikes"]
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) \
            .read().decode()
    finally:
        metrics.close()
        if observer.timer is not None:
            observer.timer.cancel()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert told >= 1
    assert fams["irqlab_spikes"].samples[0].value == told
    spikes = fams["irqlab_spike_latency_seconds"].samples
    assert 1 <= len(spikes) <= min(told, 20)
    assert {s.value for s in spikes} == {SPIKE_NS / 1e9}
    # Without a flight recorder there is no kept window to explain.
    assert {s.labels["explain"] for s in spikes} == {""}
    assert all(int(s.labels["seq"]) % 50 == 49 for s in spikes)
