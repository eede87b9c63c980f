"""Shared pieces of the commands: parser class, argument types, renderer choice."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from irqlab.argtypes import count as _count
from irqlab.argtypes import duration  # noqa: F401 (the commands' types)
from irqlab.cli.safe_text import printable
from irqlab.store.location import default_db_path, is_url

if TYPE_CHECKING:
    from irqlab.cli.render import Renderer

# Every command imports this module at parse time: it stays light (no rich, no store;
# docs/design.md, "Start-up"); what needs more imports it inside the function using it.

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


# The largest count an option takes (--samples, --warmup, --top ...): 10^12 samples is
# 31 years at 1 ms; anything above is a typo, and would overflow the probe's 64-bit fields.
COUNT_MAX = 10**12


def count(text: str) -> int:
    """An integer 0 .. COUNT_MAX written in ASCII digits (int() would also take '١٠')."""
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit()) and not (
            stripped.startswith("-") and stripped[1:].isascii() and stripped[1:].isdigit()):
        shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "…"
        raise argparse.ArgumentTypeError(f"{shown} is not a whole number: write digits "
                                         f"0-9, e.g. 1000")
    if len(stripped) > 13 or _count(stripped) > COUNT_MAX:
        raise argparse.ArgumentTypeError(f"{stripped[:40]} is more than {COUNT_MAX:,}, the "
                                         f"largest count irqlab takes")
    return _count(stripped)


class UsageError(Exception):
    """Bad arguments: the message names the problem and the fix."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, then exit 2
        self.exit(EXIT_USAGE, printable(f"irqlab: error: {message} (see `{self.prog} "
                                        f"--help`)", False) + "\n")


def db_ref(text: str) -> str | Path:
    """argparse type of --db: a file, or a lab store's postgresql:// URL (kept as text:
    a Path would fold its '//')."""
    return text if is_url(text) else Path(text)


def add_db_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=db_ref, default=None,
                   help=f"database file (default {default_db_path()}, or $IRQLAB_DB), or "
                        f"a lab store's postgresql:// URL")
    p.add_argument("--json", action="store_true", help="print JSON lines")


def db_path(args: argparse.Namespace) -> str | Path:
    """--db, else $IRQLAB_DB, else the default file (irqlab.store.default_db_path)."""
    if args.db:
        return args.db
    env = os.environ.get("IRQLAB_DB")
    return env if is_url(env) else default_db_path()


def renderer(args: argparse.Namespace) -> Renderer:
    from irqlab.cli.render import HumanRenderer, JsonRenderer

    return JsonRenderer() if getattr(args, "json", False) else HumanRenderer()
