"""``irqlab xentrace FILE [--tsc-hz HZ] [--json]``: runstate times and hypercall counts
per domain and vCPU of any xentrace file, counted as ``xenalyze --summary`` counts them
(irqlab.xen.summary; issue 15)."""

from __future__ import annotations

import argparse
from pathlib import Path

from irqlab.cli.common import EXIT_OK, UsageError
from irqlab.cli.render import json_line

NAME = "xentrace"


def register(sub: argparse._SubParsersAction) -> None:
    x = sub.add_parser("xentrace", help="per-vCPU runstates and hypercalls of a xentrace "
                                        "file (as xenalyze --summary counts them)",
                       description="Runstate times and hypercall counts per domain and vCPU "
                                   "of a xentrace file: one a run recorded with --trace "
                                   "(<db>.traces/run-N.xentrace.gz), or a plain one as "
                                   "xentrace writes it (gzipped or not).")
    x.add_argument("file", type=Path, metavar="FILE", help="xentrace file")
    x.add_argument("--tsc-hz", type=_hz, default=None, metavar="HZ",
                   help="the records' cycle rate (default: the capture's own; needed for "
                        "a plain file: xl info's cpu_mhz x 1000000)")
    x.add_argument("--json", action="store_true",
                   help="JSON lines: runstate and hypercall lines (docs/formats.md §4)")


def _hz(text: str) -> int:
    try:
        hz = int(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate in Hz, e.g. 2596148000")
    if hz <= 0:
        raise argparse.ArgumentTypeError("the rate must be more than 0 Hz")
    return hz


def run(args: argparse.Namespace) -> int:
    from irqlab.xen.capture import read_xentrace
    from irqlab.xen.records import TraceFormatError
    from irqlab.xen.summary import summarize_data

    path: Path = args.file
    if not path.is_file():
        raise UsageError(f"{path}: no such file; give a xentrace file (e.g. "
                         f"<db>.traces/run-N.xentrace.gz)")
    try:
        header, data = read_xentrace(path, mapped=True)
    except (OSError, EOFError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read it ({exc}); give a xentrace file") from None
    hz = args.tsc_hz or (header or {}).get("tsc_hz")
    if not hz:
        raise UsageError(f"{path} does not say its cycle rate (a plain xentrace file): "
                         f"give --tsc-hz HZ (xl info's cpu_mhz x 1000000)")
    try:
        summary = summarize_data(data)
    except (TraceFormatError, ValueError) as exc:
        raise UsageError(f"{path} is not a xentrace file ({exc})") from None
    if summary.first_tsc is None:
        raise UsageError(f"{path} has no timed xentrace record: not a xentrace file, or "
                         f"an empty capture")
    lines = summary.lines(int(hz))
    if args.json:
        for line in lines:
            print(json_line(line))
        return EXIT_OK
    span_s = (summary.last_tsc - summary.first_tsc) / hz
    print(f"{path}: {summary.records:,} records, {span_s:.3f} s at {hz / 1e6:.3f} MHz, "
          f"pCPUs {','.join(map(str, summary.cpus))}, {summary.lost_records} lost records")
    print()
    print(f"{'vCPU':<10} {'state':<9} {'count':>8} {'total':>12} {'mean':>12}")
    for ln in (x for x in lines if x["type"] == "runstate" and x["count"]):
        mean = ln["total_ns"] / ln["count"] / 1e3
        print(f"{_vcpu(ln):<10} {ln['state']:<9} {ln['count']:>8} "
              f"{ln['total_ns'] / 1e6:>9.3f} ms {mean:>9.1f} us")
    calls = [x for x in lines if x["type"] == "hypercall"]
    if calls:
        print()
        print(f"{'vCPU':<10} {'hypercall':<30} {'count':>8}")
        for ln in calls:
            print(f"{_vcpu(ln):<10} {ln['name']:<30} {ln['count']:>8}")
    return EXIT_OK


def _vcpu(line: dict) -> str:
    dom = "idle" if line["domain"] == 32767 else f"d{line['domain']}"
    return f"{dom}v{line['vcpu']}"
