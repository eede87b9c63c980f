"""``irqlab model rtds --period P --budget B [--handler C] [--json]``: analytic bounds.

The figures measured runs are compared against (irqlab.models); no run, no store.
"""

from __future__ import annotations

import argparse
import json

from irqlab.cli.common import EXIT_OK, UsageError, duration
from irqlab.durations import format_ns
from irqlab.models.rtds import SOURCE, rtds_bound


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="analytic latency bounds (e.g. Xen RTDS: 2(P-B))",
                       description="Analytic worst cases to hold measured runs against.")
    models = p.add_subparsers(dest="model", required=True)
    r = models.add_parser("rtds", help="worst-case wait of an RTDS vCPU (periodic server)",
                          description="Worst-case wait of a periodic server with period P "
                                      "and budget B: 2(P-B) (" + SOURCE + ").")
    r.add_argument("--period", type=duration, required=True, help="RTDS period, e.g. 10ms")
    r.add_argument("--budget", type=duration, required=True, help="RTDS budget, e.g. 4ms")
    r.add_argument("--handler", type=duration, default=None, metavar="DURATION",
                   help="CPU time the interrupt's handler needs: adds its response bound")
    r.add_argument("--json", action="store_true", help="print one JSON line")


def run(args: argparse.Namespace) -> int:
    try:
        b = rtds_bound(args.period, args.budget, args.handler)
    except ValueError as exc:
        raise UsageError(f"model rtds: {exc}") from None
    if args.json:
        print(json.dumps(b.as_dict()))
        return EXIT_OK
    print(f"RTDS periodic server: period {format_ns(b.period_ns)}, budget "
          f"{format_ns(b.budget_ns)}, bandwidth {b.bandwidth:.1%} of one pCPU")
    print(f"worst-case wait before the vCPU runs: 2(P-B) = {format_ns(b.bound_ns)}")
    if b.handler_ns is not None:
        print(f"handler of {format_ns(b.handler_ns)} done within "
              f"{format_ns(b.response_bound_ns)} ({b.periods_for_handler} budget(s))")
    print(f"source: {SOURCE}")
    return EXIT_OK
