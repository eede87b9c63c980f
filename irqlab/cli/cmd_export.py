"""``irqlab export RUN… --parquet DIR``: runs' raw samples in ns as one Parquet dataset."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from irqlab.cli.common import EXIT_OK, UsageError, add_db_json, db_path
from irqlab.cli.output import json_or_text, show
from irqlab.store import open_store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export runs' samples (ns) as a Parquet dataset")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run ids or names; tag:KEY=VALUE, suite:NAME or series:ID export "
                        "each of their runs")
    p.add_argument("--parquet", required=True, type=Path, metavar="DIR",
                   help="dataset directory: DIR/samples/run_id=N/*.parquet (Hive "
                        "partitions: DuckDB's read_parquet, pandas.read_parquet, "
                        "pyarrow.dataset and polars.scan_parquet read DIR/samples "
                        "whole), DIR/runs.parquet and DIR/summaries.parquet")
    add_db_json(p)


def run(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from irqlab.api import SAMPLE_SCHEMA, StoreView
    from irqlab.reports.select import select_runs
    from irqlab.store.parquet import samples_writer

    out: Path = args.parquet
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--parquet {out} exists and is not an empty directory: give a "
                         f"new one (nothing is overwritten)")
    tmp = out.with_name(f".{out.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    _check_writable(out, tmp)
    with StoreView(open_store(db_path(args), read_only=True)) as view:
        # Through the one selector resolver show and compare use; all found first.
        rows = select_runs(view._store, args.runs)
        try:
            for row in rows:
                part = tmp / "samples" / f"run_id={row.run_id}"
                part.mkdir(parents=True)
                n = 0
                # The partition column lives in the path (Hive style), not in the file.
                schema = SAMPLE_SCHEMA.remove(SAMPLE_SCHEMA.get_field_index("run_id"))
                with samples_writer(part / "part-0.parquet", schema) as writer:
                    for batch in view.sample_batches(row.run_id):
                        writer.write_batch(batch.drop_columns(["run_id"]))
                        n += len(batch)
                _report(args, row.run_id, row.name, n)
            runs = view.runs()
            ids = {r.run_id for r in rows}
            pq.write_table(runs.filter([i in ids for i in runs.column("run_id").to_pylist()]),
                           tmp / "runs.parquet")
            # Their summaries as stored (the percentiles every command shows, with
            # percentiles_from): a reader of the dataset needs no second computation.
            sums = view.summaries()
            pq.write_table(sums.filter([i in ids for i in sums.column("run_id").to_pylist()]),
                           tmp / "summaries.parquet")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    if out.exists():
        out.rmdir()
    tmp.rename(out)        # the dataset appears whole, or not at all
    return EXIT_OK


def _check_writable(out: Path, tmp: Path) -> None:
    """Create and remove ``tmp``, the dataset's temporary directory beside ``out``: a
    place irqlab cannot write (/proc, a read-only mount) is a usage error named before
    any run is read."""
    try:
        tmp.mkdir(parents=True)
        tmp.rmdir()
    except OSError as exc:
        raise UsageError(f"--parquet {out}: cannot create a directory there "
                         f"({exc.strerror}): give a path in a directory you can "
                         f"write") from None


def _report(args: argparse.Namespace, run_id: int, name: str, samples: int) -> None:
    line = {"type": "export", "version": 1, "run_id": run_id, "samples": samples,
            "path": str(args.parquet)}
    show({"type": "export_result", "line": line, "name": name}, json_or_text(args))
