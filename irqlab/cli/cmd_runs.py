"""``irqlab list`` and ``irqlab show``: what the store holds."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from irqlab.argtypes import count_in
from irqlab.cli.common import EXIT_OK, UsageError, add_db_json, db_path, duration
from irqlab.cli.output import json_or_text, show
from irqlab.reports.provenance import configuration_lines, host_lines
from irqlab.reports.select import SERIES_TAG, select_runs
from irqlab.stats.fields import LIST_TABLE, percentiles_from
from irqlab.humanize import format_when
from irqlab.store import open_store
from irqlab.store.provenance import provenance

def register_list(sub: argparse._SubParsersAction) -> None:
    ls = sub.add_parser("list", help="list stored runs")
    ls.add_argument("--where", action="append", default=[], type=_where,
                    metavar="tag:KEY=VALUE", help="only runs with this tag (repeatable: all "
                                                  "must hold)")
    ls.add_argument("--target", default=None, help="only runs of this target (native, ...)")
    ls.add_argument("--since", type=_since, default=None, metavar="DATE",
                    help="only runs started at or after DATE (YYYY-MM-DD or "
                         "YYYY-MM-DDTHH:MM[:SS], UTC as stored)")
    ls.add_argument("--status", default=None,
                    help="only runs with this status (ok, failed, interrupted, died, "
                         "running, stopped-at-break)")
    ls.add_argument("--name", default=None, metavar="NAME",
                    help="only runs named NAME")
    ls.add_argument("--limit", type=count_in(1, 10**9, "a count of runs"), default=None,
                    metavar="N", help="only the N latest of the runs listed (highest ids)")
    add_db_json(ls)


def _where(text: str) -> tuple[str, str]:
    key, sep, value = text.removeprefix("tag:").partition("=")
    if not text.startswith("tag:") or not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: write tag:KEY=VALUE, e.g. "
                                         f"tag:kernel=rt")
    return key, value


def _since(text: str) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date: write YYYY-MM-DD or "
                                         f"YYYY-MM-DDTHH:MM") from None


def _check_status(status: str | None) -> None:
    from irqlab.store.db import RUN_STATUSES      # loaded with the store already

    if status is not None and status not in RUN_STATUSES:
        raise UsageError(f"--status {status!r}: a run's status is one of "
                         f"{', '.join(RUN_STATUSES)}")


def _wanted(row, args: argparse.Namespace) -> bool:
    """The run passes every filter `list` was given."""
    return (all(row.tags.get(k) == v for k, v in getattr(args, "where", []))
            and (getattr(args, "name", None) in (None, row.name))
            and (getattr(args, "target", None) in (None, row.target))
            and (getattr(args, "status", None) in (None, row.status))
            and (getattr(args, "since", None) is None
                 or row.started_at.replace(tzinfo=None) >= args.since.replace(tzinfo=None)))

def register_show(sub: argparse._SubParsersAction) -> None:
    sh = sub.add_parser("show", help="show one stored run")
    sh.add_argument("run", metavar="RUN", help="run id or name (latest run of that name); "
                                               "tag:KEY=VALUE, suite:NAME or series:ID show "
                                               "each of their runs; so does the --name "
                                               "of an import that made several runs")
    sh.add_argument("--hist", action="store_true",
                    help="print the run's latency histogram instead of its detail: 1-2-5 "
                         "log buckets (1 us, 2 us, 5 us, ...) with count, %%, cumulative "
                         "%% and a log-scaled bar (like rtla timerlat hist, cyclictest -h), "
                         "from the raw samples, or the stored histogram of a big or "
                         "imported run; --json: a histogram line")
    sh.add_argument("--bucket", type=duration, default=None, metavar="DUR",
                    help="with --hist: uniform buckets of DUR (e.g. 1us, as cyclictest -h "
                         "and rtla --bucket-size) instead of 1-2-5 log buckets")
    add_db_json(sh)

def _list_row(row) -> dict[str, Any]:
    s = row.summary or {}
    # The summary figures `irqlab list` shows (irqlab.stats.fields.LIST_TABLE); a run
    # without a summary yet has no samples.
    figs = {c.key: s.get(c.key, 0 if c.key == "samples" else None) for c in LIST_TABLE}
    return {"run_id": row.run_id, "name": row.name, "started_at": row.started_at.isoformat(),
            "target": row.target, "accel": row.accel, "emulated": row.emulated,
            "status": row.status, **figs, "source": row.source, "kind": row.kind,
            "percentiles_from": percentiles_from(s),
            # irqlab run --repeat: the series this run belongs to (null: a single run).
            "series": row.tags.get(SERIES_TAG), "tags": row.tags}

def run_list(args: argparse.Namespace) -> int:
    # A missing database is an error, as in `show` (read_only refuses it, one line).
    with open_store(db_path(args), read_only=True) as store:
        _check_status(args.status)
        rows = [_list_row(r) for r in store.runs() if _wanted(r, args)]
    if args.limit is not None:
        rows = sorted(rows, key=lambda r: r["run_id"])[-args.limit:]
    show({"type": "run_list", "rows": rows}, json_or_text(args))
    return EXIT_OK

def run_show(args: argparse.Namespace) -> int:
    _check_bucket(args)
    if getattr(args, "hist", False):
        return _show_hist(args)
    with open_store(db_path(args), read_only=True) as store:
        # A selector of several runs (series:ID …) shows each, in run-id order.
        shown = [(row, store.windows(row.run_id)) for row in select_runs(store, [args.run])]
    out = json_or_text(args)
    for row, windows in shown:
        show(_detail_model(row, windows), out)
    return EXIT_OK


def _check_bucket(args: argparse.Namespace) -> None:
    if args.bucket is not None and not args.hist:
        raise UsageError("--bucket sets the width of --hist's buckets: add --hist")
    if args.bucket is not None and args.bucket < 1:
        raise UsageError("--bucket 0: give a width of at least 1ns, e.g. --bucket 1us")


def _show_hist(args: argparse.Namespace) -> int:
    """show --hist: each selected run's terminal histogram (irqlab.reports.termhist)."""
    from irqlab.reports.data import load_run
    from irqlab.reports.termhist import run_histograms

    with open_store(db_path(args), read_only=True) as store:
        models = []
        for row in select_runs(store, [args.run]):
            # Raw samples (exact) when they fit in memory, else the stored histogram.
            try:
                models += run_histograms(store, [load_run(store, row)], args.bucket)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
    show({"type": "run_histograms", "runs": models}, json_or_text(args))
    return EXIT_OK


def _detail_model(row, windows: list[dict[str, Any]]) -> dict[str, Any]:
    """`show`'s model of one run: its detail lines, windows and summary."""
    # A run without a summary (still running) shows every summary key, unknown ones None.
    summary = row.shown_summary()
    meta = row.metadata
    host = meta.get("host", {})
    probe = meta.get("probe", {})
    # Target-neutral labels: a native run has no QEMU; "command" is what irqlab started
    # (the VMM, or the probe itself), stored under qemu_argv for every target.
    detail = {"run": f"{row.run_id} {row.name}", "status": row.status,
              "started": format_when(row.started_at) + " UTC",
              "ended": format_when(row.ended_at) + " UTC" if row.ended_at else "—",
              "host": " ".join(str(v) for v in (
                  host.get("hostname"), host.get("kernel"), host.get("cpu_model"),
                  f"({host['cpus_online']} cpus)" if host.get("cpus_online") else None)
                  if v is not None) or "—"}
    if meta.get("qemu_version"):
        detail["qemu"] = meta["qemu_version"]
    detail |= {"accel": row.accel,
               "probe": (f"build {probe.get('build_id') or '—'} timer "
                         f"{probe.get('timer_mode') or '—'} ticks "
                         f"{probe.get('tick_hz') or '—'} Hz "
                         f"({probe.get('tick_method') or '—'})") if probe else "—",
               "command": " ".join(meta.get("qemu_argv", [])) or "—"}
    series = meta.get(SERIES_TAG)
    if isinstance(series, dict):
        detail["series"] = (f"{series.get('id')} (run {series.get('index')} of "
                            f"{series.get('count')})")
    if row.source != "irqlab":
        detail = _imported_detail(row)
    # How the run was made (docs/formats.md, "Provenance"): a block of lines for people,
    # two keys of the summary line for machines (added keys keep the line's version).
    record = provenance(row)
    detail["configuration"] = _block(configuration_lines(record))
    detail["host"] = f"{detail.get('host', '')}{_block(host_lines(record))}"
    summary = {**summary, "provenance_version": record["version"],
               "configuration": record["configuration"], "host": record["host"]}
    return {"type": "run_detail", "summary": summary, "detail": detail,
            "windows": windows}


def _block(lines: list[str]) -> str:
    """Lines under a `show` heading, indented so the block reads as one."""
    return "".join(f"\n  {line}" for line in lines)


def _imported_detail(row) -> dict[str, Any]:
    """Header lines of a run imported from another tool (no host/QEMU/probe of ours)."""
    imp = row.metadata.get("import", {})
    return {"run": f"{row.run_id} {row.name}", "status": row.status,
            "imported": row.started_at.isoformat(),
            "source": f"{row.source} ({row.kind}) from {imp.get('file')} line {imp.get('line')}",
            "tags": ", ".join(f"{k}={v}" for k, v in row.tags.items()) or "—",
            "tick rate": f"{row.tick_hz} Hz" if row.tick_hz else "—"}
