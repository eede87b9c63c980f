"""``irqlab explain RUN``: who took the time of each latency spike (issue 8)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from irqlab.cli.common import EXIT_OK, UsageError, count, db_path, duration
from irqlab.cli.common import db_ref
from irqlab.cli.output import View, json_or_text, show
from irqlab.cli.render import stage_progress
from irqlab.store import open_store

NAME = "explain"


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("explain", help="attribute latency spikes to their causes from "
                                       "the run's capture (needs a run recorded with "
                                       "--trace)")
    e.add_argument("run", metavar="RUN",
                   help="run id or name; a selector of several runs (series:ID, "
                        "series:NAME, tag:KEY=VALUE, suite:NAME) explains the latest of "
                        "them recorded with a capture")
    pick = e.add_mutually_exclusive_group()
    pick.add_argument("--top", type=count, default=None, metavar="N",
                      help="explain the N largest latencies")
    pick.add_argument("--sample", type=count, default=None, metavar="SEQ",
                      help="explain one sample by sequence number")
    pick.add_argument("--spike", type=count, default=None, metavar="SEQ",
                      help="explain sample SEQ from the trace window a flight recorder "
                           "kept around it (--trace --on-threshold)")
    e.add_argument("--threshold", type=duration, default=None, metavar="DUR",
                   help="explain samples above DUR (default: the run's threshold)")
    e.add_argument("--perfetto", type=Path, default=None, metavar="FILE",
                   help="write a Perfetto trace (native protobuf, .pftrace): host events "
                        "on CPU tracks, samples, spikes with their stages, attribution")
    e.add_argument("--chrome-json", type=Path, default=None, metavar="FILE",
                   help="write samples, stages and causes as Chrome trace JSON (legacy; "
                        "Perfetto reads it best-effort)")
    e.add_argument("--text", type=Path, default=None, metavar="FILE",
                   help="write the whole capture as ftrace text (comm-pid [cpu] "
                        "secs.nsecs: event: fields), as trace-cmd report prints and "
                        "Perfetto imports")
    e.add_argument("--dat", type=Path, default=None, metavar="FILE",
                   help="write the whole capture as a trace-cmd trace.dat (version 6) "
                        "for trace-cmd report and KernelShark")
    e.add_argument("--db", type=db_ref, default=None, help="database file")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.add_argument("--all", action="store_true",
                   help="print every explained sample (default: the 10 worst)")
    e.add_argument("--wide", action="store_true",
                   help="print long lines whole (default: wrapped at 120 columns)")


# The file outputs: (option, its dest, which is also its key in the JSON object).
OUTPUTS = (("--dat", "dat"), ("--text", "text"), ("--perfetto", "perfetto"),
           ("--chrome-json", "chrome_json"))


def run(args: argparse.Namespace) -> int:
    from irqlab.explain.registry import EXPLAINERS, explainer_for
    from irqlab.explain.spikes import spike_capture
    from irqlab.explain.report import WIDTH
    from irqlab.explain.seam import Request

    if args.top == 0:
        raise UsageError("--top must be at least 1")
    _check_output_paths(args)
    asked = [(opt, dest) for opt, dest in OUTPUTS if getattr(args, dest)]
    files: dict[str, dict[str, Any]] = {}
    with stage_progress(args) as progress:
        with open_store(db_path(args), read_only=True) as store:
            capture = None
            if args.spike is not None:
                run = store.resolve(args.run)
                capture, kind = spike_capture(store.path, run.run_id, args.spike)
                explainer = EXPLAINERS[kind]
            else:
                run = traced_run(store, args.run)
                explainer = explainer_for(run)
            for opt, dest in asked:
                if dest not in explainer.outputs:
                    raise UsageError(f"{opt} is not written for this capture: "
                                     f"{explainer.outputs_hint(run)}")
            request = Request(args.threshold, args.top,
                              args.spike if capture is not None else args.sample,
                              frozenset(dest for _opt, dest in asked), capture)
            res = explainer.explain(store, run, request, progress)
        for _opt, dest in asked:
            path = getattr(args, dest)
            files[dest] = _writing(path, lambda: res.writers[dest](path, progress))
    # The explain object with the files written (text: their lines after it).
    show({**res.js, **files},
         json_or_text(args, View(show_all=args.all, width=None if args.wide else WIDTH)))
    return EXIT_OK


def traced_run(store: Any, ref: str) -> Any:
    """The run ``ref`` names; a selector of several runs (series:NAME ...) names the
    latest of them recorded with a capture (the one selector resolver of show/compare)."""
    from irqlab.explain.registry import capture_kind
    from irqlab.reports.select import select_runs

    rows = select_runs(store, [ref])
    if len(rows) == 1:
        return rows[0]
    traced = [r for r in rows if capture_kind(r) is not None]
    if not traced:
        raise UsageError(f"none of the {len(rows)} runs of {ref} was recorded with a "
                         f"capture: record one with `irqlab run --trace`, or name a run "
                         f"by id")
    return max(traced, key=lambda r: r.run_id)


def _check_output_paths(args: argparse.Namespace) -> None:
    """Checked before explaining, which can take minutes on a large capture, so a typo
    in an output path fails at once."""
    given = [(opt, getattr(args, dest)) for opt, dest in OUTPUTS if getattr(args, dest)]
    for opt, path in given:
        if path.is_dir():
            raise UsageError(f"{opt} {path} is a directory: give a file name, "
                             f"e.g. {path / 'trace'}")
        if not path.parent.is_dir():
            raise UsageError(f"{opt} {path}: directory {path.parent} does not exist; "
                             f"create it or choose another path")
    for i, (opt, path) in enumerate(given):
        for opt2, path2 in given[i + 1:]:
            if path.resolve() == path2.resolve():
                raise UsageError(f"{opt} and {opt2} both name {path}: give two different "
                                 f"files")


def _writing(path: Path, write: Any) -> Any:
    try:
        return write()
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}; choose another path") \
            from exc
