"""Write parsed runs into the store: every run of an import in one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from irqlab import __version__
from irqlab.importers.base import ImportFormatError, ParsedRun
from irqlab.importers.summary import build_summary
from irqlab.samples.record import RECORD_DTYPE
from irqlab.store import Store, StoreError
from irqlab.store.db import _utcnow

IMPORT_TARGET = "import"


@dataclass
class StoredRun:
    run_id: int
    name: str
    summary: dict[str, Any]
    windows: int
    series: int
    samples_stored: int


def run_names(runs: list[ParsedRun], base: str | None) -> list[str]:
    """Names of one file's runs: --name or the file stem, plus the source's label.

    tbm table rows are named by their row label alone (the label is the run's name in
    the source); several unlabeled runs of one file are numbered #1, #2 …
    """
    names = []
    for i, run in enumerate(runs, start=1):
        stem = base or Path(run.path).stem
        if run.name and run.source == "tbm" and run.provenance.get("shape") == "table":
            names.append(f"{base}/{run.name}" if base else run.name)
        elif run.name:
            names.append(f"{stem}/{run.name}")
        elif len(runs) > 1:
            names.append(f"{stem}#{i}")
        else:
            names.append(stem)
    return names


def _records(latency_tick: np.ndarray) -> np.ndarray:
    """Raw samples as ring records: the latency is entry - deadline, the deadline a
    constant origin high enough that negative latencies stay representable."""
    lat = np.asarray(latency_tick, dtype=np.int64)
    origin = max(0, -int(lat.min())) if len(lat) else 0
    rec = np.zeros(len(lat), dtype=RECORD_DTYPE)
    rec["seq"] = np.arange(len(lat), dtype=np.uint64)
    rec["deadline_tick"] = origin
    rec["entry_tick"] = (lat + origin).astype(np.uint64)
    return rec


def _store_one(store: Store, run: ParsedRun, name: str, tags: dict[str, str],
               params: dict[str, Any]) -> StoredRun:
    meta = {"irqlab_version": __version__, "import": {"format": run.source, "file": run.path,
                                                      "line": run.line, **run.provenance}}
    # One statement per table: the id first, so the summary goes in with the row.
    run_id = store.next_run_id()
    summary = build_summary(run, run_id, name)
    store.create_run(name, IMPORT_TARGET, params, meta, kind=run.kind, source=run.source,
                     tags=tags, status="ok", run_id=run_id, tick_hz=run.tick_hz,
                     period_ns=run.period_ns, threshold_ns=run.threshold_ns,
                     summary=summary, ended_at=_utcnow())
    store.add_windows(run_id, run.windows)
    store.add_histograms(run_id, {series: s.buckets for series, s in run.series.items()})
    stored = 0
    if run.latency_tick is not None:
        recs = run.records if run.records is not None else _records(run.latency_tick)
        store.add_samples(run_id, recs)
        stored = len(recs)
    return StoredRun(run_id, name, summary, len(run.windows), len(run.series), stored)


def store_runs(store: Store, batches: list[tuple[list[ParsedRun], list[str]]],
               tags: dict[str, str], params: dict[str, Any]) -> list[StoredRun]:
    """Store every (runs, names) batch; nothing lands unless all of it does.

    A value the summary or the database cannot hold (validate_run should have refused
    it) is an ImportFormatError naming the run's file and line, never a traceback."""
    out: list[StoredRun] = []
    with store.transaction():
        for runs, names in batches:
            for run, name in zip(runs, names):
                try:
                    out.append(_store_one(store, run, name, tags, params))
                except (StoreError, ImportFormatError):
                    raise
                except (duckdb.Error, pa.ArrowException, OverflowError, ValueError,
                        TypeError, ArithmeticError) as exc:
                    msg = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
                    raise ImportFormatError(run.path, run.line, "values irqlab can store",
                                            f"{type(exc).__name__}: {msg}") from None
    return out
