"""Throughput of RunStats against a plain numpy baseline on the same synthetic data.

Run: python -m irqlab.stats.bench [n] [chunk]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .histogram import quantile_rank
from .run import PERCENTILES, RunStats

# Synthetic run: 30 ns ticks, 1 ms period, 1 s windows, 30 us threshold.
_TICK_HZ = 33_333_333
_PERIOD_TICK = 33_333
_WINDOW_TICK = _TICK_HZ
_THRESHOLD_TICK = 1_000
_WARMUP_WINDOWS = 5
_SPIKE_RATE = 1e-5      # fraction of samples hit by a big spike
_NEGATIVE_RATE = 1e-6   # fraction of slightly negative latencies


def _chunk(rng: np.random.Generator, start: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Deadlines and latencies of samples start .. start+size-1."""
    deadline = (np.arange(start, start + size, dtype=np.int64) * _PERIOD_TICK
                + 1_000_000_000)
    latency = rng.lognormal(np.log(300.0), 0.15, size).astype(np.int64)
    spikes = np.flatnonzero(rng.random(size) < _SPIKE_RATE)
    latency[spikes] += rng.integers(1_000, 3_000_000, spikes.size)  # up to 0.1 s
    negative = np.flatnonzero(rng.random(size) < _NEGATIVE_RATE)
    latency[negative] = -rng.integers(1, 20, negative.size)
    return deadline, latency


def bench_stats(n: int = 100_000_000, chunk: int = 10_000_000) -> dict[str, float]:
    """Time RunStats over n synthetic samples (fed chunk by chunk) vs numpy sort + stats.

    Only the statistics are timed, not the data generation. The baseline concatenates
    the same latencies, sorts them, and takes nearest-rank percentiles, mean, std
    (ddof = 0), min, max and the threshold count. Returns ours_s, numpy_s,
    ratio (= ours_s / numpy_s), samples_per_s (ours), plus n and the largest relative
    percentile difference between the two (a correctness sanity check).
    """
    rng = np.random.default_rng(12345)
    stats = RunStats(_TICK_HZ, _THRESHOLD_TICK, _WINDOW_TICK, _WARMUP_WINDOWS)
    kept: list[np.ndarray] = []
    ours_s = 0.0
    for start in range(0, n, chunk):
        deadline, latency = _chunk(rng, start, min(chunk, n - start))
        t0 = time.perf_counter()
        stats.add(deadline, latency)
        ours_s += time.perf_counter() - t0
        kept.append(latency)
        del deadline
    t0 = time.perf_counter()
    _, summary = stats.finish()
    ours_s += time.perf_counter() - t0

    t0 = time.perf_counter()
    data = np.concatenate(kept)
    kept.clear()
    ordered = np.sort(data)
    baseline = {name: int(ordered[quantile_rank(q, ordered.size) - 1])
                for name, q in PERCENTILES}
    _ = (data.mean(), data.std(), ordered[0], ordered[-1],
         int(np.count_nonzero(data > _THRESHOLD_TICK)))
    numpy_s = time.perf_counter() - t0

    worst = max(abs(getattr(summary, name) - ref) / max(abs(ref), 1)
                for name, ref in baseline.items())
    return {"n": n, "ours_s": ours_s, "numpy_s": numpy_s, "ratio": ours_s / numpy_s,
            "samples_per_s": n / ours_s, "max_percentile_rel_err": worst}


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    print(bench_stats(*args))
