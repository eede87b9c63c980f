"""Simulated runs of known truth for calibrating the noise test (issue 45).

A run is `samples` latencies whose log follows an AR(1) (coefficient `phi`: a slow second
gives a burst of slow samples) with rare bursts (probability `burst_p` a sample, 20
samples long, each run its own burst height), times a run-level factor, lognormal of sd
`run_sd` (host state, placement: what differs between two runs of one configuration,
Kalibera & Jones 2013). What is kept of each run is what the run-level test uses: its
nearest-rank quantiles (noise.QUANTILES). The test (tests/unit/reports/test_noise_sim.py)
and `irqlab bench noise --simulate` judge thousands of such pairs through
noise.run_level_ratio, the function compare itself calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from irqlab.reports import noise
from irqlab.stats import quantile_rank

MEDIAN_NS = 20_000
BURST_LEN = 20


@dataclass(frozen=True)
class SimConfig:
    """What one simulated configuration's runs look like."""

    samples: int = 2_000
    run_sd: float = 0.05          # sd of the log run-level factor
    phi: float = 0.9              # AR(1) coefficient of the log latency
    sd_log: float = 0.3           # marginal sd of the log latency
    burst_p: float = 0.002        # a burst starts at a sample with this probability
    shift: float = 1.0            # the configuration's true factor (A/B: B's)


CHUNK_RUNS = 2_000            # runs simulated at once (memory: 3 x chunk x samples)


def run_quantiles(rng: np.random.Generator, runs: int, cfg: SimConfig
                  ) -> dict[str, np.ndarray]:
    """Per-run nearest-rank quantiles (label -> one value a run) of `runs` runs."""
    parts = [_chunk(rng, min(CHUNK_RUNS, runs - start), cfg)
             for start in range(0, runs, CHUNK_RUNS)]
    return {label: np.concatenate([p[label] for p in parts])
            for _q, label in noise.QUANTILES}


def _chunk(rng: np.random.Generator, runs: int, cfg: SimConfig) -> dict[str, np.ndarray]:
    """run_quantiles of one chunk of runs."""
    n = cfg.samples
    # Time-major (sample, run): each AR step is one contiguous row for all runs.
    x = rng.standard_normal((n, runs)) * (cfg.sd_log * math.sqrt(1 - cfg.phi ** 2))
    x[0] *= 1 / math.sqrt(1 - cfg.phi ** 2)          # the stationary start
    for t in range(1, n):
        x[t] += cfg.phi * x[t - 1]
    starts = (rng.random((n, runs)) < cfg.burst_p).astype(np.int32)
    # A sample is in a burst when one started in the BURST_LEN samples up to it.
    csum = np.cumsum(starts, axis=0)
    csum[BURST_LEN:] -= csum[:-BURST_LEN].copy()
    height = rng.exponential(1.5, runs)
    level = np.exp(rng.standard_normal(runs) * cfg.run_sd) * cfg.shift
    x += (csum > 0) * height
    x.sort(axis=0)
    return {label: MEDIAN_NS * np.exp(x[quantile_rank(q, n) - 1]) * level
            for q, label in noise.QUANTILES}


def verdict_shares(rng: np.random.Generator, pairs: int, runs_a: int, runs_b: int,
                   a: SimConfig, b: SimConfig,
                   margins: dict[str, float] | None = None) -> dict[str, int]:
    """How many of `pairs` simulated comparisons (runs_a runs of `a` against runs_b of
    `b`) compare's row verdict calls different, same and unknown."""
    margins = {**noise.DEFAULT_MARGINS, **(margins or {})}
    qa, qb = run_quantiles(rng, pairs * runs_a, a), run_quantiles(rng, pairs * runs_b, b)
    counts = {v: 0 for v in noise.VERDICTS}
    for i in range(pairs):
        results = [noise.run_level_ratio(qa[label][i * runs_a:(i + 1) * runs_a],
                                         qb[label][i * runs_b:(i + 1) * runs_b], label,
                                         margin=margins.get(label))
                   for _q, label in noise.QUANTILES]
        counts[noise.row_verdict(results)[0]] += 1
    return counts


def auto_shares(rng: np.random.Generator, pairs: int, max_runs: int, a: SimConfig,
                b: SimConfig, margins: dict[str, float] | None = None
                ) -> tuple[dict[str, int], list[int]]:
    """`--repeat auto` replayed on `pairs` simulated comparisons of up to max_runs runs
    a side (noise.auto_decision, the rule run and matrix apply): how many end
    different, same and unknown, and the runs a side each used."""
    margins = {**noise.DEFAULT_MARGINS, **(margins or {})}
    qa = run_quantiles(rng, pairs * max_runs, a)
    qb = run_quantiles(rng, pairs * max_runs, b)
    counts = {v: 0 for v in noise.VERDICTS}
    used = []
    for i in range(pairs):
        part = slice(i * max_runs, (i + 1) * max_runs)
        got = noise.auto_decision({k: v[part] for k, v in qa.items()},
                                  {k: v[part] for k, v in qb.items()}, margins, max_runs)
        counts[got.verdict] += 1
        used.append(got.runs)
    return counts, used
