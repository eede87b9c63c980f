"""``irqlab bench cyclictest``: our native probe against rt-tests' cyclictest on one CPU,
alternately (validation: the probe adds no latency)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np


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
