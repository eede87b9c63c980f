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
        self.exit(EXIT_USAGE, printable(f"irqlab: error: {_with_suggestion(message)} (see "
                                        f"`{self.prog} --help`)", False) + "\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """argparse's, but an unknown option is reported by the command it was given
        to, with the nearest option that command has (Python 3.11's argparse suggests
        nothing; the top-level parser does not know a command's options)."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = _chosen_command(self, ns)
            message = f"unrecognized arguments: {' '.join(extras)}"
            near = _nearest_option(parser, extras)
            parser.error(message + (f"; did you mean {near}?" if near else ""))
        return ns


def _chosen_command(parser: argparse.ArgumentParser,
                    ns: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser the parsed line went to, deepest first."""
    while parser._subparsers is not None:
        actions = [a for a in parser._subparsers._group_actions
                   if isinstance(a, argparse._SubParsersAction)]
        name = getattr(ns, actions[0].dest, None) if actions else None
        if name not in (actions[0].choices if actions else {}):
            break
        parser = actions[0].choices[name]
    return parser


def _nearest_option(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """The option of ``parser`` closest to the first unknown option in ``words``
    (difflib's ratio >= 0.6, its default cut-off), or None."""
    import difflib

    known = [s for s in parser._option_string_actions if s.startswith("--")]
    for word in words:
        if word.startswith("--"):
            near = difflib.get_close_matches(word.partition("=")[0], known, n=1)
            if near:
                return near[0]
    return None


def _with_suggestion(message: str) -> str:
    """argparse's "invalid choice: 'x' (choose from ...)" with the nearest choice."""
    import difflib
    import re

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if not m:
        return message
    choices = re.findall(r"'([^']*)'", m.group(2))
    near = difflib.get_close_matches(m.group(1), choices, n=1)
    return message + (f"; did you mean {near[0]}?" if near else "")


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
