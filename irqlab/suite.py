"""Side by side: several targets measured one after another, stored as one suite.

``irqlab run --target native,guest,linux-guest`` (or ``--target all``) runs each target
with the same period, duration, window and threshold. Every run is an ordinary run in the
store with ``suite`` = the suite's name and ``cell`` = {"target": ...}, so the suite can
be reported later; the comparison rows (one per target) are what the CLI prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from irqlab.measure import Observer, RunConfig, RunResult, run
from irqlab.stats.fields import SUITE_TABLE
from irqlab.store import Store

# Comparison columns: (heading, summary key), from the catalog (irqlab.stats.fields).
COLUMNS: tuple[tuple[str, str], ...] = tuple((c.heading, c.key) for c in SUITE_TABLE)


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
            # "lost" is also a column: update() keeps it in this place (JSON key order).
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


def run_suite(cfgs: list[RunConfig], store: Store, observer: Observer,
              after_run: Callable[[RunResult], None] | None = None) -> SuiteResult:
    """Run each config (one per target, made by the CLI with the targets' own rules and
    their own hooks), in order; stops early only on Ctrl-C/SIGTERM."""
    suite = SuiteResult(cfgs[0].suite or "suite", [c.target for c in cfgs])
    for cfg in cfgs:
        result = run(cfg, store, observer)
        suite.results.append(result)
        if after_run is not None:
            after_run(result)
        if result.status == "interrupted":
            break
    return suite
