"""A pushed run's raw samples as one Parquet file in the lab's shared directory.

``irqlab push … --samples-dir DIR`` writes a run's samples to
``DIR/<run_uuid>.<push id>.parquet`` (a name of that push's own) and the lab store
(PostgreSQL) keeps only the file's path in ``runs.samples_uri``; every read command then reads the samples from the file. Why offer it (``irqlab bench lab-read``,
10 M samples, same run): an exact p99.9 takes ~10x less time from Parquet than from
PostgreSQL's table, and the file is ~6x smaller than the rows. Why it is not the default:
every host that reads must mount the directory, and the file is a second place to back
up. docs/formats.md section 3a has the figures.

The file holds the store's own columns and types (seq, deadline_tick, entry_tick, flags,
cpu; ticks as unsigned 64-bit, as in the DuckDB store), so every figure is computed
exactly as from either database.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from irqlab.journal import undo_kind
from irqlab.store.db import StoreError
from irqlab.store.location import redact
from irqlab.store.arrow import numeric_view
from irqlab.store.parquet import RECORD_SCHEMA, samples_writer
from irqlab.store.quantiles import StoredFigures
from irqlab.stats.select import exact_figures

# Row groups of 1 M samples: a reader holds one at a time (bounded memory).
ROW_GROUP_SAMPLES = 1 << 20
# Where a reader looks when the recorded path is not mounted on its host at the same place.
SAMPLES_DIR_ENV = "IRQLAB_SAMPLES_DIR"


def samples_path(samples_dir: Path, run_uuid: uuid.UUID) -> Path:
    """A new file for one push of a run: ``<run uuid>.<push id>.parquet``. Every push
    writes a file of its own, so two pushes of one run at once never touch each other's
    file; the committed run row names the one that counts (irqlab.store.pg.PgStore.push)."""
    return samples_dir / f"{run_uuid}.{uuid.uuid4().hex[:12]}.parquet"


def write_samples_file(batches: Iterator[pa.RecordBatch], path: Path) -> int:
    """Write record batches (RECORD_SCHEMA columns) to the new file `path`, synced.
    Returns the sample count. No reader can see it half written: readers find a file only
    through the run row, committed after this returns. The caller journals `path` first
    (``samples_file``) and removes it if the push fails."""
    count = 0
    # O_EXCL: a name of our own, never another push's file.
    with open(path, "xb") as out:
        with samples_writer(out, RECORD_SCHEMA) as writer:
            for batch in batches:
                table = pa.Table.from_batches([batch]).select(RECORD_SCHEMA.names)
                writer.write_table(table.cast(RECORD_SCHEMA),
                                   row_group_size=ROW_GROUP_SAMPLES)
                count += batch.num_rows
        out.flush()
        os.fsync(out.fileno())
    return count


def remove_unpublished(path: Path) -> None:
    """Remove a file this process wrote and no run row names (a failed or losing push)."""
    path.unlink(missing_ok=True)


@undo_kind("samples_file")
def _undo_samples_file(entry: dict[str, Any]) -> str:
    """A push died between writing its samples file and closing this entry: remove the
    file unless the lab store's committed row names it (the push died just after its
    commit). Ask the store; if it cannot be asked, keep the file (never lose a run's
    samples) and say how to decide."""
    path = Path(entry["path"])
    if not path.exists():
        return f"samples file {path} of a killed push: already gone"
    url = str(entry.get("url") or "")
    try:
        published = _named_by_a_run(url, str(path))
    except Exception as exc:                  # noqa: BLE001 - any failure: keep the file
        return (f"kept {path}, the samples file of a killed push: could not ask "
                f"{redact(url)} whether a run names it ({redact(str(exc).strip())[:200]}); "
                f"delete it if no run's samples_file is this path")
    if published:
        return f"kept {path}: the killed push had committed its run"
    remove_unpublished(path)
    return f"removed {path}, the unpublished samples file of a killed push"


def _named_by_a_run(url: str, path: str) -> bool:
    """Does a committed run of the lab store at `url` name `path` as its samples file?"""
    import psycopg
    with psycopg.connect(url, connect_timeout=10) as con, con.cursor() as cur:
        cur.execute("SELECT 1 FROM runs WHERE samples_uri = %s LIMIT 1", (path,))
        return cur.fetchone() is not None


class SamplesFile:
    """One run's samples file, read (irqlab.store.interface.RunSamples)."""

    def __init__(self, uri: str) -> None:
        self.path = _locate(uri)
        try:
            self.file = pq.ParquetFile(self.path)
        except (OSError, pa.ArrowException) as exc:
            raise StoreError(f"cannot read the samples file {self.path}: "
                             f"{str(exc).splitlines()[0]}") from None
        if not RECORD_SCHEMA.equals(self.file.schema_arrow):
            raise StoreError(f"{self.path} is not an irqlab samples file (columns "
                             f"{', '.join(self.file.schema_arrow.names)})")

    def count(self) -> int:
        return self.file.metadata.num_rows

    def figures(self, quantiles: list[float], threshold_tick: int | None = None,
                histogram: Any = None) -> StoredFigures:
        """By the DuckDB store's bounded-memory selection over the file's latencies."""
        got = exact_figures(lambda: self.iter_latency(), quantiles, threshold_tick,
                            histogram)
        return StoredFigures(got.count, got.min_tick, got.max_tick, got.above,
                             got.quantile_tick)

    def iter_samples(self, batch: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        """Records in sequence order (push writes them so)."""
        yield from self.file.iter_batches(batch_size=batch)

    def iter_latency(self, batch: int = 1 << 20, with_deadline: bool = False
                     ) -> Iterator[object]:
        """Latencies in ticks (int64): entry - deadline in 64-bit two's complement, the
        rule of irqlab.store.quantiles.LATENCY_SQL."""
        for rb in self.file.iter_batches(batch_size=batch,
                                         columns=["deadline_tick", "entry_tick"]):
            deadline = numeric_view(rb.column(0)).view(np.int64)
            lat = numeric_view(rb.column(1)).view(np.int64) - deadline
            yield (lat, deadline) if with_deadline else lat

    def iter_by_deadline(self, batch: int = 1_000_000
                         ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(deadline_tick, entry_tick, flags) as int64 in deadline order (then seq).
        Sorts the whole run in memory: only recovering a dead run asks for this order,
        and a run whose samples are in a file was pushed, never recovered."""
        table = self.file.read(columns=["seq", "deadline_tick", "entry_tick", "flags"])
        order = pc.sort_indices(table, [("deadline_tick", "ascending"),
                                                ("seq", "ascending")])
        table = table.take(order)
        for rb in table.to_batches(max_chunksize=batch):
            yield (numeric_view(rb.column(1)).view(np.int64),
                   numeric_view(rb.column(2)).view(np.int64),
                   numeric_view(rb.column(3)).astype(np.int64))


def _locate(uri: str) -> Path:
    """The file as recorded, or by its name under $IRQLAB_SAMPLES_DIR (the directory is
    mounted elsewhere on this host)."""
    path = Path(uri)
    if path.is_file():
        return path
    alt = os.environ.get(SAMPLES_DIR_ENV)
    if alt and (Path(alt) / path.name).is_file():
        return Path(alt) / path.name
    where = f" nor in ${SAMPLES_DIR_ENV} ({alt})" if alt else ""
    raise StoreError(f"the run's samples are in {uri}, which is not on this host{where}: "
                     f"mount the lab's samples directory there, or set ${SAMPLES_DIR_ENV} "
                     f"to where it is mounted")
