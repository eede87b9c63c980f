"""Run every cell of a scenario, store each run tagged with its cell, resume when asked.

Each run gets ``suite`` = the scenario name, ``cell`` = the cell's keys and values, and
tags: the cell's keys as text plus ``scenario`` = a digest of the file's [run] and [matrix]
(a resumed matrix only reuses runs of the very same definition).

With ``repeat = N`` in [run] each cell is a series of N runs (irqlab.suite: tag and
metadata ``series``), the cells' runs interleaved round by round (A1 B1 A2 B2 …) so drift
of the host hits every cell alike. A resumed matrix continues each cell's latest series of
this definition: a cell is done when N runs of it ended ok; each missing one is run again
under the index it fills.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from irqlab.cli.scenario import (CHECK_CELLS_FIRST, Scenario, ScenarioError, cell_id,
                                 check_cell, parse_cell_args, value_text)
from irqlab.reports.select import SERIES_TAG

if TYPE_CHECKING:       # the store is opened by the command, not at import (design.md)
    from irqlab.store import Store

CELL_VERSION = 1   # of the {"type": "cell"} line (docs/formats.md section 5)
# The tag naming the labgrid place a pooled cell ran on: `compare tag:board=NAME`.
BOARD_TAG = "board"


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
    series: str | None = None      # with repeat > 1: the cell's series id
    index: int | None = None       # ... and the run's index in it (1-based)
    place: str | None = None       # with --lg-places: the labgrid place it ran on

    def row(self) -> dict[str, Any]:
        """The JSON object of a cell: its keys, then its run's summary keys."""
        # The cell line has a version of its own; the summary's "version" is not it.
        out: dict[str, Any] = {"type": "cell", "version": CELL_VERSION, **self.cell}
        for key, val in self.summary.items():
            if key not in out and key not in ("type", "version"):
                out[key] = val
        if self.series is not None:
            out["series"], out["index"] = self.series, self.index
        if self.place is not None:
            out["place"] = self.place
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
                                            hook_notes(r.metadata), resumed=True,
                                            place=r.tags.get(BOARD_TAG))
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


def _run_cell(scn: Scenario, cell: dict[str, Any], store: Store,
              observer: MatrixObserver, series: tuple[str, int] | None = None,
              place: str | None = None, pool: dict[str, Any] | None = None) -> CellResult:
    """One run of ``cell``; ``series`` = (id, index) when the matrix repeats its cells;
    ``place``: the labgrid place a pool gave it (irqlab.cli.matrix_pool), run as
    ``--lg-place`` and tagged ``board`` (the cell's own keys stay its identity, so
    --resume finds it whichever board ran it); ``pool``: the attempt's record, kept in
    the run's metadata."""
    from irqlab.cli import cmd_run
    from irqlab.measure import run as measure
    from irqlab.cli.common import UsageError
    from irqlab.suite import in_series

    if scn.cell_count() > CHECK_CELLS_FIRST:     # not checked by load_scenario
        try:
            check_cell(scn, cell)
        except ScenarioError as exc:
            raise UsageError(f"{exc} (the runs before it are stored; fix the cell and "
                             f"continue with --resume)") from None
    # Hooks as `irqlab run` builds them (a cell's trace = true captures into this store).
    args = parse_cell_args(scn, cell if place is None else {**cell, "lg_place": place})
    cfg = cmd_run.run_config(args, store.path)
    cfg.name = f"{scn.name}/{cell_id(cell)}"
    cfg.suite = scn.name
    cfg.cell = cell
    # run --tag (a [run] tag = "K=V"), then [tags], then the cell's own keys.
    cfg.tags = {**cfg.tags, **scn.tags, **{k: value_text(v) for k, v in cell.items()},
                "scenario": scn.digest[:16]}
    if place is not None:
        cfg.tags[BOARD_TAG] = place
        cfg.metadata = {**cfg.metadata, "pool": pool or {"place": place}}
    if series is not None:
        cfg = in_series(cfg, series[0], series[1], scn.repeat)
    result = measure(cfg, store, _RunObserver(observer))
    meta = store.resolve(str(result.run_id)).metadata
    return CellResult(cell, result.run_id, result.status, result.summary, hook_notes(meta),
                      series=None if series is None else series[0],
                      index=None if series is None else series[1], place=place)


def run_matrix(scn: Scenario, store: Store, observer: MatrixObserver,
               resume: bool = False) -> tuple[list[CellResult], bool]:
    """Run the cells in order; returns (results in cell order, interrupted?). With
    ``repeat`` > 1: every run of every cell, interleaved (run_series)."""
    from irqlab.measure.boot import StopFlag     # the run machinery, when a matrix runs

    if scn.repeat > 1:
        return run_series(scn, store, observer, resume)
    # The cells are walked lazily (a matrix may be large: scenario.MAX_CELLS); only the
    # results are kept.
    total = scn.cell_count()
    done = previous_results(store, scn) if resume else {}
    done_here = sum(1 for c in scn.iter_cells() if _key(c) in done) if done else 0
    if resume and done:
        observer.notice(f"resuming {scn.name}: {done_here} of {total} cells already done")
    results: dict[str, CellResult] = {}
    interrupted = False
    index = 0
    # SIGINT/SIGTERM between runs, or one a run ended without heeding, stops the matrix.
    cells = scn.iter_cells()
    with StopFlag() as stop:
        for cell in cells:
            key = _key(cell)
            if key in done:
                results[key] = done[key]
                continue
            if stop.signum is not None:
                interrupted = True
                break
            observer.cell_started(index, total - done_here, cell)
            index += 1
            res = _run_cell(scn, cell, store, observer)
            results[key] = res
            observer.cell_done(res)
            if res.status == "interrupted" or stop.signum is not None:
                interrupted = True
                break
    # Cells were visited in order, so results are in cell order; cells after a stop are
    # walked only for the runs a resumed matrix already has.
    if done:
        for cell in cells:
            if _key(cell) in done:
                results[_key(cell)] = done[_key(cell)]
    return list(results.values()), interrupted


def previous_series(store: Store, scn: Scenario) -> dict[str, tuple[str, dict[int, CellResult]]]:
    """Per cell (its key): the id of its latest series of this very definition and that
    series' runs that ended ok, by index."""
    runs = [r for r in store.runs()
            if r.suite == scn.name and r.tags.get("scenario") == scn.digest[:16]
            and r.cell is not None and r.tags.get(SERIES_TAG)]
    latest = {_key(r.cell): r.tags[SERIES_TAG] for r in runs}   # run-id order: last wins
    out: dict[str, tuple[str, dict[int, CellResult]]] = {k: (v, {}) for k, v in latest.items()}
    for r in runs:
        index = (r.metadata.get(SERIES_TAG) or {}).get("index")
        series_id, ok = out[_key(r.cell)]
        if r.tags[SERIES_TAG] == series_id and r.status == "ok" and isinstance(index, int):
            ok[index] = CellResult(r.cell, r.run_id, r.status, r.summary or {},
                                   hook_notes(r.metadata), resumed=True,
                                   series=series_id, index=index,
                                   place=r.tags.get(BOARD_TAG))
    return out


def _auto_decided(scn: Scenario, cells: list[dict[str, Any]],
                  results: dict[str, list[CellResult]], rounds: int,
                  observer: MatrixObserver) -> bool:
    """repeat = "auto": judge every cell's runs against the first cell's
    (irqlab.reports.noise.auto_judge); say where it stands; True when decided."""
    from irqlab.reports import noise

    groups = [(cell_id(c), [r.summary for r in sorted(results[_key(c)],
                                                       key=lambda r: r.index or 0)])
              for c in cells]
    auto = noise.auto_judge(groups, rounds, scn.repeat)
    if rounds >= noise.MIN_RUNS and (auto["decided"] or rounds == scn.repeat):
        observer.notice(noise.auto_text(auto))
    return bool(auto["decided"])


def run_series(scn: Scenario, store: Store, observer: MatrixObserver,
               resume: bool = False) -> tuple[list[CellResult], bool]:
    """Every cell ``scn.repeat`` times, interleaved round by round (irqlab.suite);
    returns (each cell's runs by index, cells in order; interrupted?)."""
    from irqlab.suite import interleave, new_series_id

    cells = scn.cells()
    done = previous_series(store, scn) if resume else {}
    results: dict[str, list[CellResult]] = {}
    plans = []
    for cell in cells:
        series_id, ok = done.get(_key(cell)) or (new_series_id(f"{scn.name}/{cell_id(cell)}"),
                                                 {})
        results[_key(cell)] = [ok[i] for i in sorted(ok) if i <= scn.repeat]
        plans.append([(cell, series_id, i) for i in range(1, scn.repeat + 1) if i not in ok])
    todo = interleave(plans)
    total = len(cells) * scn.repeat
    if resume and total > len(todo):
        observer.notice(f"resuming {scn.name}: {total - len(todo)} of {total} runs "
                        f"({len(cells)} cells x {scn.repeat}) already done")
    interrupted = False
    judged = 0
    from irqlab.measure.boot import StopFlag

    with StopFlag() as stop:            # as in run_matrix
        for n, (cell, series_id, index) in enumerate(todo):
            if stop.signum is not None:
                interrupted = True
                break
            observer.cell_started(n, len(todo), cell)
            res = _run_cell(scn, cell, store, observer, (series_id, index))
            results[_key(cell)].append(res)
            observer.cell_done(res)
            if res.status == "interrupted" or stop.signum is not None:
                interrupted = True
                break
            # repeat = "auto": after each whole round (every cell has one more run),
            # the cells are judged against the first; decided, the matrix ends there.
            rounds = min(len(results[_key(c)]) for c in cells)
            if scn.auto and rounds > judged:
                judged = rounds
                if _auto_decided(scn, cells, results, rounds, observer):
                    break
    ordered = [res for c in cells
               for res in sorted(results[_key(c)], key=lambda r: (r.index, r.run_id or 0))]
    return ordered, interrupted
