"""``irqlab`` entry point: one module per command, registered here."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from irqlab.cli import cmd_bench, cmd_matrix, cmd_run, cmd_runs
from irqlab.cli import cmd_check, cmd_compare, cmd_report
from irqlab.cli import cmd_explain
from irqlab.cli import cmd_import
from irqlab.cli.common import EXIT_FAIL, EXIT_USAGE, Parser, UsageError
from irqlab.store import StoreError

# (command name, register(subparsers), run(args) -> exit code)
COMMANDS: list[tuple[str, Callable, Callable[[argparse.Namespace], int]]] = [
    ("run", cmd_run.register, cmd_run.run),
    ("list", cmd_runs.register_list, cmd_runs.run_list),
    ("show", cmd_runs.register_show, cmd_runs.run_show),
    ("bench", cmd_bench.register, cmd_bench.run),
    ("matrix", cmd_matrix.register, cmd_matrix.run),
    ("compare", cmd_compare.register, cmd_compare.run),
    ("report", cmd_report.register, cmd_report.run),
    ("check", cmd_check.register, cmd_check.run),
    ("explain", cmd_explain.register, cmd_explain.run),
    ("import", cmd_import.register, cmd_import.run),
]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="irqlab", description="Interrupt latency lab.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for _name, register, _run in COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Undo host changes and kill loads a crashed irqlab left behind (irqlab.knobs.journal).
    from irqlab.knobs.journal import replay_stale
    for line in replay_stale():
        print(f"irqlab: previous run died: {line}", file=sys.stderr)
    run = {name: fn for name, _reg, fn in COMMANDS}[args.command]
    try:
        return run(args)
    except (UsageError, StoreError) as exc:
        print(f"irqlab {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `irqlab compare … | head`: the reader left; exit quietly like other Unix tools.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
