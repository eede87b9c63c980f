"""``irqlab report RUN... -o report.html``: a self-contained HTML report with plots."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from irqlab.cli.cmd_compare import add_run_args
from irqlab.cli.common import EXIT_OK, UsageError, db_path, renderer
from irqlab.reports.data import load_runs
from irqlab.reports.select import select_runs
from irqlab.store import Store

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
    p.add_argument("--json", action="store_true", help="print a JSON line of what was written")


def _write(path: Path, data: bytes | str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    tmp.replace(path)


def run(args: argparse.Namespace) -> int:
    if args.output is None and args.png is None and args.svg is None:
        raise UsageError("nothing to write: pass -o report.html, --png DIR or --svg DIR")
    started = time.monotonic()
    with Store(db_path(args), read_only=True) as store:
        runs = load_runs(store, select_runs(store, args.runs))
    # Imported here: matplotlib takes ~0.5 s to import, other commands need not pay it.
    from irqlab.reports.html import build_report
    try:
        text, plots = build_report(runs, args.threshold, args.title)
        written: list[str] = []
        for folder, ext in ((args.png, "png"), (args.svg, "svg")):
            if folder is None:
                continue
            for plot in plots:
                target = folder / f"{plot.name}.{ext}"
                _write(target, plot.png() if ext == "png" else plot.svg())
                written.append(str(target))
        size = 0
        if args.output is not None:
            _write(args.output, text)
            size = len(text.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror}; choose another "
                         f"path") from exc
    renderer(args).report({"type": "report", "version": REPORT_VERSION,
                           "path": str(args.output) if args.output else None,
                           "bytes": size, "plots": len(plots),
                           "runs": [r.run_id for r in runs], "plot_files": written,
                           "seconds": round(time.monotonic() - started, 3)})
    return EXIT_OK
