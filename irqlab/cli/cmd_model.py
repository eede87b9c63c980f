"""``irqlab model rtds --period P --budget B [--handler C] [--json]``: analytic bounds.

The figures measured runs are compared against (irqlab.models); no run, no store.
"""

from __future__ import annotations

import argparse

from irqlab.cli.common import EXIT_OK, UsageError, duration
from irqlab.cli.output import json_or_text, show
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
    show(b.as_dict(), json_or_text(args))
    return EXIT_OK
