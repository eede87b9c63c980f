"""``irqlab`` entry point: one module per command, registered here."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from irqlab import __version__
from irqlab.cli import cmd_bench, cmd_matrix, cmd_run, cmd_runs
from irqlab.cli import cmd_check, cmd_compare, cmd_report
from irqlab.cli import cmd_explain
from irqlab.cli import cmd_import
from irqlab.cli import cmd_model
from irqlab.cli import cmd_xentrace
from irqlab.cli import cmd_doctor, cmd_export, cmd_push
from irqlab.cli import cmd_completion
from irqlab.cli.common import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_USAGE, Parser, UsageError
from irqlab.cli.safe_text import printable
from irqlab.store import StoreError, StoreWriteError
from irqlab.store import db as store_db

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
    ("model", cmd_model.register, cmd_model.run),
    ("xentrace", cmd_xentrace.register, cmd_xentrace.run),
    ("push", cmd_push.register, cmd_push.run),
    ("export", cmd_export.register, cmd_export.run),
    ("doctor", cmd_doctor.register, cmd_doctor.run),
    ("completion", cmd_completion.register, cmd_completion.run),
    ("manpage", cmd_completion.register_manpage, cmd_completion.run_manpage),
]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="irqlab", description="Interrupt latency lab.")
    parser.add_argument("--version", action="version", version=f"irqlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for _name, register, _run in COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Undo host changes and kill loads a crashed irqlab left behind (irqlab.knobs.journal).
    from irqlab.knobs.journal import replay_stale
    try:
        undone = replay_stale()
    except OSError as exc:          # an unreadable state directory must not stop irqlab
        undone = [f"restore journal not readable ({exc}); nothing undone"]
    for line in undone:
        print(printable(f"irqlab: previous run died: {line}", False), file=sys.stderr)
    # Runs a dead irqlab left `running` are closed when a command opens the store.
    store_db.notice = lambda text: print(printable(f"irqlab: {text}", False),
                                         file=sys.stderr)
    run = {name: fn for name, _reg, fn in COMMANDS}[args.command]
    try:
        return run(args)
    except StoreWriteError as exc:
        print(printable(f"irqlab {args.command}: error: {exc}", False), file=sys.stderr)
        return EXIT_FAIL
    except (UsageError, StoreError) as exc:
        print(printable(f"irqlab {args.command}: error: {exc}", False), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `irqlab compare … | head`: the reader left; exit quietly like other Unix tools.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAIL
    except KeyboardInterrupt:
        print(f"irqlab {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        # No traceback reaches a user: one line, and how to get the details.
        if os.environ.get("IRQLAB_DEBUG"):
            raise
        print(printable(f"irqlab {args.command}: internal error: {type(exc).__name__}: "
                        f"{exc} (IRQLAB_DEBUG=1 shows the traceback; please report it)",
                        False), file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
