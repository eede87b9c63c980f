"""A pushed run's raw samples as one Parquet file in the lab's shared directory.

``irqlab push … --samples-dir DIR`` writes a run's samples to ``DIR/<run_uuid>.parquet``
and the lab store (PostgreSQL) keeps only the file's path in ``runs.samples_uri``; every
read command then reads the samples from the file. Why offer it (``irqlab bench lab-read``,
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
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from irqlab.store.db import StoreError
from irqlab.store.arrow import numeric_view
from irqlab.store.parquet import RECORD_SCHEMA, samples_writer

# Row groups of 1 M samples: a reader holds one at a time (bounded memory).
ROW_GROUP_SAMPLES = 1 << 20
# Where a reader looks when the recorded path is not mounted on its host at the same place.
SAMPLES_DIR_ENV = "IRQLAB_SAMPLES_DIR"


def samples_path(samples_dir: Path, run_uuid: uuid.UUID) -> Path:
    """The file of one run in the shared directory."""
    return samples_dir / f"{run_uuid}.parquet"


def write_samples_file(batches: Iterator[pa.RecordBatch], path: Path) -> int:
    """Write record batches (RECORD_SCHEMA columns) to `path` atomically: a temporary
    file beside it, synced, then renamed, so a reader never sees half a file. Returns the
    sample count."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    count = 0
    try:
        with samples_writer(tmp, RECORD_SCHEMA) as writer:
            for batch in batches:
                table = pa.Table.from_batches([batch]).select(RECORD_SCHEMA.names)
                writer.write_table(table.cast(RECORD_SCHEMA),
                                   row_group_size=ROW_GROUP_SAMPLES)
                count += batch.num_rows
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return count


class SamplesFile:
    """Read one run's samples file: the sample readers of the store interface."""

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
