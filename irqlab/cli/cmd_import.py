"""``irqlab import FORMAT FILE…``: other tools' results as stored runs."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from irqlab.cli.common import EXIT_OK, UsageError, add_db_json, db_path
from irqlab.cli.output import json_or_text, show
from irqlab.cli.render import file_size, stage_progress
from irqlab.importers import (AUTO, FORMATS, ImportFormatError, ParseOptions, sniff,
                              stream_file)
from irqlab.importers.base import SNIFF_BYTES, STDIN, TextSource
from irqlab.importers.validate import MAX_TICK_HZ
from irqlab.store import open_store


def _tag(text: str) -> tuple[str, str]:
    key, sep, val = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, val


def _positive(text: str) -> int:
    """A whole number 1 .. MAX_TICK_HZ in ASCII digits (1e30, '١', 10^30 refused)."""
    t = text.strip()
    shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "…"
    if not (t.isascii() and t.isdigit()):
        raise argparse.ArgumentTypeError(f"{shown} is not a whole number: write digits "
                                         f"0-9, e.g. 2000000000")
    val = int(t) if len(t) <= 19 else MAX_TICK_HZ + 1
    if not 1 <= val <= MAX_TICK_HZ:
        raise argparse.ArgumentTypeError(f"{shown} is out of range: use 1-{MAX_TICK_HZ}")
    return val


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import other tools' results as runs",
                       description="Formats: " + "; ".join(
                           f"{n}: {f.description}" for n, f in FORMATS.items())
                       + "; auto: sniff each file and say which format was chosen.")
    p.add_argument("format", metavar="FORMAT", choices=[*FORMATS, AUTO],
                   help=f"one of {', '.join([*FORMATS, AUTO])}")
    p.add_argument("files", metavar="FILE", nargs="+", type=Path,
                   help="a regular file, or - for standard input (a pipe; read as it "
                        "comes)")
    p.add_argument("--name", default=None, help="run name (default: the file name; "
                   "several runs of one file get the source's label or #N)")
    p.add_argument("--tag", type=_tag, action="append", default=[], metavar="KEY=VALUE",
                   help="tag every imported run (repeatable)")
    p.add_argument("--tick-hz", type=_positive, default=None, metavar="HZ",
                   help="counter rate of raw tick samples when the log does not state it")
    p.add_argument("--window-samples", type=_positive, default=None, metavar="N",
                   help="samples per rt_eval window (default: the app's 1024)")
    p.add_argument("--skip-bad", action="store_true",
                   help="import the good lines of a file and report the bad ones")
    p.add_argument("--xentrace", type=Path, default=None, metavar="FILE",
                   help="irqlab-console only: the xentrace file dom0 recorded during the "
                        "probe's run (a board's `xentrace -D -e all FILE`), kept with the "
                        "run so that `irqlab explain` explains it (docs/arm64.md, Boards)")
    p.add_argument("--xen-domid", type=_positive, default=None, metavar="N",
                   help="with --xentrace: the probe's domain id (default 1: the first "
                        "domU)")
    add_db_json(p)


def _choose(fmt: str, source: TextSource) -> tuple[str, bool]:
    if fmt != AUTO:
        return fmt, False
    found = sniff(source.head(SNIFF_BYTES))     # kept: the parser reads it again
    if found is None:
        raise ImportFormatError(source.name, None, "output of one of: " + ", ".join(FORMATS)
                                + " (none matched; name the FORMAT explicitly)")
    return found[0], True


XENTRACE_FORMAT = "irqlab-console"
DEFAULT_PROBE_DOMID = 1


def _check_xentrace(args: argparse.Namespace) -> None:
    """--xentrace goes with one probe console log; refused before anything is read."""
    if args.xentrace is None:
        if args.xen_domid is not None:
            raise UsageError("--xen-domid goes with --xentrace FILE (the probe's domain in "
                             "that trace)")
        return
    if args.format not in (XENTRACE_FORMAT, AUTO) or len(args.files) != 1:
        raise UsageError(f"--xentrace goes with one {XENTRACE_FORMAT} log (the probe's "
                         f"console from the same run): `irqlab import {XENTRACE_FORMAT} "
                         f"console.log --xentrace trace.bin`")
    if not args.xentrace.exists():
        raise UsageError(f"--xentrace {args.xentrace}: no such file (the file dom0's "
                         f"xentrace wrote)")
    if not args.xentrace.is_file():
        raise UsageError(f"--xentrace {args.xentrace}: not a regular file (a FIFO, device "
                         f"or directory): save the trace to a file first")
    from irqlab.xen.capture import check_xentrace_file
    from irqlab.xen.records import TraceFormatError
    try:
        check_xentrace_file(args.xentrace)    # before anything is stored
    except (TraceFormatError, OSError, ValueError) as exc:
        raise UsageError(f"--xentrace {args.xentrace}: {exc}") from None


def _attach_xentrace(args: argparse.Namespace, store: Any, stored: list[Any],
                     fmt: str) -> dict[str, Any]:
    """Keep --xentrace as the imported run's capture and say so in its metadata."""
    from irqlab.xen.capture import import_xentrace
    from irqlab.xen.records import TraceFormatError
    if fmt != XENTRACE_FORMAT or len(stored) != 1:
        raise UsageError(f"--xentrace goes with a {XENTRACE_FORMAT} log of one run "
                         f"({args.files[0]} is {fmt}, {len(stored)} runs)")
    run = store.resolve(str(stored[0].run_id))
    try:
        meta = import_xentrace(args.xentrace, db_path(args), run.run_id, int(run.tick_hz))
    except (TraceFormatError, OSError, ValueError) as exc:
        raise UsageError(f"--xentrace {args.xentrace}: {exc}") from None
    domid = args.xen_domid or DEFAULT_PROBE_DOMID
    metadata = dict(run.metadata or {})
    metadata["hooks"] = {**(metadata.get("hooks") or {}), "xentrace": meta}
    metadata["xen"] = {"dom0": {"domu": {"domid": str(domid)}}, "imported": True}
    store.update_run(run.run_id, metadata=metadata)
    return {"file": meta["file"], "records": meta["records"], "domid": domid}


def run(args: argparse.Namespace) -> int:
    _check_xentrace(args)
    if sum(str(p) == STDIN for p in args.files) > 1:
        raise UsageError("- (standard input) can be given once")
    with contextlib.ExitStack() as inputs:
        return _import(args, inputs)


def _import(args: argparse.Namespace, inputs: contextlib.ExitStack) -> int:
    """Read every file (each kept open: streamed samples are read while stored), store.
    The store's side (DuckDB, Arrow: a second of imports on a busy host) loads once the
    files were found readable: a bad input is refused before it."""
    options = ParseOptions(tick_hz=args.tick_hz, skip_bad=args.skip_bad,
                           window_samples=args.window_samples)
    files: list[dict[str, Any]] = []
    batches: list[list[Any]] = []
    progress = stage_progress(args)     # bytes read, on a terminal only
    progress.stage("reading", total=sum(file_size(p) for p in args.files), unit="bytes")
    done = 0
    try:
        for path in args.files:
            source = inputs.enter_context(TextSource(path))
            fmt, sniffed = _choose(args.format, source)
            # Raw-sample logs stream: their samples are read while they are stored.
            result = stream_file(fmt, source, options)
            done += file_size(path)
            progress.update(done, f"read {path.name}")
            batches.append(result.runs)
            files.append({"file": str(path), "format": fmt, "sniffed": sniffed,
                          "result": result})
    except ImportFormatError as exc:
        progress.close()
        raise UsageError(str(exc)) from None
    from irqlab.importers.ingest import run_names, store_runs
    named = [(runs, run_names(runs, args.name)) for runs in batches]
    progress.stage(f"storing {sum(len(r) for r in batches)} run(s)")
    params = {"format": args.format, "files": [str(p) for p in args.files],
              "skip_bad": args.skip_bad, "tick_hz": args.tick_hz,
              "window_samples": args.window_samples}
    with open_store(db_path(args)) as store:
        try:
            stored = store_runs(store, named, dict(args.tag), params)
        except ImportFormatError as exc:
            raise UsageError(str(exc)) from None
        finally:
            progress.close()
        trace = (_attach_xentrace(args, store, stored, files[0]["format"])
                 if args.xentrace is not None else None)
    out = json_or_text(args)
    k = 0
    for info, runs in zip(files, batches):
        # Skipped lines are all known now: streamed files were read while storing.
        result = info.pop("result")
        info["skipped"] = len(result.skipped)
        info["skipped_lines"] = [str(e) for e in result.skipped]
        mine = stored[k:k + len(runs)]
        k += len(runs)
        info["runs"] = [{"run_id": s.run_id, "name": s.name, "kind": s.summary["kind"],
                         "windows": s.windows, "series": s.series,
                         "samples_stored": s.samples_stored,
                         "samples": s.summary.get("samples")} for s in mine]
        if trace is not None:
            info["xentrace"] = trace
        show({"type": "import", **info}, out)
    return EXIT_OK

