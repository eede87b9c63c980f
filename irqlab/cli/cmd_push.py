"""``irqlab push RUN… --to postgresql://…``: copy runs into a lab store (irqlab.store.pg)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from irqlab.cli.common import EXIT_OK, UsageError, add_db_json, db_path
from irqlab.cli.output import json_or_text, show
from irqlab.store.location import is_url, redact


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("push", help="copy runs to a lab store on PostgreSQL")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run ids or names in the local store (--db); tag:KEY=VALUE, "
                        "suite:NAME or series:ID push each of their runs")
    p.add_argument("--to", required=True, metavar="URL",
                   help="the lab store, postgresql://[user@]host[:port]/db (created on "
                        "first push)")
    p.add_argument("--samples-dir", type=Path, metavar="DIR",
                   help="put the raw samples in DIR/<run uuid>.<push id>.parquet (a "
                        "directory every host that reads the lab store mounts) instead of "
                        "in PostgreSQL. Two pushes of one run at once: one stores it, the "
                        "other says 'already in the lab store' and exits 0")
    add_db_json(p)


def run(args: argparse.Namespace) -> int:
    if not is_url(args.to):
        raise UsageError(f"--to {redact(args.to)!r} is not a postgresql:// URL, e.g. "
                         f"postgresql://lab@dbhost/irqlab")
    src_ref = db_path(args)
    if is_url(src_ref):
        raise UsageError("--db names the local store the runs come from: give a file")
    samples_dir = _samples_dir(args.samples_dir)
    from irqlab.reports.select import select_runs
    from irqlab.store import PgStore, Store

    with Store(src_ref, read_only=True) as src, PgStore(args.to) as lab:
        # Through the one selector resolver show and compare use; all found before any
        # copy.
        rows = select_runs(src, args.runs)
        for row in rows:
            t0 = time.monotonic()
            samples = src.sample_count(row.run_id)
            lab_id, added = lab.push(src, row, str(src.path.resolve()), samples_dir)
            took_s = time.monotonic() - t0
            line = {"type": "push", "version": 1, "run_id": row.run_id,
                    "lab_run_id": lab_id, "added": added,
                    "samples": samples if added else 0, "seconds": round(took_s, 3),
                    "samples_file": lab.samples_uri(lab_id), "concurrent": lab.raced}
            show({"type": "push_result", "line": line, "name": row.name,
                  "seconds": took_s}, json_or_text(args))
    return EXIT_OK


def _samples_dir(given: Path | None) -> Path | None:
    """--samples-dir, checked before anything is copied: an existing, writable directory."""
    if given is None:
        return None
    if not given.is_dir():
        raise UsageError(f"--samples-dir {given} is not a directory: create it (on the "
                         f"lab's shared file system) first")
    if not os.access(given, os.W_OK | os.X_OK):
        raise UsageError(f"--samples-dir {given} is not writable by this user")
    return given.resolve()
