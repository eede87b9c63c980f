"""``irqlab tag`` and ``irqlab rm``: label stored runs, remove them.

The store is imported inside run functions only (docs/design.md, "Start-up")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from irqlab.cli.common import EXIT_OK, UsageError, add_db_json, db_path
from irqlab.cli.output import json_or_text, show
from irqlab.cli.safe_text import printable

_SELECTORS = ("run id or name (latest run of that name); tag:KEY=VALUE, suite:NAME or "
              "series:ID name each of their runs")


def tag_pair(text: str) -> tuple[str, str]:
    """KEY=VALUE of --tag and `irqlab tag` (argparse type)."""
    from irqlab.store.manage import RESERVED_TAGS
    from irqlab.store.tag_keys import TAG_KEY_RULE, valid_tag_key

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. kernel=rt)")
    if not valid_tag_key(key.strip()):
        raise argparse.ArgumentTypeError(f"tag {key.strip()[:40]!r}: {TAG_KEY_RULE}, "
                                         f"e.g. kernel=rt")
    if key.strip() in RESERVED_TAGS:
        raise argparse.ArgumentTypeError(f"tag {key.strip()!r} is irqlab's own (--repeat "
                                         f"and matrix set it); pick another key")
    return key.strip(), value


def register_tag(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tag", help="add or change tags of stored runs")
    p.add_argument("run", metavar="RUN", help=_SELECTORS)
    p.add_argument("tags", metavar="KEY=VALUE", nargs="+", type=tag_pair,
                   help="tags to set (KEY= with no value removes KEY)")
    add_db_json(p)


def register_rm(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rm", help="remove stored runs with their samples and captures")
    p.add_argument("runs", metavar="RUN", nargs="+", help=_SELECTORS)
    p.add_argument("-y", "--yes", action="store_true",
                   help="remove without asking")
    add_db_json(p)


def run_tag(args: argparse.Namespace) -> int:
    from irqlab.reports.select import select_runs
    from irqlab.store import open_store
    from irqlab.store.manage import set_tags

    with open_store(db_path(args)) as store:
        rows = select_runs(store, [args.run])
        done = [(row, set_tags(store, row, dict(args.tags))) for row in rows]
    for row, tags in done:
        show({"type": "tag", "version": 1, "run_id": row.run_id, "name": row.name,
              "tags": tags}, json_or_text(args))
    return EXIT_OK


def run_rm(args: argparse.Namespace) -> int:
    from irqlab.reports.select import select_runs
    from irqlab.store import keeps_files, open_store
    from irqlab.store.manage import removable, remove_run

    ref = db_path(args)
    with open_store(ref) as store:
        rows = select_runs(store, args.runs)
        for row in rows:                # refuse before removing any
            removable(store, row)
        # A lab store keeps no captures (push copies rows and samples only).
        captures = {row.run_id: _captures(Path(ref).expanduser(), row)
                    if keeps_files(str(ref)) else [] for row in rows}
        if not args.yes and not _confirmed(rows):
            print("irqlab rm: nothing removed", file=sys.stderr)
            return EXIT_OK
        removed = [remove_run(store, row) for row in rows]
    for info in removed:
        info["captures"] = _remove(captures[info["run_id"]])
        show({"type": "rm", "version": 1, **info}, json_or_text(args))
    return EXIT_OK


def _confirmed(rows: list) -> bool:
    """Ask on the terminal; without one, refuse (a script says --yes)."""
    if not sys.stdin.isatty():
        raise UsageError("rm asks before removing and stdin is not a terminal: pass --yes")
    names = ", ".join(f"{r.run_id} {r.name}" for r in rows)
    answer = input(printable(f"remove {len(rows)} run(s) ({names}) with their samples, "
                             f"sample files and captures? [y/N] ", False))
    return answer.strip().lower() in ("y", "yes")


def _captures(db: Path, row) -> list[Path]:
    """The run's trace and xentrace captures: where irqlab.trace.archive puts them beside
    the database, and the files its hooks recorded (a database since moved), only those
    named for this run (run-<id>.*), never another file a hook's metadata might name."""
    from irqlab.trace.archive import trace_file_for, xentrace_file_for

    paths = [trace_file_for(db, row.run_id), xentrace_file_for(db, row.run_id)]
    for hook in (row.metadata.get("hooks") or {}).values():
        file = hook.get("file") if isinstance(hook, dict) else None
        if isinstance(file, str) and Path(file).name.startswith(f"run-{row.run_id}."):
            paths.append(Path(file))
    return list(dict.fromkeys(paths))


def _remove(paths: list[Path]) -> list[str]:
    gone = []
    for path in paths:
        if path.exists():
            path.unlink()
            gone.append(str(path))
    return gone
