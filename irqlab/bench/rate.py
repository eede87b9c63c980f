"""``irqlab bench rate``: the shortest probe period a TCG guest sustains here with zero
lost samples."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any


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
