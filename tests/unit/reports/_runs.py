"""Deterministic runs written straight into a store, for report tests.

Samples go through the real statistics (RunStats) and store code, so windows and summary
are what ``irqlab run`` would have stored for the same latencies. tick_hz is 1 GHz:
one tick is one ns, which keeps expected values readable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irqlab.measure import window_dict
from irqlab.samples.record import RECORD_DTYPE
from irqlab.stats import RunStats, ticks_to_ns
from irqlab.store import Store
from irqlab.store.interface import NewRun

TICK_HZ = 1_000_000_000
PERIOD_NS = 1_000_000


def latencies(kind: str, n: int, seed: int = 1) -> np.ndarray:
    """Named deterministic latency sets (ns)."""
    rng = np.random.default_rng(seed)
    if kind == "ramp":          # 1..n ns: percentiles are exactly known
        return np.arange(1, n + 1, dtype=np.int64)
    if kind == "lognormal":     # a realistic-looking body with a tail
        return np.round(rng.lognormal(np.log(5_000), 0.5, n)).astype(np.int64)
    raise ValueError(kind)


def add_run(store: Store, name: str, lat_ns: np.ndarray | None, *,
            accel: str = "kvm", emulated: bool = False, hostname: str = "h1",
            kernel: str = "6.1.0", period_ns: int = PERIOD_NS, threshold_ns: int = 30_000,
            window_ns: int = 1_000_000_000, tags: dict[str, str] | None = None,
            suite: str | None = None, status: str = "ok", raw: bool = True,
            tick_method: str = "cpuid-15", timer_mode: str = "tsc-deadline",
            extra_meta: dict[str, Any] | None = None, lost: int | None = 0) -> int:
    """A finished run with windows, summary and (with ``raw``) raw samples."""
    meta = {"host": {"hostname": hostname, "kernel": kernel, "cpu_model": "Test CPU",
                     "cpus_online": 2, "host_is_virtual": False},
            "qemu_version": "QEMU 7.2", "probe_cmdline": "period_ns=1000000",
            "probe": {"build_id": "test", "tick_method": tick_method,
                      "timer_mode": timer_mode, "idle": "hlt"}, **(extra_meta or {})}
    rid = store.create_run(NewRun(name, "guest", {"window_ns": window_ns, "warmup": 1,
                                                  "period_ns": period_ns}, meta,
                                  tags=tags, suite=suite))
    store.update_run(rid, arch="x86_64", accel=accel, emulated=emulated, tick_hz=TICK_HZ,
                     period_ns=period_ns, threshold_ns=threshold_ns)
    summary: dict[str, Any] = {"type": "summary", "version": 1, "run_id": rid, "name": name,
                               "samples": 0, "lost": lost, "overruns": 0, "injected": 0,
                               "tick_hz": TICK_HZ, "period_ns": period_ns,
                               "threshold_ns": threshold_ns, "accel": accel,
                               "emulated": emulated, "status": status}
    if lat_ns is not None and len(lat_ns):
        n = len(lat_ns)
        rec = np.zeros(n, RECORD_DTYPE)
        rec["seq"] = np.arange(n)
        rec["deadline_tick"] = 10_000_000 + rec["seq"] * period_ns
        rec["entry_tick"] = rec["deadline_tick"] + lat_ns.astype(np.uint64)
        stats = RunStats(TICK_HZ, threshold_ns, window_ns, 1)
        wins = stats.add(rec["deadline_tick"].astype(np.int64), lat_ns)
        last, s = stats.finish()
        store.add_windows(rid, [window_dict(w, TICK_HZ) for w in wins + last])
        if raw:
            store.add_samples(rid, rec)

        def ns(v: Any) -> int | None:
            return None if v is None else ticks_to_ns(v, TICK_HZ)
        summary.update({"samples": s.samples, "above_threshold": s.above_threshold,
                        "min_ns": ns(s.min_tick), "mean_ns": ns(s.mean_tick),
                        "stddev_ns": ns(s.stddev_tick), "max_ns": ns(s.max_tick),
                        "warm_max_ns": ns(s.warm_max_tick), "p50_ns": ns(s.p50_tick),
                        "p90_ns": ns(s.p90_tick), "p99_ns": ns(s.p99_tick),
                        "p999_ns": ns(s.p999_tick), "p9999_ns": ns(s.p9999_tick)})
    store.finish_run(rid, status, summary)
    return rid
