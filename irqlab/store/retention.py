"""Retention of raw samples (``irqlab monitor --keep-raw``): bounded disk for a run that
never ends.

What is kept for good: every window and histogram row, and every raw sample above the
run's threshold. What goes: the other raw samples, once their file is older than the
retention time, in whole files (a run's samples live one file per window,
store/sample_files.py). A file's age is its modification time: it is written once, when
its window closes, and never touched again (a copy that resets it only delays its end).

Each pass reads the files it drops, one at a time, and writes their samples above the
threshold as one ``kept-*.parquet`` file in their place (Store.drop_sample_files: one
transaction swaps the rows; the orphan sweep makes it crash-safe). Kept files are
never pruned again; beyond KEPT_FILES_MAX they are merged (compact_kept), so a run's
file count stays bounded too. Memory is bounded by one file plus the kept records, which are cut
into files of at most KEPT_MAX_RECORDS.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from irqlab.lazy import lazy_import
from irqlab.store import sample_files

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from irqlab.store.db import Store
else:
    np = lazy_import("numpy")
    pa = lazy_import("pyarrow")
    pq = lazy_import("pyarrow.parquet")

# Kept (above-threshold) records in one kept file at most: a threshold below every
# latency keeps everything, and that must not be read into memory at once.
KEPT_MAX_RECORDS = 1_000_000
# Kept files a run may have before they are merged (compact_kept).
KEPT_FILES_MAX = 16


@dataclass
class Pruned:
    """What one pass (or several, added up) did to one run's raw samples."""

    files: int = 0              # files dropped
    samples: int = 0            # raw samples in them
    kept: int = 0               # of which above the threshold, kept in kept-* files
    more: bool = False          # prunable files were left for the next call (a budget)

    def add(self, other: Pruned) -> None:
        self.files += other.files
        self.samples += other.samples
        self.kept += other.kept

    def as_dict(self) -> dict[str, int]:
        return {"dropped_files": self.files, "dropped_samples": self.samples - self.kept,
                "kept_above_threshold": self.kept}


def latencies_tick(table: pa.Table | pa.RecordBatch) -> np.ndarray:
    """Latency in ticks of stored records: entry - deadline, the u64 counters'
    two's-complement difference (docs/formats.md section 2)."""
    entry = table.column("entry_tick").to_numpy(zero_copy_only=False).astype(np.int64)
    deadline = table.column("deadline_tick").to_numpy(zero_copy_only=False).astype(np.int64)
    return entry - deadline


def old_files(store: Store, run_id: int, older_than_s: float) -> list[str]:
    """Names of the run's prunable files (not kept-*) last written before the epoch
    time ``older_than_s``, in sequence order."""
    out = []
    for _first, _n, name in store.sample_file_rows(run_id):
        if name.startswith(sample_files.KEPT_PREFIX):
            continue
        try:
            mtime = os.stat(sample_files.file_path(store.path, run_id, name)).st_mtime
        except FileNotFoundError:
            continue          # listed but gone: the store's readers say so, not this
        if mtime < older_than_s:
            out.append(name)
    return out


def prune_run(store: Store, run_id: int, keep_raw_s: float, threshold_tick: int,
              now_s: float | None = None, max_samples: int | None = None) -> Pruned:
    """Drop the run's raw samples older than ``keep_raw_s`` seconds, keeping those whose
    latency is above ``threshold_tick`` (latency_tick > threshold_tick, the windows'
    ``above_threshold`` rule). ``max_samples``: stop after the file that reaches this
    many samples read (a caller that must get back to its ring soon; ``done.more``
    says files were left for the next call)."""
    cutoff = (time.time() if now_s is None else now_s) - keep_raw_s
    done = Pruned()
    names = every = old_files(store, run_id, cutoff)
    if max_samples is not None:
        names = _within_budget(store, run_id, every, max_samples)
        done.more = len(names) < len(every)
    group: list[str] = []
    kept: list[pa.Table] = []
    kept_n = 0
    for name in names:
        table = pq.read_table(sample_files.file_path(store.path, run_id, name))
        above = latencies_tick(table) > threshold_tick
        if above.any():
            kept.append(table.filter(pa.array(above)))
            kept_n += int(above.sum())
            done.kept += int(above.sum())
        group.append(name)
        done.files += 1
        done.samples += table.num_rows
        if kept_n >= KEPT_MAX_RECORDS:
            _swap(store, run_id, group, kept)
            group, kept, kept_n = [], [], 0
    if group:
        _swap(store, run_id, group, kept)
    if done.files:
        compact_kept(store, run_id)
    return done


def compact_kept(store: Store, run_id: int) -> int:
    """Merge a run's kept-* files once there are more than KEPT_FILES_MAX (each pass
    with a spike adds one: a monitor at --keep-raw 5m would add 1,440 a day), runs of
    neighbours into files of at most KEPT_MAX_RECORDS; returns the files merged away.
    Kept files are older than every raw file left (retention goes oldest first), so
    neighbours in sequence order merge without reordering anything."""
    rows = store.sample_file_rows(run_id)
    kept = [(n, name) for _f, n, name in rows if name.startswith(sample_files.KEPT_PREFIX)]
    if len(kept) <= KEPT_FILES_MAX:
        return 0
    merged = 0
    group: list[str] = []
    total = 0
    for n, name in [*kept, (KEPT_MAX_RECORDS, "")]:     # a sentinel ends the last group
        if group and total + n > KEPT_MAX_RECORDS:
            if len(group) > 1:
                tables = [pq.read_table(sample_files.file_path(store.path, run_id, g))
                          for g in group]
                _swap(store, run_id, group, tables)
                merged += len(group) - 1
            group, total = [], 0
        if name:
            group.append(name)
            total += n
    return merged


def _within_budget(store: Store, run_id: int, names: list[str], max_samples: int
                   ) -> list[str]:
    """The first of ``names`` up to and including the one reaching ``max_samples``."""
    sizes = {name: n for _f, n, name in store.sample_file_rows(run_id)}
    out, total = [], 0
    for name in names:
        if total >= max_samples:
            break
        out.append(name)
        total += sizes.get(name, 0)
    return out


def _swap(store: Store, run_id: int, names: list[str], kept: list[pa.Table]) -> None:
    batch = None
    if kept:
        table = pa.concat_tables(kept).combine_chunks()
        batch = table.to_batches()[0] if table.num_rows else None
    store.drop_sample_files(run_id, names, batch)
