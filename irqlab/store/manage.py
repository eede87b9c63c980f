"""Run management on a DuckDB store: set a run's tags, remove runs with every row and
sample file they have (`irqlab tag`, `irqlab rm`; captures are the CLI's, a layer up)."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from irqlab.store.errors import StoreError

if TYPE_CHECKING:
    from irqlab.store.db import RunRow, Store
    from irqlab.store.pg import PgStore

# Tags irqlab itself sets and selects by: a user's value would break `series:ID` and a
# matrix's resume (irqlab.suite, irqlab.cli.matrix).
RESERVED_TAGS = frozenset({"series", "scenario"})
# Every table that holds rows of a run, the run's own row last.
_RUN_TABLES = ("samples", "windows", "histograms", "sample_files", "runs")


def check_tags(tags: dict[str, str]) -> None:
    """Refuse tags irqlab sets itself, naming the way to set them."""
    for key in tags:
        if key in RESERVED_TAGS:
            raise StoreError(f"tag {key!r} is irqlab's own (--repeat and matrix set it); "
                             f"pick another key")


def set_tags(store: "Store", row: "RunRow", tags: dict[str, str]) -> dict[str, str]:
    """Add or change the run's tags (an empty value removes that tag); the new tags."""
    check_tags(tags)
    merged = {**row.tags, **tags}
    merged = {k: v for k, v in merged.items() if v != ""}
    store.update_run(row.run_id, tags=merged)
    return merged


def removable(store: "Store", row: "RunRow") -> None:
    """Raise StoreError when the run must not be removed now: it is still running, or
    another irqlab process holds the store (its run may be writing)."""
    if row.status == "running":
        raise StoreError(f"run {row.run_id} {row.name!r} is still running; stop it "
                         f"(Ctrl-C in its terminal) or wait until it ends, then rm it")
    holder = getattr(store, "holder_pid", None)
    if holder is not None:
        raise StoreError(f"{store.path} is open in irqlab process {holder} (a run?); rm "
                         f"runs when it has ended")


def remove_run(store: "Store | PgStore", row: "RunRow") -> dict[str, Any]:
    """Delete the run's rows from every table in one transaction, then its sample files
    (the rows go first: a crash between leaves orphan files, which the next writable
    open removes, never rows naming missing files)."""
    from irqlab.store import is_url, sample_files   # numpy and pyarrow: when removing

    if is_url(str(store.path)):
        return _remove_lab_run(store, row)
    removable(store, row)
    counts = {}
    with store.transaction():
        for table in _RUN_TABLES:
            cur = store._write(f"DELETE FROM {table} WHERE run_id = ?", [row.run_id])
            counts[table] = _deleted(cur)
    folder = sample_files.run_dir(store.path, row.run_id)
    files = sum(1 for _ in folder.glob("*")) if folder.is_dir() else 0
    shutil.rmtree(folder, ignore_errors=True)
    return {"run_id": row.run_id, "name": row.name, "rows": counts, "sample_files": files}


def _remove_lab_run(store: "PgStore", row: "RunRow") -> dict[str, Any]:
    """The lab store's rows (windows and histograms go with the run: ON DELETE CASCADE;
    samples have no foreign key, store/pg.py says why), then the run's samples file if
    push put its samples in one (runs.samples_uri) and this host sees it."""
    removable(store, row)
    # Found before anything is deleted: a file this host cannot see stops rm here.
    uri = store.samples_uri(row.run_id)
    path = store._samples_file(row.run_id).path if uri else None
    counts = {}
    with store.transaction():
        for table in ("samples", "windows", "histograms", "runs"):
            got = store._write(f"WITH gone AS (DELETE FROM {table} WHERE run_id = %s "
                               f"RETURNING 1) SELECT count(*) FROM gone", (row.run_id,))
            counts[table] = int(got[0]) if got else None
    files = 0
    if path is not None:
        path.unlink(missing_ok=True)
        files = 1
    return {"run_id": row.run_id, "name": row.name, "rows": counts, "sample_files": files}


def _deleted(cur: Any) -> int | None:
    """Rows a DELETE removed (DuckDB returns the count as its one result row)."""
    rows = cur.fetchall()
    return int(rows[0][0]) if rows and rows[0] else None
