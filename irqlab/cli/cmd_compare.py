"""``irqlab compare RUN...``: one table, one row per run, against the first run."""

from __future__ import annotations

import argparse
from typing import Any

from irqlab.cli.common import EXIT_OK, UsageError, count, db_path, duration
from irqlab.cli.common import db_ref
from irqlab.argtypes import count_in
from irqlab.cli.output import View, exporter_for, show
from irqlab.reports import noise
from irqlab.reports.select import select_runs
from irqlab.stats.fields import METRICS
from irqlab.store import default_db_path, open_store

FORMATS = ("human", "markdown", "csv", "json")
# 100,000 resamples of ~30 quantiles: ~24 MB, seconds; a typo of more zeros asked for TiB.
MAX_RESAMPLES = 100_000
RUN_HELP = ("run id, name (latest run of that name), tag:KEY=VALUE, suite:NAME or "
            "series:ID (the runs of an `irqlab run --repeat` series; series:NAME: the "
            "latest series of runs named NAME); the first run is the baseline")


def add_run_args(p: argparse.ArgumentParser) -> None:
    """RUN selectors, --db and --threshold, shared by compare, report and check."""
    p.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP)
    p.add_argument("--db", type=db_ref, default=None,
                   help=f"database file (default {default_db_path()}, or $IRQLAB_DB)")
    p.add_argument("--threshold", type=duration, default=None,
                   help="count 'above threshold' against this latency for every run "
                        "(default: each run's own --threshold)")
    p.add_argument("--metric", choices=tuple(METRICS), default="total",
                   help="which latency: total (deadline -> probe running), irq (deadline "
                        "-> the timer's hard IRQ) or thread (hard IRQ -> probe running); "
                        "irq and thread need a split run (irqlab run --target native "
                        "--trace, or linux-guest)")


def margin_arg(text: str) -> dict[str, float]:
    """--margin PCT or p50=PCT,p99.9=PCT (noise.parse_margins)."""
    try:
        return noise.parse_margins(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_margin_arg(p: argparse.ArgumentParser) -> None:
    """--margin, shared by compare and report."""
    defaults = ", ".join(f"{k} {v:.0%}" for k, v in noise.DEFAULT_MARGINS.items())
    p.add_argument("--margin", type=margin_arg, default=None, metavar="PCT",
                   help="equivalence margin of the `same` verdict: 10%% for every "
                        "quantile or p50=5%%,p99.9=20%% (default " + defaults.replace(
                            "%", "%%") + ", from measured run-to-run spread)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare stored runs in one table",
                       description="One row per run: samples, percentiles, max, warm max, "
                                   "above-threshold count, ratios to the first run, a "
                                   "verdict per group (different, same or unknown) and "
                                   "comparability warnings. Runs of one series (irqlab run "
                                   "--repeat) form a group; groups of >= 3 runs are tested "
                                   "run by run (t-tests on each run's percentiles, `same` "
                                   "within --margin); single runs are always `unknown`.")
    add_run_args(p)
    add_margin_arg(p)
    p.add_argument("--format", choices=FORMATS, default="human",
                   help="human (terminal table), markdown, csv or json (JSON lines)")
    p.add_argument("--json", action="store_true", help="same as --format json")
    p.add_argument("--seed", type=count, default=noise.DEFAULT_SEED,
                   help="seed of the single runs' block bootstrap (same seed, same answer)")
    p.add_argument("--resamples", type=count_in(1, MAX_RESAMPLES, "each resample holds "
                                                 "a row of every quantile in memory"),
                   default=noise.DEFAULT_RESAMPLES,
                   help="resamples of the single runs' block bootstrap (groups of >= 2 runs "
                        "use t-tests: no resampling)")
    p.add_argument("--hist", action="store_true",
                   help="also the runs' latency histograms side by side on shared 1-2-5 "
                        "log buckets (a count and a log-scaled bar per run; see irqlab "
                        "show --hist); JSON: a histogram line per run")
    p.add_argument("--verbose", action="store_true",
                   help="state the noise test's whole method with its sources (default: "
                        "one line naming it; the JSON header's noise_method has it in full)")
    p.add_argument("--per-cpu", action="store_true",
                   help="also a row per CPU of each run with per-CPU samples (native, "
                        "multi-vCPU linux-guest), like cyclictest's T:0 T:1 lines; JSON: "
                        "each compare_run gains per_cpu {\"0\": figures, ...}")


def run(args: argparse.Namespace) -> int:
    from irqlab.reports.compare import build_compare
    from irqlab.reports.data import load_runs

    fmt = "json" if args.json else args.format
    if args.hist and fmt == "csv":
        raise UsageError("--hist has no csv form: use --json (one histogram line per run) "
                         "or the default table")
    # The store stays open: big runs' samples are read from it while comparing.
    with open_store(db_path(args), read_only=True) as store:
        runs = load_runs(store, select_runs(store, args.runs, series_names=True),
                         metric=args.metric)
        model = build_compare(runs, args.threshold, seed=args.seed,
                              resamples=max(1, args.resamples), per_cpu=args.per_cpu,
                              margins=args.margin)
        model["metric"] = args.metric
        hists = _histograms(store, runs) if args.hist else []
    # --format human is the text exporter (the option's spelling is the user's contract).
    out = exporter_for("text" if fmt == "human" else fmt, View(verbose=args.verbose))
    show(model, out)
    if hists:
        show({"type": "compare_histograms", "runs": hists}, out)
    return EXIT_OK


def _histograms(store: Any, runs: list[Any]) -> list[dict[str, Any]]:
    """compare --hist: each run's histogram model (irqlab.reports.termhist)."""
    from irqlab.reports.termhist import run_histograms
    try:
        return run_histograms(store, runs)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
