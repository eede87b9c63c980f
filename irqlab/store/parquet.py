"""How irqlab writes samples to Parquet: one definition for the lab's samples files
(``irqlab push --samples-dir``), the local store's sample files (store/sample_files.py)
and ``irqlab export --parquet``.

Every sample column is an integer. Sequence numbers and deadlines grow by about one
period per sample; latencies stay within a few bits of each other. DELTA_BINARY_PACKED
(Apache Parquet format, Encodings.md: each value minus the previous one, bit-packed per
miniblock of 32 values at the miniblock's own width) stores such columns in a few bits
a value, and a spike costs only its own miniblock. The writer's default, a dictionary
then snappy, is slower and larger on them. Measured with ``irqlab bench export
lab-read`` on 10 M synthetic samples, same machine, default → this: 22.3 → 2.0 bytes a
sample in the lab's file (docs/formats.md section 3a has the figures and their history).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import BinaryIO, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

# A run's raw records in a file (the lab's samples files, the local store's sample files):
# the store's own columns and types, ticks unsigned 64-bit as in the ring.
RECORD_SCHEMA = pa.schema([("seq", pa.uint64()), ("deadline_tick", pa.uint64()),
                           ("entry_tick", pa.uint64()), ("flags", pa.uint32()),
                           ("cpu", pa.uint32())])

# LZ4 on top of the deltas: near free, and catches what the deltas leave (flag patterns).
_COMPRESSION = "lz4"


def samples_writer(path: Path | str | BinaryIO, schema: pa.Schema
                   ) -> AbstractContextManager[pq.ParquetWriter]:
    """A Parquet writer of sample columns (integers only: ValueError, at once, otherwise)
    as a context manager whose file is closed on every way out (a file object given is
    the caller's to close)."""
    bad = [f.name for f in schema if not pa.types.is_integer(f.type)]
    if bad:
        raise ValueError(f"samples_writer takes integer columns only, not {', '.join(bad)}")
    return _writer(path, schema)


@contextmanager
def _writer(path: Path | str | BinaryIO, schema: pa.Schema) -> Iterator[pq.ParquetWriter]:
    """The writer on a file of our own: when the writer's close fails (ENOSPC while it
    flushes the footer), pyarrow's ParquetWriter leaves a file it opened itself open
    until the garbage collector finds the writer, and a full disk stayed busy (a test's
    tmpfs: `umount` refused for 10 s)."""
    own = isinstance(path, (str, Path))
    with pa.OSFile(str(path), "wb") if own else nullcontext(path) as sink:
        writer = pq.ParquetWriter(sink, schema, compression=_COMPRESSION,
                                  use_dictionary=False,
                                  column_encoding={f.name: "DELTA_BINARY_PACKED"
                                                   for f in schema})
        try:
            yield writer
        finally:
            writer.close()
