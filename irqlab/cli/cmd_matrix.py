"""``irqlab matrix FILE``: run a scenario's cells, then print the results table."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.table import Table

from irqlab.cli.common import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError, db_path
from irqlab.cli.matrix import SUMMARY_COLUMNS, CellResult, run_matrix
from irqlab.cli.scenario import ScenarioError, cell_id, load_scenario, value_text
from irqlab.store import Store

FORMATS = ("table", "markdown", "csv", "json")


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("matrix", help="run every cell of a scenario file (TOML) and "
                                      "tabulate the results")
    m.add_argument("file", type=Path, help="scenario file (see scenarios/ and docs/formats.md)")
    m.add_argument("--db", type=Path, default=None, help="database file (default as irqlab run)")
    m.add_argument("--format", default="table", choices=FORMATS,
                   help="results as a terminal table (default), markdown, csv or JSON lines")
    m.add_argument("--resume", action="store_true",
                   help="skip cells this scenario already completed in the database")


class _Progress:
    """Overall progress bar with ETA on stderr (stdout stays the results)."""

    def __init__(self) -> None:
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


def _header(keys: list[str]) -> list[str]:
    return [k.upper() for k in keys] + ["RUN", "STATUS"] + [c for c, _ in SUMMARY_COLUMNS]


def _cells(res: CellResult, keys: list[str]) -> list[str]:
    s = res.summary
    vals = [value_text(res.cell.get(k, "")) for k in keys]
    vals += [str(res.run_id), res.status + (" (resumed)" if res.resumed else "")]
    vals += ["—" if s.get(key) is None else str(s[key]) for _c, key in SUMMARY_COLUMNS]
    return vals


def render(results: list[CellResult], keys: list[str], fmt: str, title: str,
           out=None) -> None:
    out = out or sys.stdout
    if fmt == "json":
        for res in results:
            out.write(json.dumps(res.row(), default=str) + "\n")
        return
    header, rows = _header(keys), [_cells(r, keys) for r in results]
    notes = [f"{cell_id(r.cell)}: {n}" for r in results for n in r.notes]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
        out.write(buf.getvalue())
        return
    if fmt == "markdown":
        out.write(f"### {title}\n\nlatencies in ns\n\n")
        out.write("| " + " | ".join(header) + " |\n")
        out.write("|" + "|".join("---" if i < len(keys) + 2 else "---:"
                                 for i in range(len(header))) + "|\n")
        for row in rows:
            out.write("| " + " | ".join(row) + " |\n")
        for n in notes:
            out.write(f"\n- {n}")
        out.write("\n" if notes else "")
        return
    table = Table(title=f"{title} (latencies in ns)")
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i < len(keys) + 2 else "right")
    for row in rows:
        table.add_row(*row)
    console = Console(file=out, highlight=False, soft_wrap=False, width=200)
    console.print(table)
    for n in notes:
        console.print(f"note: {n}", markup=False)


def run(args: argparse.Namespace) -> int:
    try:
        scn = load_scenario(args.file)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None
    progress = _Progress()
    started = time.monotonic()
    try:
        with Store(db_path(args)) as store:
            results, interrupted = run_matrix(scn, store, progress, resume=args.resume)
    except KeyboardInterrupt:
        progress.close()
        print(f"irqlab matrix: interrupted; continue with `irqlab matrix {args.file} "
              f"--resume`", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        progress.close()
    keys = list(scn.matrix)
    render(results, keys, args.format, f"{scn.name}: {len(results)} cells, "
                                       f"{time.monotonic() - started:.0f} s")
    if interrupted:
        print(f"irqlab matrix: interrupted; continue with `irqlab matrix {args.file} "
              f"--resume`", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if all(r.status == "ok" for r in results) else EXIT_FAIL
