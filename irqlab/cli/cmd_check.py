"""``irqlab check RUN --max 30us [--p99.9 20us] [--above-threshold 0] [--junit FILE]``.

A CI gate: exit 0 when every gate and limit holds; 1 when one fails (a limit exceeded, a
run that did not end ok, lost samples over --max-lost, an emulated run under
--require-hardware, too few samples for a percentile limit); 2 when the arguments are
wrong or a run cannot be judged (unknown, no samples) and no gate already failed it.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

from irqlab.cli.cmd_compare import add_run_args
from irqlab.stats.fields import METRICS
from irqlab.cli.common import (EXIT_FAIL, EXIT_OK, EXIT_USAGE, UsageError, count, db_path,
                               duration)
from irqlab.cli.output import json_or_text, show
from irqlab.reports.select import select_runs
from irqlab.stats.fields import CHECK_LIMITS
from irqlab.store import StoreError, open_store

if TYPE_CHECKING:       # reports.check imports numpy and the store: run() imports it
    from irqlab.reports.check import CheckResult


def _dest(name: str) -> str:
    return "limit_" + name.replace(".", "").replace("-", "_")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="pass/fail a run against latency limits (CI gate)",
                       description="Exit 0 when every gate and limit holds, 1 when one "
                                   "fails, 2 on a usage or data error. Limits are maxima. "
                                   "Gates: the run ended ok, lost at most --max-lost "
                                   "samples, has enough samples for each percentile limit "
                                   "(p99.9: 1000), and with --require-hardware was not "
                                   "emulated.")
    add_run_args(p)
    # reports.check.LIMITS, read from the catalog it is made of (no numpy, no store).
    for name, unit in ((c.heading, c.field.unit) for c in CHECK_LIMITS):
        if unit == "ns":
            p.add_argument(f"--{name}", dest=_dest(name), type=duration, default=None,
                           metavar="DURATION", help=f"highest allowed {name}, e.g. 30us")
        else:
            p.add_argument(f"--{name}", dest=_dest(name), type=count, default=None,
                           metavar="N", help="highest allowed count of samples above the "
                                             "threshold")
    p.add_argument("--max-exceed", type=_max_exceed, action="append", default=[],
                   metavar="LAT:PROB",
                   help="fail when the 95%% upper bound of the per-sample probability of a "
                        "latency above LAT exceeds PROB (e.g. 1ms:1e-6; an extreme-value "
                        "fit of the tail, as irqlab tail; a refused fit fails); repeatable")
    p.add_argument("--max-lost", type=count, default=0, metavar="N",
                   help="most lost samples allowed (default 0; a run that did not count "
                        "them, e.g. an import, is not failed: the gate is skipped, said)")
    p.add_argument("--allow-interrupted", action="store_true",
                   help="judge a run that did not end ok (interrupted, died, failed, "
                        "running) on the samples it has instead of failing it")
    p.add_argument("--require-hardware", action="store_true",
                   help="fail runs that were emulated (TCG, software KVM) or not known "
                        "to run on hardware")
    p.add_argument("--per-cpu", action="store_true",
                   help="every limit must also hold on each CPU's samples (runs with "
                        "per-CPU samples: native, multi-vCPU linux-guest); a failing CPU "
                        "is named; JSON: per_cpu {\"0\": {passed, limits, ...}}")
    p.add_argument("--junit", type=Path, default=None, metavar="FILE",
                   help="write JUnit XML for CI systems")
    p.add_argument("--json", action="store_true", help="print one JSON line per run")


def _write_junit(path: Path | None, results: list[CheckResult], seconds: float) -> None:
    if path is None:
        return
    from irqlab.reports.check import junit_xml

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(junit_xml(results, seconds))
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}; choose another path") from exc


def _max_exceed(text: str) -> tuple[int, float]:
    """--max-exceed LAT:PROB."""
    lat, sep, prob = text.partition(":")
    try:
        value = float(prob)
    except ValueError:
        value = math.nan
    if not sep or not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: write LATENCY:PROBABILITY with a "
                                         f"probability between 0 and 1, e.g. 1ms:1e-6")
    return duration(lat), value


def run(args: argparse.Namespace) -> int:
    from irqlab.reports.check import (LIMITS, CheckResult, Gates, evaluate, result_lines,
                                      tail_gates)
    from irqlab.reports.data import load_runs

    limits = [(name, getattr(args, _dest(name))) for name, _k, _u in LIMITS
              if getattr(args, _dest(name)) is not None]
    if not limits and not args.max_exceed:
        raise UsageError("no limit given: pass at least one of "
                         + ", ".join(f"--{n}" for n, _k, _u in LIMITS) + ", --max-exceed")
    started = time.monotonic()
    try:
        # The store stays open: big runs' samples are read from it while checking.
        with open_store(db_path(args), read_only=True) as store:
            runs = load_runs(store, select_runs(store, args.runs), metric=args.metric)
            gates = Gates(allow_interrupted=args.allow_interrupted,
                          max_lost=args.max_lost, require_hardware=args.require_hardware)
            results = [evaluate(r, limits, args.threshold, gates, per_cpu=args.per_cpu)
                       for r in runs]
            for r, res in zip(runs, results):
                if res.error is None:
                    res.gates += tail_gates(r, args.max_exceed)
            if args.metric != "total":
                for res in results:
                    res.notes.append(f"metric: {METRICS[args.metric]}, over the run's "
                                     f"split samples")
    except StoreError as exc:
        # CI still gets a JUnit file saying why nothing could be checked.
        failed = CheckResult(0, " ".join(args.runs), error=str(exc))
        _write_junit(args.junit, [failed], time.monotonic() - started)
        raise
    _write_junit(args.junit, results, time.monotonic() - started)
    out = json_or_text(args)
    for res in results:
        show({"type": "check_result", "result": {**res.to_dict(), "metric": args.metric},
              "lines": result_lines(res)}, out)
    # A run that cannot be judged is a data error (2), unless a gate already failed it:
    # a failed run without samples is a failed check, as CI should see it.
    if any(r.error and not r.gate_failed for r in results):
        return EXIT_USAGE
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAIL
