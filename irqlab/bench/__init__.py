"""``irqlab bench``: performance figures (printed, never asserted by tests), each against
a baseline measured in the same run.

One module per benchmark (or per pair sharing their input), registered in ``BENCHES``
by name; ``irqlab bench NAME`` imports only the module it runs, so the command's parser
(and shell completion) imports nothing of them. This package is the top floor below the
CLI: a benchmark may drive any layer (a run, the store, explain, serve), and no layer
imports a benchmark. A benchmark that times a command starts it as a module
(``irqlab.bench.child`` or ``python -m irqlab.cli.main``), never from a code string.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Bench:
    """Where one benchmark is: ``irqlab.bench.<module>.<function>(**options)`` returns its
    figures; ``options`` names its dict in the options `irqlab bench` parsed."""

    module: str
    function: str
    options: str


# Every benchmark by name: one line each.
BENCHES: dict[str, Bench] = {
    "ingest": Bench("ingest", "bench_ingest", "ingest"),
    "stats": Bench("stats", "bench_stats_figures", "stats"),
    "rate": Bench("rate", "bench_rate", "rate"),
    "cyclictest": Bench("cyclictest", "bench_cyclictest", "cyclictest"),
    "trace": Bench("trace", "bench_trace", "trace"),
    "push": Bench("lab", "bench_push", "lab"),
    "export": Bench("export", "bench_export", "lab"),
    "import": Bench("compare", "bench_import", "import"),
    "compare": Bench("compare", "bench_compare", "compare"),
    "report": Bench("report", "bench_report", "report"),
    "lab-read": Bench("lab", "bench_lab_read", "lab"),
    "net": Bench("net", "bench_net", "net"),
    "xentrace": Bench("xentrace", "bench_xentrace", "xentrace"),
    "noise": Bench("noise", "bench_noise", "noise"),
    "startup": Bench("startup", "bench_startup", "startup"),
    "serve": Bench("serve", "bench_serve", "serve"),
}
DEFAULT_BENCHES = ("ingest", "stats", "rate")


def irqlab_argv(*args: str) -> list[str]:
    """The argv of an irqlab command in a child process: this interpreter running the
    CLI's module (what the `irqlab` console script runs), so no PATH or installed wrapper
    decides which irqlab is measured."""
    return [sys.executable, "-m", "irqlab.cli.main", *args]    # pyproject's entry


def run_benchmarks(which: list[str], opts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the named benchmarks in order; their figures, concatenated."""
    figures: list[dict[str, Any]] = []
    for name in which:
        bench = BENCHES[name]
        module = importlib.import_module(f"{__name__}.{bench.module}")
        figures += getattr(module, bench.function)(**opts.get(bench.options, {}))
    return figures
