"""``irqlab bench``: performance figures (printed, never asserted by tests).

- ingest: samples/s through ring -> stats -> store, with a synthetic writer in the same
  process standing in for the probe (goal >= 20 M/s, issue 19).
- stats: our streaming statistics against a plain numpy sort-based computation of the same
  statistics on the same data in the same process (goal: ratio > 1).
- rate: the shortest probe period a TCG guest sustains with zero lost samples here.
- noise: compare's noise verdict calibrated on real runs (irqlab/bench_noise.py): A/A
  false `different`, `same`, detection of a 30 % shift, with 95 % Wilson intervals.
- startup: wall time of `irqlab --version`, `--help`, `list`, `show` and `completion`
  against `python -c 'import duckdb'` in the same rounds (irqlab/bench_startup.py).
- serve: `irqlab serve`'s runs page over 100,000 runs (first page ms, peak RSS) against
  `irqlab list --json` on the same store (irqlab/serve/bench.py).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from irqlab.samples.ring import RingReader
from irqlab.samples.synthetic import SyntheticRing
from irqlab.stats import RunStats
from irqlab.stats.bench import bench_stats


def bench_ingest(total: int = 20_000_000, batch: int = 1_000_000) -> list[dict[str, Any]]:
    """End-to-end host ingest rate with a lossless reader keeping up: into sample files
    (how a run at this rate keeps its samples, measure.run), and into the samples table
    (how it did before schema v4) as the baseline, in the same process."""
    files_s = _ingest_seconds(total, batch, files=True)
    table_s = _ingest_seconds(total, batch, files=False)
    return [{"name": "ingest", "value": total / files_s, "unit": "samples/s",
             "samples": total, "goal": 20_000_000,       # issue 19: ring -> stats -> store
             "baseline": total / table_s,
             "baseline_name": "the same flow into the DuckDB samples table",
             "ratio": table_s / files_s}]


def _ingest_seconds(total: int, batch: int, files: bool) -> float:
    """Seconds spent reading, computing statistics and storing `total` samples (the
    synthetic writer's time excluded)."""
    from irqlab.store import Store   # DuckDB: only when a bench runs, not for the parser

    ring = SyntheticRing(capacity=1 << 21)
    reader = RingReader(ring.path)
    rng = np.random.default_rng(1)
    stats = RunStats(tick_hz=1_000_000_000, threshold_tick=30_000,
                     window_tick=10_000_000_000, warmup_windows=1)
    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "bench.duckdb") as store:
            rid = store.create_run("bench-ingest", "synthetic", {}, {})
            if files:
                store.keep_samples_in_files(rid)
            written = 0
            work_s = 0.0
            while written < total:
                n = min(batch, total - written)
                deadline = (np.arange(written, written + n, dtype=np.uint64) * 1_000_000)
                latency = rng.lognormal(9.5, 0.3, n).astype(np.uint64)
                ring.write(deadline, deadline + latency)
                written += n
                t0 = time.perf_counter()
                got = reader.poll()
                stats.add(got.deadline_tick, got.latency_tick)
                store.add_samples(rid, got.records)
                work_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            _, summary = stats.finish()
            store.finish_run(rid, "ok", None)    # as the run flow: its last files land
            work_s += time.perf_counter() - t0
            stored = store.sample_count(rid)
    reader.close()
    ring.close()
    if reader.lost or stored != total or summary.samples != total:
        raise RuntimeError(f"ingest bench lost data: lost={reader.lost} stored={stored}")
    return work_s


def bench_stats_figures(n: int) -> list[dict[str, Any]]:
    r = bench_stats(n=n, chunk=min(n, 10_000_000))
    # ratio = ours / baseline in samples/s: above 1 means we are faster. The baseline is
    # numpy's warm (second) run; its cold first run, paying for fresh memory, is kept too.
    return [{"name": "stats", "value": n / r["ours_s"], "unit": "samples/s", "samples": n,
             "seconds": r["ours_s"], "baseline": n / r["numpy_s"],
             "baseline_name": "numpy concatenate+sort (warm)",
             "baseline_cold": n / r["numpy_first_s"],
             "ratio": r["numpy_s"] / r["ours_s"], "goal_ratio": 5.0,
             "native": r["native"],
             # Our own numpy path (windows included), which the C fast path replaces.
             "reference": None if r["reference_s"] is None else n / r["reference_s"],
             "reference_name": "irqlab numpy path (IRQLAB_NATIVE=0)"}]


def bench_rate(periods_ns: tuple[int, ...] = (1_000_000, 500_000, 200_000, 100_000, 50_000,
                                           20_000, 10_000),
               duration_ns: int = 3_000_000_000,
               max_overrun_fraction: float = 0.01) -> list[dict[str, Any]]:
    """Shortest period a TCG guest sustains: no lost sample and at most 1 % of periods
    overrun (the guest re-armed too late), each step a real 3 s run, longest first."""
    from irqlab.measure import config_for_target, run
    from irqlab.store import Store

    class _Quiet:
        def on_started(self, info): ...
        def on_window(self, window, line): ...
        def on_progress(self, fraction, detail): ...
        def on_notice(self, text): ...

    best = None
    steps = []
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "rate.duckdb") as store:
        for period in periods_ns:
            cfg = config_for_target("guest", {"accel": "tcg"}, period_ns=period,
                                       duration_ns=duration_ns, window_ns=duration_ns,
                                       name=f"rate-{period}")
            res = run(cfg, store, _Quiet())
            s = res.summary
            periods = s["samples"] + s["overruns"]
            overrun_fraction = s["overruns"] / periods if periods else 1.0
            steps.append({"period_ns": period, "status": res.status, "samples": s["samples"],
                          "lost": s["lost"], "overruns": s["overruns"],
                          "delivered_per_s": s["samples"] * 1e9 / duration_ns})
            if res.status != "ok" or s["lost"] or overrun_fraction > max_overrun_fraction:
                break
            best = period
    figure: dict[str, Any] = {"name": "rate", "unit": "samples/s", "accel": "tcg",
                              "criterion": f"lost == 0 and overruns <= "
                                           f"{max_overrun_fraction:.0%} of periods",
                              "steps": steps}
    if best is None:
        return [{**figure, "value": 0.0}]
    return [{**figure, "value": 1e9 / best, "period_ns": best}]


def _bench_trace(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.explain.bench import bench_trace
    return bench_trace(**opts.get("trace", {}))


def _bench_push(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.store.bench import bench_push
    return bench_push(**opts.get("lab", {}))


def _bench_lab_read(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.store.bench import bench_lab_read
    return bench_lab_read(**opts.get("lab", {}))


def _bench_export(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.bench_api import bench_export
    return bench_export(**opts.get("lab", {}))


def _bench_import(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.reports.bench import bench_import
    return bench_import(**opts.get("import", {}))


def _bench_net(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.bench_net import bench_net
    return bench_net(**opts.get("net", {}))


def _bench_xentrace(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.xen.bench import bench_xentrace
    return bench_xentrace(**opts.get("xentrace", {}))


def _bench_noise(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.bench_noise import bench_noise
    return bench_noise(**opts.get("noise", {}))


def _bench_startup(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.bench_startup import bench_startup
    return bench_startup(**opts.get("startup", {}))


def _bench_serve(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.serve.bench import bench_serve
    return bench_serve(**opts.get("serve", {}))


def _bench_compare(opts: dict[str, Any]) -> list[dict[str, Any]]:
    from irqlab.reports.bench import bench_compare
    return bench_compare(**opts.get("compare", {}))


# Every benchmark by name: one line each. A function takes the options `irqlab bench`
# parsed (a dict of per-benchmark dicts) and returns its figures.
BENCHES: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    "ingest": lambda opts: bench_ingest(),
    "stats": lambda opts: bench_stats_figures(opts.get("stats_samples", 100_000_000)),
    "rate": lambda opts: bench_rate(),
    "cyclictest": lambda opts: bench_cyclictest(**opts.get("cyclictest", {})),
    "trace": _bench_trace,
    "push": _bench_push,
    "export": _bench_export,
    "import": _bench_import,
    "compare": _bench_compare,
    "lab-read": _bench_lab_read,
    "net": _bench_net,
    "xentrace": _bench_xentrace,
    "noise": _bench_noise,
    "startup": _bench_startup,
    "serve": _bench_serve,
}
DEFAULT_BENCHES = ("ingest", "stats", "rate")


def run_benchmarks(which: list[str], opts: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the named benchmarks in order; their figures, concatenated."""
    figures: list[dict[str, Any]] = []
    for name in which:
        figures += BENCHES[name](opts)
    return figures


# --- validation against cyclictest (rt-tests) ---------------------------------------------

_CYCLICTEST_HIST_NS = 1_000_000     # histogram range with -N: 1 ns buckets up to 1 ms


def _nearest_rank(sorted_values: np.ndarray, q: float) -> int:
    """Nearest-rank quantile of sorted values (the sample at rank ceil(q * n))."""
    n = len(sorted_values)
    return int(sorted_values[max(0, min(n - 1, int(np.ceil(q * n)) - 1))])


def _hist_quantile(counts: np.ndarray, overflow_value: int, q: float) -> int:
    """Nearest-rank quantile from a 1-ns-bucket histogram (overflow -> overflow_value)."""
    total = int(counts.sum())
    rank = max(1, int(np.ceil(q * total)))
    cum = np.cumsum(counts)
    idx = int(np.searchsorted(cum, rank))
    return idx if idx < len(counts) else overflow_value


def _ours_round(cpu: int, duration_s: float, period_ns: int) -> dict[str, Any]:
    """One round of irqlab-native on ``cpu``: latencies read through our ring reader."""
    from irqlab.runner.native import NativeProbe
    from irqlab.samples.multiring import MultiRingReader, layout_bytes

    probe = NativeProbe(period_ns, cpus=[cpu], priority=90, layout_bytes=layout_bytes,
                        samples=int(duration_s * 1e9 // period_ns))
    probe.start()
    reader = None
    chunks = []
    try:
        end = time.monotonic() + duration_s + 10
        while time.monotonic() < end:
            if reader is None:
                reader = MultiRingReader(probe.mem_path)
            if reader.magic_ok():
                batch = reader.poll()
                if len(batch):
                    chunks.append(batch.latency_tick)
                if reader.state() in ("done", "error") or probe.exit_code() is not None:
                    reader.finish()
                    chunks.append(reader.poll().latency_tick)
                    break
            time.sleep(0.05)
        if reader is None or reader.state() != "done":
            raise RuntimeError(f"native probe failed: {probe.stderr().strip()[-300:]}")
        lost = reader.lost
    finally:
        if reader is not None:
            reader.close()
        probe.stop()
    lat = np.sort(np.concatenate(chunks))
    return {"samples": len(lat), "lost": lost, "p50_ns": _nearest_rank(lat, 0.5),
            "p99_ns": _nearest_rank(lat, 0.99), "max_ns": int(lat[-1])}


def _cyclictest_round(cpu: int, duration_s: float, period_ns: int) -> dict[str, Any]:
    """One round of `cyclictest -m -p 90 -i PERIOD -h … -N` on ``cpu``, parsed."""
    import shutil
    import subprocess

    exe = shutil.which("cyclictest")
    if exe is None:
        raise RuntimeError("cyclictest not found: install Debian's rt-tests "
                           "(./setup.sh --install-only does)")
    argv = [exe, "-m", "-p", "90", "-i", str(period_ns // 1000), "-t", "1", "-a", str(cpu),
            "-N", "-h", str(_CYCLICTEST_HIST_NS), "-q", "-D", f"{duration_s:g}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=duration_s + 60)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): "
                           f"{proc.stderr.strip()[-300:]}")
    counts = np.zeros(_CYCLICTEST_HIST_NS, dtype=np.int64)
    max_ns = overflows = 0
    for line in proc.stdout.splitlines():
        if line.startswith("# Max Latencies:"):
            max_ns = int(line.split(":")[1].split()[0])
        elif line.startswith("# Histogram Overflows:"):
            overflows = int(line.split(":")[1].split()[0])
        elif line[:1].isdigit():
            bucket, n = line.split()[:2]
            counts[int(bucket)] = int(n)
    counts_all = np.append(counts, overflows)
    return {"samples": int(counts_all.sum()), "argv": argv,
            "p50_ns": _hist_quantile(counts_all, max_ns, 0.5),
            "p99_ns": _hist_quantile(counts_all, max_ns, 0.99), "max_ns": max_ns}


def bench_cyclictest(rounds: int = 5, duration_s: float = 10.0, cpu: int | None = None,
                     period_ns: int = 1_000_000) -> list[dict[str, Any]]:
    """Our native probe and cyclictest alternately on one CPU (ABBA order), same period
    and duration; per round p50/p99/max of each and the ratio ours/cyclictest. Goal:
    median p50 ratio <= 1.05 (our probe adds no latency). Latencies of both in ns
    (cyclictest -N), percentiles by nearest rank."""
    import os

    if cpu is None:
        cpu = max(os.sched_getaffinity(0))
    figures: list[dict[str, Any]] = []
    ratios = []
    for i in range(rounds):
        order = ("ours", "cyclictest") if i % 2 == 0 else ("cyclictest", "ours")
        got = {}
        for who in order:
            fn = _ours_round if who == "ours" else _cyclictest_round
            got[who] = fn(cpu, duration_s, period_ns)
        ours, cyc = got["ours"], got["cyclictest"]
        ratio = ours["p50_ns"] / cyc["p50_ns"] if cyc["p50_ns"] else float("nan")
        ratios.append(ratio)
        figures.append({"name": f"cyclictest round {i + 1}", "value": ratio,
                        "unit": "p50 ratio ours/cyclictest", "cpu": cpu,
                        "duration_s": duration_s, "order": list(order),
                        "ours": {k: ours[k] for k in ("samples", "lost", "p50_ns",
                                                      "p99_ns", "max_ns")},
                        "cyclictest": {k: cyc[k] for k in ("samples", "p50_ns", "p99_ns",
                                                           "max_ns")},
                        "p99_ratio": ours["p99_ns"] / cyc["p99_ns"] if cyc["p99_ns"]
                        else float("nan"),
                        "max_ratio": ours["max_ns"] / cyc["max_ns"] if cyc["max_ns"]
                        else float("nan")})
    median = float(np.median(ratios))
    figures.append({"name": "cyclictest", "value": median,
                    "unit": "median p50 ratio ours/cyclictest", "goal": 1.05,
                    "met": bool(median <= 1.05), "rounds": rounds, "cpu": cpu})
    return figures
