"""Shared pieces of the commands: parser class, argument types, renderer choice."""

from __future__ import annotations

import argparse
from pathlib import Path

from irqlab.durations import parse_duration_ns
from irqlab.cli.render import HumanRenderer, JsonRenderer, Renderer
from irqlab.store import default_db_path

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad arguments: the message names the problem and the fix."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, then exit 2
        self.exit(EXIT_USAGE, f"irqlab: error: {message} (see `{self.prog} --help`)\n")


def duration(text: str) -> int:
    """argparse type: a duration with unit, in ns."""
    try:
        return parse_duration_ns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def count(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        val = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if val < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return val


def add_db_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=None,
                   help=f"database file (default {default_db_path()}, or $IRQLAB_DB)")
    p.add_argument("--json", action="store_true", help="print JSON lines")


def db_path(args: argparse.Namespace) -> Path:
    return args.db or default_db_path()


def renderer(args: argparse.Namespace) -> Renderer:
    return JsonRenderer() if getattr(args, "json", False) else HumanRenderer()
