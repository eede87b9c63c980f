"""Run every cell of a scenario, store each run tagged with its cell, resume when asked.

Each run gets ``suite`` = the scenario name, ``cell`` = the cell's keys and values, and
tags: the cell's keys as text plus ``scenario`` = a digest of the file's [run] and [matrix]
(a resumed matrix only reuses runs of the very same definition).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from irqlab.cli.scenario import Scenario, cell_id, parse_cell_args, value_text
from irqlab.stats.fields import MATRIX_TABLE
from irqlab.store import Store

# (heading, summary key) of the results table, from the catalog (irqlab.stats.fields).
SUMMARY_COLUMNS = [(c.heading, c.key) for c in MATRIX_TABLE]

CELL_VERSION = 1   # of the {"type": "cell"} line (docs/formats.md section 5)


class MatrixObserver(Protocol):
    def cell_started(self, index: int, total: int, cell: dict[str, Any]) -> None: ...
    def cell_progress(self, fraction: float) -> None: ...
    def cell_done(self, result: "CellResult") -> None: ...
    def notice(self, text: str) -> None: ...


@dataclass
class CellResult:
    cell: dict[str, Any]
    run_id: int | None
    status: str
    summary: dict[str, Any]
    notes: list[str]
    resumed: bool = False

    def row(self) -> dict[str, Any]:
        """The JSON object of a cell: its keys, then its run's summary keys."""
        # The cell line has a version of its own; the summary's "version" is not it.
        out: dict[str, Any] = {"type": "cell", "version": CELL_VERSION, **self.cell}
        for key, val in self.summary.items():
            if key not in out and key not in ("type", "version"):
                out[key] = val
        out["resumed"] = self.resumed
        out["notes"] = self.notes
        return out


def _key(cell: dict[str, Any]) -> str:
    return json.dumps(cell, sort_keys=True, default=str)


def hook_notes(metadata: dict[str, Any]) -> list[str]:
    """Knobs the host did not allow and load errors: printed under the table."""
    out = []
    for name, meta in (metadata.get("hooks") or {}).items():
        status = str(meta.get("status", ""))
        if status.startswith("not applicable") or status.startswith("failed"):
            out.append(f"{name}={meta.get('requested')}: {status}")
        if meta.get("error"):
            out.append(f"{name}: {meta['error']}")
    return out


def previous_results(store: Store, scn: Scenario) -> dict[str, CellResult]:
    """Latest successful run of each cell of this very scenario definition."""
    done: dict[str, CellResult] = {}
    for r in store.runs():
        if r.suite == scn.name and r.tags.get("scenario") == scn.digest[:16] \
                and r.status == "ok" and r.cell is not None:
            done[_key(r.cell)] = CellResult(r.cell, r.run_id, r.status, r.summary or {},
                                            hook_notes(r.metadata), resumed=True)
    return done


class _RunObserver:
    """Adapts one run's observer calls to the matrix progress."""

    def __init__(self, observer: MatrixObserver) -> None:
        self.observer = observer

    def on_started(self, info: dict[str, Any]) -> None:
        pass

    def on_window(self, window: dict[str, Any], line: str) -> None:
        pass

    def on_progress(self, fraction: float, detail: str) -> None:
        self.observer.cell_progress(fraction)

    def on_notice(self, text: str) -> None:
        self.observer.notice(text)


def run_matrix(scn: Scenario, store: Store, observer: MatrixObserver,
               resume: bool = False) -> tuple[list[CellResult], bool]:
    """Run the cells in order; returns (results in cell order, interrupted?)."""
    from irqlab.cli import cmd_run
    from irqlab.measure import run as measure

    cells = scn.cells()
    done = previous_results(store, scn) if resume else {}
    todo = [c for c in cells if _key(c) not in done]
    if resume and done:
        observer.notice(f"resuming {scn.name}: {len(cells) - len(todo)} of {len(cells)} "
                        f"cells already done")
    results: dict[str, CellResult] = {k: v for k, v in done.items()
                                      if k in {_key(c) for c in cells}}
    interrupted = False
    for index, cell in enumerate(todo):
        observer.cell_started(index, len(todo), cell)
        # Hooks as `irqlab run` builds them (a cell's trace = true captures into this store).
        cfg = cmd_run.run_config(parse_cell_args(scn, cell), store.path)
        cfg.name = f"{scn.name}/{cell_id(cell)}"
        cfg.suite = scn.name
        cfg.cell = cell
        cfg.tags = {**{k: value_text(v) for k, v in cell.items()},
                    "scenario": scn.digest[:16]}
        result = measure(cfg, store, _RunObserver(observer))
        meta = store.resolve(str(result.run_id)).metadata
        res = CellResult(cell, result.run_id, result.status, result.summary,
                         hook_notes(meta))
        results[_key(cell)] = res
        observer.cell_done(res)
        if result.status == "interrupted":
            interrupted = True
            break
    ordered = [results[_key(c)] for c in cells if _key(c) in results]
    return ordered, interrupted
