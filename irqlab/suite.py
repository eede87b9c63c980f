"""Side by side: several targets measured one after another, stored as one suite.

``irqlab run --target native,guest,linux-guest`` (or ``--target all``) runs each target
with the same period, duration, window and threshold. Every run is an ordinary run in the
store with ``suite`` = the suite's name and ``cell`` = {"target": ...}, so the suite can
be reported later; the comparison rows (one per target) are what the CLI prints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from irqlab.measure import Observer, RunConfig, RunResult, run
from irqlab.store import Store

TARGETS = ("guest", "native", "linux-guest", "xen")
# Built-in suites: name -> targets in the order they run.
SUITES: dict[str, tuple[str, ...]] = {"all": ("native", "guest", "linux-guest")}

# Comparison columns: (heading, summary key); latency keys end in _ns.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("samples", "samples"), ("min", "min_ns"), ("p50", "p50_ns"), ("p99", "p99_ns"),
    ("p99.9", "p999_ns"), ("max", "max_ns"), ("warm max", "warm_max_ns"),
    ("above thr", "above_threshold"))


def parse_targets(text: str) -> list[str]:
    """"native,guest" or a suite name -> targets; ValueError naming the choices."""
    if text in SUITES:
        return list(SUITES[text])
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in names if t not in TARGETS]
    if not names or bad:
        raise ValueError(f"unknown target {', '.join(bad) or repr(text)}: choose from "
                         f"{', '.join(TARGETS)}, a comma list of them, or a suite "
                         f"({', '.join(SUITES)})")
    if len(set(names)) != len(names):
        raise ValueError(f"--target {text} names a target twice")
    return names


@dataclass
class SuiteResult:
    name: str
    targets: list[str]
    results: list[RunResult] = field(default_factory=list)

    @property
    def status(self) -> str:
        statuses = [r.status for r in self.results]
        if "interrupted" in statuses:
            return "interrupted"
        if len(statuses) == len(self.targets) and all(s == "ok" for s in statuses):
            return "ok"
        return "failed"

    def rows(self) -> list[dict[str, Any]]:
        """One comparison row per target that ran."""
        out = []
        for target, res in zip(self.targets, self.results):
            s = res.summary
            row = {"target": target, "run_id": res.run_id, "status": res.status,
                   "accel": s.get("accel"), "emulated": s.get("emulated"),
                   "lost": s.get("lost"), "threshold_ns": s.get("threshold_ns")}
            row.update({key: s.get(key) for _h, key in COLUMNS})
            out.append(row)
        return out

    def json_object(self) -> dict[str, Any]:
        """The ``{"type": "suite", ...}`` line (docs/formats.md section 4)."""
        return {"type": "suite", "suite": self.name, "status": self.status,
                "targets": self.targets, "rows": self.rows()}


def run_suite(cfg: RunConfig, targets: list[str], store: Store, observer: Observer,
              after_run: Callable[[RunResult], None] | None = None) -> SuiteResult:
    """Run ``cfg`` once per target, in order; stops early only on Ctrl-C/SIGTERM."""
    name = cfg.suite or cfg.name or f"suite-{time.strftime('%Y%m%d-%H%M%S')}"
    suite = SuiteResult(name, list(targets))
    for target in targets:
        run_cfg = replace(cfg, target=target, name=f"{name}-{target}", suite=name,
                          cell={**(cfg.cell or {}), "target": target})
        if target == "xen":
            # A Xen guest answers through its console (the host cannot map its RAM), in
            # batches, slowly under TCG: its own sink and watchdog, the others keep theirs.
            run_cfg = replace(run_cfg, sink="console", stall_timeout_s=(
                cfg.stall_timeout_s or max(10.0, 40 * cfg.period_ns / 1e9)))
        result = run(run_cfg, store, observer)
        suite.results.append(result)
        if after_run is not None:
            after_run(result)
        if result.status == "interrupted":
            break
    return suite
