"""The store's declared interface: what every command reads of a store (RunReader) and
what the run flow and the importers write (RunWriter), split because only the DuckDB
file is written by a run (the lab store is written by `irqlab push`; an export
directory is read-only).

Implemented by irqlab.store.db.Store (both), irqlab.store.pg.PgStore (the lab store),
irqlab.store.export_dir.ExportStore (an `irqlab export` directory) and, through the
DuckDB store, the lending socket's proxy (irqlab.store.share): a borrowed store reads
through its holder. One run's raw samples, wherever they lie, are a RunSamples: a pushed
run's Parquet file (irqlab.store.samples_file.SamplesFile) or the lab store's table
(irqlab.store.pg.TableSamples); the lab store reads every run through one, never asking
which. Callers are typed against these and never ask which backend they
hold (hyperfine's exporters are one trait; rtla's tools one struct). A new backend is
one module and one line of irqlab.store.BACKENDS.

Light (no DuckDB, numpy or pyarrow at run time): commands name it in signatures.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

if TYPE_CHECKING:
    import datetime as dt

    import numpy as np
    import pyarrow as pa

    from irqlab.stats.histogram import LogHistogram
    from irqlab.store.quantiles import StoredFigures


@dataclass
class RunRow:
    """One row of ``runs`` with JSON columns decoded."""

    run_id: int
    name: str
    target: str
    arch: str | None
    accel: str | None
    emulated: bool | None
    status: str
    started_at: dt.datetime
    ended_at: dt.datetime | None
    tick_hz: int | None
    period_ns: int | None
    threshold_ns: int | None
    message: str | None
    params: dict[str, Any]
    metadata: dict[str, Any]
    summary: dict[str, Any] | None
    kind: str = "latency"
    source: str = "irqlab"
    tags: dict[str, str] = field(default_factory=dict)
    suite: str | None = None
    cell: dict[str, Any] | None = None

    def shown_summary(self) -> dict[str, Any]:
        """The summary readers show (`irqlab show`, `irqlab serve`): the stored one, or for
        a run without one yet (still running, or killed before it wrote one) every summary
        key, the unknown ones None."""
        if self.summary:
            return self.summary
        from irqlab.stats.fields import make_summary
        return make_summary(self.run_id, self.name, {
            "target": self.target, "arch": self.arch, "accel": self.accel,
            "emulated": self.emulated, "status": self.status, "tick_hz": self.tick_hz,
            "period_ns": self.period_ns, "threshold_ns": self.threshold_ns,
            "samples": None, "above_threshold": None,
            "message": self.message or "run has no summary yet (still running, or irqlab "
                                       "was killed before it could write one)"})


class RunReader(Protocol):
    """A store's runs, read-only: rows, windows, histograms and raw samples in ticks."""

    # What messages name: a file, a redacted URL, a directory.
    path: Path | str
    # The SQL the store speaks to serve's runs page ("duckdb" or "postgres"): the page
    # cuts itself in the database, in the store's own dialect.
    sql_dialect: str
    # A DuckDB file another process holds and lends (store/share.py): its pid, else None.
    holder_pid: int | None

    def close(self) -> None: ...
    def __enter__(self) -> RunReader: ...
    def __exit__(self, *exc: object) -> None: ...
    def runs(self) -> list[RunRow]: ...
    def resolve(self, ref: str) -> RunRow: ...
    def windows(self, run_id: int) -> list[dict[str, Any]]: ...
    def histogram(self, run_id: int) -> dict[str, list[tuple[int, int | None, int]]]: ...
    def sample_count(self, run_id: int) -> int: ...

    def sample_figures(self, run_id: int, quantiles: list[float],
                       threshold_tick: int | None = None,
                       histogram: LogHistogram | None = None) -> StoredFigures: ...

    def iter_samples(self, run_id: int, batch: int = 1_000_000
                     ) -> Iterator[pa.RecordBatch]: ...

    def iter_samples_by_deadline(self, run_id: int, batch: int = 1_000_000
                                 ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        ...

    def iter_latency(self, run_id: int, batch: int = 1 << 20, with_deadline: bool = False,
                     in_sequence: bool = False) -> Iterator[Any]: ...


class RunSamples(Protocol):
    """One run's raw samples and their exact figures, in ticks."""

    def count(self) -> int: ...

    def figures(self, quantiles: list[float], threshold_tick: int | None = None,
                histogram: LogHistogram | None = None) -> StoredFigures: ...

    def iter_samples(self, batch: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        """Records in sequence order (seq, deadline_tick, entry_tick, flags, cpu)."""
        ...

    def iter_latency(self, batch: int = 1 << 20, with_deadline: bool = False
                     ) -> Iterator[Any]:
        """Latencies in ticks (int64) in sequence order; with ``with_deadline``,
        (latency, deadline) pairs."""
        ...

    def iter_by_deadline(self, batch: int = 1_000_000
                         ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(deadline_tick, entry_tick, flags) as int64 in deadline order (then seq)."""
        ...


@dataclass
class NewRun:
    """A run as it goes into a store (RunWriter.create_run): its row's columns. ``run_id``
    from RunWriter.next_run_id and ``columns`` (tick_hz, summary, ended_at ...) let a
    finished run go in with one statement (imports)."""

    name: str
    target: str
    params: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: str = "latency"
    source: str = "irqlab"
    tags: dict[str, str] | None = None
    suite: str | None = None
    cell: dict[str, Any] | None = None
    status: str = "running"
    started_at: dt.datetime | None = None
    run_id: int | None = None
    columns: dict[str, Any] = field(default_factory=dict)


class RunWriter(RunReader, Protocol):
    """A store a run (or an import) is written into."""

    write_failed: str | None       # the first failed write's reason (a full disk)

    def create_run(self, run: NewRun) -> int: ...
    def next_run_id(self) -> int: ...
    def update_run(self, run_id: int, **fields: Any) -> None: ...

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any] | None,
                   message: str | None = None) -> None: ...

    def add_windows(self, run_id: int, windows: list[dict[str, Any]]) -> None: ...

    def add_histogram(self, run_id: int, series: str,
                      buckets: list[tuple[int, int | None, int]]) -> None: ...

    def add_samples(self, run_id: int, records: np.ndarray) -> None: ...
    def keep_samples_in_files(self, run_id: int) -> bool: ...
    def release_memory(self) -> None: ...
    def transaction(self) -> contextlib.AbstractContextManager[None]: ...
