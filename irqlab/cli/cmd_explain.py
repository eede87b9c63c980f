"""``irqlab explain RUN``: who took the time of each latency spike (issue 8)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from irqlab.cli.common import EXIT_OK, UsageError, count, db_path, duration
from irqlab.store import Store

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
    e.add_argument("--db", type=Path, default=None, help="database file")
    e.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from irqlab.explain.report import render_text
    from irqlab.explain.run import as_json, explain_run

    if args.top == 0:
        raise UsageError("--top must be at least 1")
    with Store(db_path(args), read_only=True) as store:
        res = explain_run(store, args.run, threshold_ns=args.threshold, top=args.top,
                          sample=args.sample)
    if args.perfetto:
        from irqlab.explain.perfetto import write_perfetto
        write_perfetto(res, args.perfetto)
    if args.text:
        from irqlab.explain.export import write_text
        write_text(res.trace, args.text)
    if args.json:
        print(json.dumps(as_json(res)))
    else:
        print(render_text(res))
    return EXIT_OK
