"""``irqlab xentrace FILE [--tsc-hz HZ] [--json]``: runstate times and hypercall counts
per domain and vCPU of any xentrace file, counted as ``xenalyze --summary`` counts them
(irqlab.xen.summary; issue 15)."""

from __future__ import annotations

import argparse
import math
import stat
from pathlib import Path

from irqlab.cli.common import EXIT_OK, UsageError
from irqlab.cli.output import json_or_text, show

NAME = "xentrace"
USAGE = ("%(prog)s [-h] [--json] [--tsc-hz HZ] CAPTURE   (a run's capture: its rate is "
         "recorded)\n       %(prog)s [-h] [--json] --tsc-hz HZ FILE      (a plain xentrace "
         "file: --tsc-hz required)")


def register(sub: argparse._SubParsersAction) -> None:
    x = sub.add_parser("xentrace", help="per-vCPU runstates and hypercalls of a xentrace "
                                        "file (as xenalyze --summary counts them)",
                       # Two forms: xentrace's own files carry no cycle rate (xenalyze
                       # needs --cpu-hz for them too), so there --tsc-hz is required.
                       usage=USAGE,
                       description="Runstate times and hypercall counts per domain and vCPU "
                                   "of a xentrace file: one a run recorded with --trace "
                                   "(<db>.traces/run-N.xentrace.gz), or a plain one as "
                                   "xentrace writes it (gzipped or not).")
    x.add_argument("file", type=Path, metavar="FILE",
                   help="xentrace file: a run's capture (<db>.traces/run-N.xentrace.gz, "
                        "which records its cycle rate) or a plain one as xentrace writes "
                        "it (which does not: give --tsc-hz)")
    x.add_argument("--tsc-hz", type=_hz, default=None, metavar="HZ",
                   help="the records' cycle rate: required for a plain xentrace file "
                        "(xl info's cpu_mhz x 1000000); a run's capture has its own, "
                        "which this overrides")
    x.add_argument("--json", action="store_true",
                   help="JSON lines: runstate and hypercall lines (docs/formats.md §4)")


# Cycle counters run at MHz to GHz rates (Arm's generic timer from 1 MHz, x86 TSCs at a
# few GHz); outside this range a rate is a typo, and 1e400 or inf would not even be a
# number to divide by.
MIN_HZ, MAX_HZ = 1_000, 10**12
# Records checked for plausibility (irqlab.xen.index.check_plausible): the head of the
# file is enough to tell garbage from a trace, and a file of hundreds of MB is not indexed
# a second time.
CHECK_BYTES = 64 << 20


def _hz(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate in Hz, e.g. 2596148000")
    problem = plausible_hz(value)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return int(value)


def plausible_hz(value: object) -> str | None:
    """Why ``value`` is no cycle rate, or None if it is one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        return "not a finite rate in Hz, e.g. 2596148000 (xl info's cpu_mhz x 1000000)"
    if not MIN_HZ <= value <= MAX_HZ:
        return (f"out of range: a cycle rate is {MIN_HZ:,} Hz to {MAX_HZ:.0e} Hz, e.g. "
                f"2596148000 (xl info's cpu_mhz x 1000000)")
    return None


def run(args: argparse.Namespace) -> int:
    from irqlab.xen.capture import DecompressionLimitError, read_xentrace
    from irqlab.xen.index import check_plausible, index_records
    from irqlab.xen.records import TraceFormatError
    from irqlab.xen.summary import summarize_data

    path: Path = args.file
    _check_regular(path)
    try:
        header, data = read_xentrace(path, mapped=True)
    except DecompressionLimitError as exc:
        raise UsageError(f"{path}: {exc}") from None
    except TraceFormatError as exc:
        raise UsageError(f"{path} is not a xentrace file: {exc}") from None
    except (OSError, EOFError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read it ({exc}); give a xentrace file") from None
    hz = args.tsc_hz or (header or {}).get("tsc_hz")
    if not hz:
        raise UsageError(f"{path} does not say its cycle rate (a plain xentrace file): "
                         f"give --tsc-hz HZ (xl info's cpu_mhz x 1000000)")
    if plausible_hz(hz):
        raise UsageError(f"{path}: its header's tsc_hz {str(hz)[:40]!r} is "
                         f"{plausible_hz(hz)}: give --tsc-hz HZ")
    try:
        check_plausible(index_records(data[:CHECK_BYTES]))
        summary = summarize_data(data)
    except (TraceFormatError, ValueError) as exc:
        raise UsageError(f"{path} is not a xentrace file: {exc}") from None
    if summary.first_tsc is None:
        raise UsageError(f"{path} has no timed xentrace record: not a xentrace file, or "
                         f"an empty capture")
    head = {"path": str(path), "records": summary.records, "hz": hz,
            "span_s": (summary.last_tsc - summary.first_tsc) / hz, "cpus": summary.cpus,
            "lost_records": summary.lost_records}
    show({"type": "xentrace_summary", "lines": summary.lines(int(hz)), "head": head},
         json_or_text(args))
    return EXIT_OK


def _check_regular(path: Path) -> None:
    """A regular file, or one line saying what it is instead."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror.lower()}; give a xentrace file (e.g. "
                         f"<db>.traces/run-N.xentrace.gz)") from None
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path} is not a regular file: give a xentrace file (e.g. "
                         f"<db>.traces/run-N.xentrace.gz)")

