"""Big runs' raw samples as Parquet files beside the DuckDB file (schema v4).

Why: DuckDB compresses what it appends, and that is the slowest part of storing a sample:
on this 2-core machine an INSERT of 10 M records took 0.7-0.9 s (11-14 M rows/s, 2.4
bytes a row), the same records written as delta-encoded Parquet (store/parquet.py) 0.3 s
(~30 M/s, 2.0 bytes a row), and DuckDB reads those files as fast as its own table. So a
run that writes big batches (an import, a run at a high rate) keeps its samples in files
``<db>.samples/run-<id>/<uuid>.parquet``, one per batch written, and the table
``sample_files`` lists them in sequence order; a run never has samples in both places.
A run at an ordinary rate keeps the ``samples`` table: a file per small window would cost
more than it saves.

Consistency is the table's: a file is written under a temporary name, fsynced and renamed
before its row is inserted, in the same transaction as whatever the row goes with (a
window, an import), so a committed row always names a whole file. A file whose row was
never committed (a rolled-back import, a crash, a full disk) is an orphan; the process
that next opens the store for writing removes them (it is then the only writer: DuckDB's
file lock, store/share.py). A file replaced by a rewrite (``shift_sample_origin``) is left
to that same sweep, since the rewrite commits or rolls back later.
"""

from __future__ import annotations

import collections
import os
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, NamedTuple

from irqlab.lazy import lazy_import
from irqlab.store.arrow import numeric_array

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    import numpy as np
    import pyarrow as pa
else:
    # numpy and pyarrow on first use (irqlab/lazy.py): `irqlab list` needs neither.
    np = lazy_import("numpy")
    pa = lazy_import("pyarrow")
# pyarrow.parquet too: irqlab.store.parquet imports it, and its schema is made with pa.
parquet = lazy_import("irqlab.store.parquet")

# A measured run keeps its samples in files when one window holds at least this many
# (10 s windows at a period of 150 us or less): each window is then one file or more, of
# a size where a file's fixed cost (open, footer, fsync: ~1 ms) is a few percent.
FILES_MIN_SAMPLES_PER_WINDOW = 65_536

# A file that retention (store/retention.py, `irqlab monitor --keep-raw`) wrote in place
# of dropped files: only their samples above the threshold, kept for good, never pruned.
KEPT_PREFIX = "kept-"

# The one shape of a sample file's name (write_file makes it; the lending socket,
# store/share.py, takes no other in a files_insert: a name is spliced into the SQL that
# reads the files, quoted, and a stray quote made the holder fall back from exact
# percentiles to the histogram's, issue 47).
_FILE_NAME = re.compile(rf"(?:{re.escape(KEPT_PREFIX)})?[0-9a-f]{{32}}\.parquet")


def new_file_name(prefix: str = "") -> str:
    """A fresh file name: ``prefix`` (none or KEPT_PREFIX) and a uuid's hex."""
    return f"{prefix}{uuid.uuid4().hex}.parquet"


def is_file_name(name: str) -> bool:
    """Whether ``name`` has the shape new_file_name gives."""
    return _FILE_NAME.fullmatch(name) is not None


# Files being written at once (Writer): pyarrow encodes outside the GIL, so one thread
# writes batch k while the caller makes batch k+1; two bound the memory held in waiting.
FILES_IN_FLIGHT = 2


def files_root(db_path: Path) -> Path:
    """Where a database's sample files live: ``<db>.samples`` beside it, as an absolute
    path (a process borrowing the store, store/share.py, may have another cwd than the
    holder that runs its queries)."""
    db = Path(os.path.abspath(db_path))
    return db.with_name(db.name + ".samples")


def run_dir(db_path: Path, run_id: int) -> Path:
    return files_root(db_path) / f"run-{int(run_id)}"


def file_path(db_path: Path, run_id: int, name: str) -> Path:
    return run_dir(db_path, run_id) / name


_PARQUET_MAGIC = b"PAR1"


def parquet_problem(path: Path) -> str | None:
    """What makes ``path`` no whole Parquet file (truncated, or not Parquet), or None.
    Checks the frame only (magic at both ends, a footer that fits: 2 small reads); a
    file damaged inside is found when its pages are decoded."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            size = f.seek(0, os.SEEK_END)
            if size < 12:
                return f"is {size} bytes long: truncated"
            f.seek(size - 8)
            tail = f.read(8)
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    if head != _PARQUET_MAGIC or tail[4:] != _PARQUET_MAGIC:
        return "has no Parquet header or footer: truncated or overwritten"
    if int.from_bytes(tail[:4], "little") + 12 > size:
        return "has a Parquet footer longer than the file: truncated"
    return None


def record_batch(records: np.ndarray) -> pa.RecordBatch:
    """RECORD_SCHEMA columns of raw records (RECORD_DTYPE)."""
    schema = parquet.RECORD_SCHEMA
    return pa.record_batch([numeric_array(records[k]) for k in schema.names], schema=schema)


def write_file(db_path: Path, run_id: int, batch: pa.RecordBatch, prefix: str = "") -> str:
    """Write one batch of a run's records as a new file, whole or not at all (temporary
    name, fsync, rename, directory fsync); returns its name (``prefix`` + a uuid)."""
    folder = run_dir(db_path, run_id)
    new_dir = not folder.is_dir()
    folder.mkdir(parents=True, exist_ok=True)
    if new_dir:
        _fsync_dir(folder.parent)
    name = new_file_name(prefix)
    tmp = folder / f".{name}.tmp"
    try:
        with parquet.samples_writer(tmp, parquet.RECORD_SCHEMA) as writer:
            writer.write_batch(batch)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, folder / name)
        _fsync_dir(folder)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return name


def _fsync_dir(folder: Path) -> None:
    """Make a rename or a new entry in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_sql(db_path: Path, run_id: int, names: Iterable[str]) -> str:
    """A FROM item reading the files in the order given (DuckDB keeps the list's order
    and each file's row order: insertion order is preserved by default)."""
    paths = ", ".join("'" + str(file_path(db_path, run_id, n)).replace("'", "''") + "'"
                      for n in names)
    return f"read_parquet([{paths}])"


class FileRow(NamedTuple):
    """A written file's row of the table sample_files."""
    run_id: int
    first_seq: int
    samples: int
    name: str


class Writer:
    """Writes a store's sample files on background threads, in the order submitted.

    The store submits a batch and goes on (the run flow polls and computes statistics
    for the next batch meanwhile: on 2 cores that overlap is what ingest's rate is
    made of); ``settle`` waits for written files and hands back their rows, which the
    store lists in its current transaction, so a committed row still names a whole
    file. A failed write discards every file after it: a run's files stay a prefix."""

    def __init__(self, db_path: Path) -> None:
        self._db_path = db_path
        self._pool: ThreadPoolExecutor | None = None
        self._pending: collections.deque[tuple[int, int, int, Future[str]]] = \
            collections.deque()

    def __len__(self) -> int:
        return len(self._pending)

    def submit(self, run_id: int, batch: pa.RecordBatch) -> None:
        """Start writing ``batch`` (RECORD_SCHEMA, not empty) as a new file of the run."""
        if self._pool is None:
            # Imported here, with the first file: concurrent.futures brings logging and
            # threading's pool (~8 ms), which `irqlab list`/`show` never use.
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=FILES_IN_FLIGHT,
                                            thread_name_prefix="irqlab-samples")
        first = int(batch.column(0)[0].as_py())
        self._pending.append((int(run_id), first, batch.num_rows,
                              self._pool.submit(write_file, self._db_path, run_id, batch)))

    def settle(self, keep: int = 0) -> tuple[list[FileRow], BaseException | None]:
        """Wait until at most ``keep`` files are still being written; returns the rows
        of those written, in order, and the first write's failure (OSError or an Arrow
        error; the files after it are then discarded too)."""
        rows: list[FileRow] = []
        while len(self._pending) > keep:
            run_id, first, n, fut = self._pending[0]
            try:
                name = fut.result()
            except (OSError, pa.ArrowException) as exc:
                self.discard()
                return rows, exc
            self._pending.popleft()
            rows.append(FileRow(run_id, first, n, name))
        return rows, None

    def discard(self) -> None:
        """Forget every file not settled yet: stop those not started, wait for those
        being written and remove them (no row will name them)."""
        while self._pending:
            run_id, _first, _n, fut = self._pending.popleft()
            if fut.cancel():
                continue
            try:
                file_path(self._db_path, run_id, fut.result()).unlink(missing_ok=True)
            except (OSError, pa.ArrowException):
                pass                       # write_file removed its own temporary

    def close(self) -> None:
        """Discard what was not settled and stop the threads."""
        self.discard()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def remove_orphans(db_path: Path, registered: set[tuple[int, str]]) -> int:
    """Remove files (and temporaries) of ``<db>.samples`` that no committed row names,
    and run folders left empty; returns how many files went. Call only as the one writer."""
    root = files_root(db_path)
    if not root.is_dir():
        return 0
    removed = 0
    for folder in root.iterdir():
        if not folder.is_dir() or not folder.name.startswith("run-"):
            continue
        try:
            run_id = int(folder.name[4:])
        except ValueError:
            continue
        for f in folder.iterdir():
            if (run_id, f.name) not in registered and f.is_file():
                f.unlink(missing_ok=True)
                removed += 1
        if not any(folder.iterdir()):
            folder.rmdir()
    return removed
