"""``irqlab matrix FILE --dry-run``: the cells a matrix would run, each with its ``irqlab
run`` arguments and an estimated time, without opening the store or touching the host.

The estimate of a run is its length (``samples`` x ``period`` when samples are given,
else ``duration``) plus the target's boot estimate (``Target.boot_estimate_s``, declared by
each target in irqlab/targets/); a cell takes that times ``repeat``. The boot figures are rough planning guesses (a TCG guest boots in a
few seconds, Xen and a Linux guest in tens), not measured on this host: the real time
also depends on the load and on emulation speed.
"""

from __future__ import annotations

import itertools
import shlex
from dataclasses import dataclass
from typing import IO, Any, Iterator

from irqlab.cli.scenario import Scenario, cell_config, cell_id
from irqlab.targets import get_target

PLAN_VERSION = 1   # of the {"type": "planned_cell"} line (docs/formats.md section 5)
# A plan of up to this many cells is listed under a header with its total estimate; a
# bigger one streams (issue 47: 10^12 cells were built as a list, nothing printed): the
# header gives its count (from the lists' lengths), and the total comes last.
PLAN_WHOLE = 10_000


@dataclass
class PlannedCell:
    cell: dict[str, Any]
    argv: list[str]
    target: str
    run_s: float | None        # None: the run has no end (neither samples nor duration)
    boot_s: float
    repeat: int

    @property
    def estimated_s(self) -> float | None:
        return None if self.run_s is None else self.repeat * (self.run_s + self.boot_s)

    def row(self) -> dict[str, Any]:
        return {"type": "planned_cell", "version": PLAN_VERSION, "name": cell_id(self.cell),
                "cell": self.cell, "argv": self.argv, "target": self.target,
                "repeat": self.repeat, "run_s": self.run_s, "boot_estimate_s": self.boot_s,
                "estimated_s": self.estimated_s}


def plan(scn: Scenario) -> Iterator[PlannedCell]:
    """Every (picked) cell with its run arguments and estimate, one at a time; parses,
    runs nothing. A cell whose options clash is a ScenarioError naming it."""
    for cell in scn.iter_cells():
        cfg = cell_config(scn, cell)
        if cfg.samples:
            run_s: float | None = cfg.samples * cfg.period_ns / 1e9
        elif cfg.duration_ns:
            run_s = cfg.duration_ns / 1e9
        else:
            run_s = None
        yield PlannedCell(cell, scn.argv(cell), cfg.target, run_s,
                          get_target(cfg.target).boot_estimate_s,
                          scn.repeat)


def seconds_text(s: float | None) -> str:
    """'45 s', '2 min 05 s', '1 h 02 min'; 'unbounded' for a run with no end."""
    if s is None:
        return "unbounded"
    s = round(s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _estimate_line(cells: list[PlannedCell], total_s: float | None) -> str:
    boots = sorted({f"{c.target} {c.boot_s:g} s" for c in cells})
    return (f"estimated {seconds_text(total_s)} run one after another (boot estimate: "
            f"{', '.join(boots) or '-'})")


def render_plan(scn: Scenario, cells: Iterator[PlannedCell], fmt: str,
                out: IO[str]) -> None:
    """JSON lines with --format json, else a text table: cell, estimate, arguments.
    Written as the cells come (flushed): a plan's first cells show at once."""
    import json

    if fmt == "json":
        for c in cells:
            out.write(json.dumps(c.row(), default=str) + "\n")
            out.flush()
        return
    count = scn.cell_count()
    runs = ("" if scn.repeat == 1 else f" x up to {scn.repeat} runs (repeat auto)"
            if scn.auto else f" x {scn.repeat} runs")
    if count <= PLAN_WHOLE:
        head = list(cells)
        total = _total_s(head)
        out.write(f"{scn.name}: {len(head)} cells{runs}, {_estimate_line(head, total)}\n")
        width = max([len("CELL"), *(len(_name(c)) for c in head)])
        _header(out, width)
        for c in head:
            _row(out, c, width)
        return
    out.write(f"{scn.name}: {count:,} cells{runs} (the estimate comes last)\n")
    first = next(cells)
    width = max(len("CELL"), len(_name(first)))
    _header(out, width)
    targets: dict[str, PlannedCell] = {}
    total: float | None = 0.0
    for c in itertools.chain([first], cells):
        _row(out, c, width)
        out.flush()
        targets.setdefault(c.target, c)
        total = None if total is None or c.estimated_s is None else total + c.estimated_s
    out.write(f"{count:,} cells{runs}, {_estimate_line(list(targets.values()), total)}\n")


def _total_s(cells: list[PlannedCell]) -> float | None:
    times = [c.estimated_s for c in cells]
    return None if any(t is None for t in times) else sum(t for t in times if t)


def _name(c: PlannedCell) -> str:
    return cell_id(c.cell) or "(single cell)"


def _header(out: IO[str], width: int) -> None:
    out.write(f"{'CELL':<{width}}  {'ESTIMATE':>12}  CONFIGURATION (irqlab run ...)\n")


def _row(out: IO[str], c: PlannedCell, width: int) -> None:
    out.write(f"{_name(c):<{width}}  {seconds_text(c.estimated_s):>12}  "
              f"{shlex.join(c.argv)}\n")
