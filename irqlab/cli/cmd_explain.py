"""``irqlab explain RUN``: who took the time of each latency spike (issue 8)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irqlab.cli.common import EXIT_OK, UsageError, count, db_path, duration
from irqlab.store import Store

if TYPE_CHECKING:
    from irqlab.explain.run import Explained

NAME = "explain"


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("explain", help="attribute latency spikes to host-side causes "
                                       "(needs a run recorded with --trace)")
    e.add_argument("run", metavar="RUN", help="run id or name")
    pick = e.add_mutually_exclusive_group()
    pick.add_argument("--top", type=count, default=None, metavar="N",
                      help="explain the N largest latencies")
    pick.add_argument("--sample", type=count, default=None, metavar="SEQ",
                      help="explain one sample by sequence number")
    e.add_argument("--threshold", type=duration, default=None, metavar="DUR",
                   help="explain samples above DUR (default: the run's threshold)")
    e.add_argument("--perfetto", type=Path, default=None, metavar="FILE",
                   help="write samples, stages and causes as Chrome/Perfetto JSON")
    e.add_argument("--text", type=Path, default=None, metavar="FILE",
                   help="write the whole capture as text (ftrace-like lines)")
    e.add_argument("--dat", type=Path, default=None, metavar="FILE",
                   help="write the whole capture as a trace-cmd trace.dat (version 6) "
                        "for trace-cmd report and KernelShark")
    e.add_argument("--db", type=Path, default=None, help="database file")
    e.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from irqlab.explain.report import render_text
    from irqlab.explain.run import as_json, capture_path, explain_run

    if args.top == 0:
        raise UsageError("--top must be at least 1")
    if args.dat:
        _check_dat_path(args.dat, args.text)
    with Store(db_path(args), read_only=True) as store:
        res = explain_run(store, args.run, threshold_ns=args.threshold, top=args.top,
                          sample=args.sample)
        dat = _write_dat(args.dat, res, capture_path(store, res.run)) if args.dat else None
    if args.perfetto:
        from irqlab.explain.perfetto import write_perfetto
        write_perfetto(res, args.perfetto)
    if args.text:
        from irqlab.explain.export import write_text
        write_text(res.trace, args.text)
    if args.json:
        out = as_json(res)
        if dat is not None:
            out["dat"] = dat
        print(json.dumps(out))
    else:
        print(render_text(res))
        if dat is not None:
            print(f"wrote {dat['file']}: trace.dat v6, {dat['events']} events, "
                  f"{dat['pages']} pages, {dat['bytes']} bytes")
    return EXIT_OK


def _check_dat_path(path: Path, text: Path | None) -> None:
    """Checked before explaining, which can take minutes on a large capture, so a typo
    in the output path fails at once."""
    if path.is_dir():
        raise UsageError(f"--dat {path} is a directory: give a file name, "
                         f"e.g. {path / 'trace.dat'}")
    if not path.parent.is_dir():
        raise UsageError(f"--dat {path}: directory {path.parent} does not exist; "
                         f"create it or choose another path")
    if text is not None and path.resolve() == text.resolve():
        raise UsageError(f"--dat and --text both name {path}: give two different files")


def _write_dat(path: Path, res: Explained, capture: Path) -> dict[str, Any]:
    """The run's capture as trace.dat. The pages are read again from the capture (explain
    keeps only decoded columns); the task names come from the decoded context switches,
    so trace-cmd shows ``comm-pid`` rather than ``<...>``."""
    from irqlab.trace.archive import read_archive
    from irqlab.trace.tracedat import cmdlines_from_switches, write_capture_tracedat

    header, per_cpu = read_archive(capture)
    cmdlines = cmdlines_from_switches(res.trace.t("sched_switch").cols,
                                      header.get("vmm_threads"))
    try:
        nbytes = write_capture_tracedat(path, header, per_cpu, cmdlines)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}; choose another path") \
            from exc
    return {"file": str(path), "events": res.trace.events, "pages": res.trace.pages,
            "bytes": nbytes}
