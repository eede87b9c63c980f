"""``irqlab report RUN... -o report.html``: a self-contained HTML report with plots."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from irqlab.cli.cmd_compare import add_run_args
from irqlab.stats.fields import METRICS
from irqlab.cli.common import EXIT_OK, UsageError, db_path
from irqlab.cli.output import json_or_text, show
from irqlab.cli.render import stage_progress
from irqlab.reports.select import select_runs
from irqlab.store import open_store

REPORT_VERSION = 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write an HTML report (and/or plot files) of runs",
                       description="One self-contained HTML file (no network, images "
                                   "inline): metadata, windows, histogram, exceedance "
                                   "curve, latency over time; several runs add a "
                                   "comparison and overlaid CDFs.")
    add_run_args(p)
    p.add_argument("-o", "--output", type=Path, default=None, help="HTML file to write")
    p.add_argument("--png", type=Path, default=None, metavar="DIR",
                   help="also write every plot as DIR/<name>.png")
    p.add_argument("--svg", type=Path, default=None, metavar="DIR",
                   help="also write every plot as DIR/<name>.svg")
    p.add_argument("--title", default=None, help="report title")
    p.add_argument("--no-explain", action="store_true",
                   help="leave out 'Where the time goes' (by default runs recorded with "
                        "--trace are explained from their capture, as `irqlab explain`)")
    p.add_argument("--per-cpu", action="store_true",
                   help="a per-CPU table and the CPUs' CDF/exceedance curves overlaid in "
                        "each run's section (runs with per-CPU samples: native, "
                        "multi-vCPU linux-guest)")
    p.add_argument("--json", action="store_true", help="print a JSON line of what was written")


def _no_parent(path: Path) -> str:
    """The error of an output whose directory does not exist. Not made for the user (as
    root, `-o /nonexistent/x.html` made /nonexistent): a typo in a directory is the
    user's to see (issue 47)."""
    return (f"{path.parent} does not exist: create it first, or give -o a path in an "
            f"existing directory")


class _WriteError(Exception):
    """Writing one output failed; the message names the file the user asked for."""


def _write(path: Path, data: bytes | str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file; on any
    failure the temporary file is removed and the error names ``path``."""
    if path.is_dir():
        raise _WriteError(f"{path} is a directory: give a file name, e.g. "
                          f"{path / 'report.html'}")
    if not path.parent.is_dir():
        raise _WriteError(_no_parent(path))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise _WriteError(f"cannot write {path}: {exc.strerror or exc}; choose another "
                          f"path") from None


def _explain(store: Any, runs: list[Any], args: argparse.Namespace,
             progress: Any) -> dict[int, dict[str, Any] | str]:
    """The explain object of every run recorded with a capture (--trace), or why it could
    not be explained: the report says so rather than failing."""
    from irqlab.explain.registry import capture_kind, explain_json
    from irqlab.store import StoreError

    out: dict[int, dict[str, Any] | str] = {}
    if args.no_explain:
        return out
    for run in runs:
        if capture_kind(run.row) is None:
            continue
        progress.stage(f"explaining run {run.run_id} from its capture")
        try:
            out[run.run_id] = explain_json(store, run.row, args.threshold)
        except (StoreError, OSError, ValueError) as exc:
            out[run.run_id] = str(exc)
    return out


def run(args: argparse.Namespace) -> int:
    from irqlab.reports.data import load_runs   # numpy, the store: not at parse time

    if args.output is None and args.png is None and args.svg is None:
        raise UsageError("nothing to write: pass -o report.html, --png DIR or --svg DIR")
    # Refused before any work: an output that is a directory, plot folders that are files.
    if args.output is not None and args.output.is_dir():
        raise UsageError(f"-o {args.output} is a directory: give a file name, e.g. "
                         f"-o {args.output / 'report.html'}")
    if args.output is not None and not args.output.parent.is_dir():
        raise UsageError(_no_parent(args.output))
    for opt, folder in (("--png", args.png), ("--svg", args.svg)):
        if folder is not None and folder.exists() and not folder.is_dir():
            raise UsageError(f"{opt} {folder} is a file: give a directory")
        # The folder itself is made (it is what was asked for); a missing parent is a
        # typo to see, not to create (issue 47).
        if folder is not None and not folder.parent.is_dir():
            raise UsageError(f"{folder.parent} does not exist: create it first, or give "
                             f"{opt} a folder in an existing directory")
    started = time.monotonic()
    # Imported here: matplotlib takes ~0.5 s to import, other commands need not pay it.
    from irqlab.reports.html import build_report
    progress = stage_progress(args)     # plots, on a terminal only
    try:
        # The store stays open while plotting: big runs' samples are read from it.
        with open_store(db_path(args), read_only=True) as store:
            runs = load_runs(store, select_runs(store, args.runs, series_names=True),
                             metric=args.metric)
            explained = _explain(store, runs, args, progress)
            progress.stage(f"plotting {len(runs)} run(s)")
            title = args.title
            if args.metric != "total":
                title = f"{title or 'irqlab report'}: {METRICS[args.metric]}"
            text, plots = build_report(runs, args.threshold, title, explained,
                                       per_cpu=args.per_cpu)
        written: list[str] = []
        for folder, ext in ((args.png, "png"), (args.svg, "svg")):
            if folder is None:
                continue
            progress.stage(f"writing {ext.upper()} plots", total=len(plots))
            try:
                folder.mkdir(exist_ok=True)
            except OSError as exc:
                raise _WriteError(f"cannot make {folder}: {exc.strerror or exc}; choose "
                                  f"another folder") from None
            for i, plot in enumerate(plots):
                target = folder / f"{plot.name}.{ext}"
                _write(target, plot.png() if ext == "png" else plot.svg())
                written.append(str(target))
                progress.update(i + 1)
        size = 0
        if args.output is not None:
            _write(args.output, text)
            size = len(text.encode("utf-8"))
    except _WriteError as exc:
        raise UsageError(str(exc)) from None
    finally:
        progress.close()
    show({"type": "report", "version": REPORT_VERSION,
          "path": str(args.output) if args.output else None,
          "bytes": size, "plots": len(plots), "runs": [r.run_id for r in runs],
          "plot_files": written, "seconds": round(time.monotonic() - started, 3)},
         json_or_text(args))
    return EXIT_OK
