"""``irqlab matrix FILE``: run a scenario's cells, then print the results table."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from irqlab.argtypes import count_in
from irqlab.cli.common import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError, db_path
from irqlab.cli.common import db_ref
from irqlab.cli.cmd_run import repeat_arg, repeat_count
from irqlab.cli.matrix import CellResult, run_matrix
from irqlab.cli.output import exporter_for, show
from irqlab.cli.scenario import MAX_CELLS, PAIR_SEP, ScenarioError, cell_id, load_scenario
from irqlab.store import open_store

FORMATS = ("table", "markdown", "csv", "json")
# --max-cells: a matrix is counted, never built, before this check (scenario.py), so the
# bound only keeps the number printable; --parallel: one labgrid place a cell.
MAX_CELLS_ALLOWED = 10**15
MAX_PARALLEL = 1024


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("matrix", help="run every cell of a scenario file (TOML) and "
                                      "tabulate the results")
    m.add_argument("file", type=Path, help="scenario file (see scenarios/ and docs/formats.md)")
    m.add_argument("--db", type=db_ref, default=None, help="database file (default as irqlab run)")
    m.add_argument("--format", default="table", choices=FORMATS,
                   help="results as a terminal table (default), markdown, csv or JSON lines")
    # As every command that prints results (issue 46): --json is --format json.
    m.add_argument("--json", dest="format", action="store_const", const="json",
                   help="same as --format json")
    m.add_argument("--raw", action="store_true",
                   help="the terminal table's latencies in ns, as before 2026-11-26 "
                        "(default: with units, 31.6 us)")
    m.add_argument("--resume", action="store_true",
                   help="skip cells this scenario already completed in the database")
    m.add_argument("--repeat", type=repeat_arg, default=None, metavar="N|auto",
                   help="run each cell N times, interleaved (a series per cell); "
                        "replaces the file's [run] repeat")
    m.add_argument("--max-cells", type=count_in(1, MAX_CELLS_ALLOWED, "cells a matrix may "
                                                 "have; 0 would allow none"),
                   default=MAX_CELLS, metavar="N",
                   help=f"run a matrix of up to N cells (default {MAX_CELLS:,}; a larger "
                        f"one is refused before anything runs)")
    m.add_argument("--dry-run", action="store_true",
                   help="list the cells (name, estimated time, irqlab run arguments) and "
                        "exit: no run, no store opened")
    m.add_argument("--set", dest="overrides", action="append", type=_set_option,
                   default=[], metavar="KEY=VALUE",
                   help="set a [run] key for every cell, e.g. --set duration=5s "
                        "(repeatable; checked as the file's keys are)")
    m.add_argument("--only", action="append", default=[], metavar="PATTERN",
                   help="run only the cells whose name (e.g. idle=hlt,cpu_pm=off) matches "
                        "this shell-style pattern, e.g. 'idle=hlt*' (repeatable)")
    m.add_argument("--lg-places", metavar="MATCH", default=None,
                   help="spread the cells over the labgrid places matching MATCH (a name "
                        "pattern, e.g. 'rig-*', or tag=value), acquired through the "
                        "coordinator one cell at a time (the scenario's target: labgrid)")
    m.add_argument("--parallel", type=count_in(1, MAX_PARALLEL, "cells at once, each on a "
                                                "labgrid place of its own"),
                   default=1, metavar="N",
                   help="with --lg-places: run up to N cells at once, each on its own "
                        "place (default 1)")


def _set_option(text: str) -> tuple[str, Any]:
    """argparse type of --set: a bad one is one line, exit 2 (Parser.error)."""
    from irqlab.cli.scenario import parse_set

    try:
        return parse_set(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Progress:
    """Overall progress bar with ETA on stderr (stdout stays the results)."""

    def __init__(self) -> None:
        # rich and the report tables are imported when used: the parser imports this
        # module for `irqlab --help` and completion (docs/design.md, "Start-up").
        from rich.console import Console
        from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.console = Console(stderr=True, highlight=False)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            TextColumn("{task.completed:.1f}/{task.total:.0f} cells"),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                            console=self.console, transient=True)
        self.task = None
        self.base = 0

    def cell_started(self, index: int, total: int, cell: dict[str, Any]) -> None:
        if self.task is None:
            self.task = self.bar.add_task("matrix", total=total)
            self.bar.start()
        self.base = index
        self.bar.update(self.task, completed=index, description=cell_id(cell) or "run")

    def cell_progress(self, fraction: float) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=self.base + min(1.0, fraction))

    def cell_done(self, result: CellResult) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=self.base + 1)
        s = result.summary
        self.console.print(f"{cell_id(result.cell) or 'run'}: run {result.run_id} "
                           f"{result.status}, mean {s.get('mean_ns')} ns, "
                           f"max {s.get('max_ns')} ns", markup=False)

    def notice(self, text: str) -> None:
        self.console.print(text, markup=False, style="yellow")

    def close(self) -> None:
        self.bar.stop()


def table_keys(matrix: dict[str, Any]) -> list[str]:
    """The results table's key columns: a paired key ("xen_sched+xen_pcpus") is a column
    per key, as the cells hold each one."""
    return [k for key in matrix for k in key.split(PAIR_SEP)]


def load(args: argparse.Namespace) -> Any:
    """The scenario with --repeat, --set and --only applied; bad input is exit 2."""
    try:
        return load_scenario(args.file, repeat=args.repeat, max_cells=args.max_cells,
                             overrides=dict(args.overrides), only=tuple(args.only))
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    if args.parallel > 1 and args.lg_places is None:
        raise UsageError("--parallel N spreads cells over labgrid places: give "
                         "--lg-places MATCH too")
    scn = load(args)
    if scn.auto:
        from irqlab.reports.noise import MIN_RUNS
        if scn.cell_count() < 2:
            raise UsageError("repeat auto compares cells: the matrix needs two or more "
                             "(or give repeat = N)")
        if scn.repeat < MIN_RUNS:
            raise UsageError(f"max_repeat {scn.repeat} is too few for repeat auto: it "
                             f"judges from {MIN_RUNS} runs a cell")
        if args.lg_places is not None:
            raise UsageError("repeat auto runs on this host only, not over labgrid "
                             "places: give repeat = N with --lg-places")
    if args.dry_run:
        from irqlab.cli.matrix_plan import plan, render_plan

        try:
            render_plan(scn, plan(scn), args.format, sys.stdout)
        except ScenarioError as exc:         # a cell checked as it is listed
            raise UsageError(str(exc)) from None
        return EXIT_OK
    pool = None
    if args.lg_places is not None:
        from irqlab.cli.matrix_pool import Pool

        pool = Pool.from_args(args, scn)     # checks the coordinator and the places
    progress = _Progress()
    started = time.monotonic()
    try:
        with open_store(db_path(args)) as store:
            if pool is not None:
                results, interrupted = pool.run(store, progress, resume=args.resume)
            else:
                results, interrupted = run_matrix(scn, store, progress, resume=args.resume)
    except KeyboardInterrupt:
        progress.close()
        print(f"irqlab matrix: interrupted; continue with `irqlab matrix {args.file} "
              f"--resume`", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        progress.close()
    keys = table_keys(scn.matrix)
    if scn.auto:
        made = max((r.index or 0 for r in results), default=0)
        what = f"{scn.cell_count()} cells x {made} runs (repeat auto, at most {scn.repeat})"
    else:
        what = (f"{len(results)} cells" if scn.repeat == 1
                else f"{scn.cell_count()} cells x {scn.repeat} runs")
    show({"type": "matrix_results", "results": results, "keys": keys, "raw": args.raw,
          "title": f"{scn.name}: {what}, {time.monotonic() - started:.0f} s"},
         exporter_for("text" if args.format == "table" else args.format))
    if interrupted:
        print(f"irqlab matrix: interrupted; continue with `irqlab matrix {args.file} "
              f"--resume`", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if all(r.status == "ok" for r in results) else EXIT_FAIL
