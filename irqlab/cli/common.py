"""Shared pieces of the commands: parser class, argument types, renderer choice."""

from __future__ import annotations

import argparse
from pathlib import Path

from irqlab.argtypes import count, duration  # noqa: F401 (the commands' types)
from irqlab.cli.render import HumanRenderer, JsonRenderer, Renderer
from irqlab.store import default_db_path

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad arguments: the message names the problem and the fix."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, then exit 2
        self.exit(EXIT_USAGE, f"irqlab: error: {message} (see `{self.prog} --help`)\n")


def add_db_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=None,
                   help=f"database file (default {default_db_path()}, or $IRQLAB_DB)")
    p.add_argument("--json", action="store_true", help="print JSON lines")


def db_path(args: argparse.Namespace) -> Path:
    return args.db or default_db_path()


def renderer(args: argparse.Namespace) -> Renderer:
    return JsonRenderer() if getattr(args, "json", False) else HumanRenderer()
