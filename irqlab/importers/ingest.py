"""Write parsed runs into the store: every run of an import in one transaction.

Raw samples a format streams (ParsedRun.samples) go from the file into the store batch
by batch inside that transaction: memory does not grow with the file, and a bad line
anywhere still means nothing lands."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import duckdb
import numpy as np
import pyarrow as pa

from irqlab import __version__
from irqlab.importers.base import PARSE_ERRORS, ImportFormatError, ParsedRun, located_error
from irqlab.importers.summary import PCT_KEYS, SampleFigures, build_summary
from irqlab.importers.validate import check_samples, validate_run
from irqlab.samples.record import RECORD_DTYPE
from irqlab.stats import LogHistogram, Moments
from irqlab.stats.histogram import hist_and_moments
from irqlab.store import Store, StoreError
from irqlab.store.db import _utcnow
from irqlab.store.interface import NewRun

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


def _records(latency_tick: np.ndarray, origin: int | None = None,
             first_seq: int = 0) -> np.ndarray:
    """Raw samples as ring records: the latency is entry - deadline, the deadline a
    constant origin high enough that negative latencies stay representable (by default
    max(0, -min latency))."""
    lat = np.asarray(latency_tick, dtype=np.int64)
    if origin is None:
        origin = max(0, -int(lat.min())) if len(lat) else 0
    rec = np.zeros(len(lat), dtype=RECORD_DTYPE)
    rec["seq"] = np.arange(first_seq, first_seq + len(lat), dtype=np.uint64)
    rec["deadline_tick"] = origin
    rec["entry_tick"] = (lat + origin).astype(np.uint64)
    return rec


def _store_streamed(store: Store, run: ParsedRun, run_id: int) -> SampleFigures:
    """Read a run's samples from its file into the store as one streamed INSERT (memory
    bounded by a batch or two); returns their figures: moments streamed, percentiles
    exact from the stored samples. The stored records are those `_records` makes of all
    samples at once: the origin is max(0, -min latency), so rows written before a lower
    latency turned up are shifted afterwards (rare: latencies are seldom negative)."""
    assert run.samples is not None
    moments = Moments()
    hist = LogHistogram()          # lets the store find exact percentiles in one pass
    origins: list[tuple[int, int]] = []        # (first seq, origin) of each stretch
    finished = []

    def latencies() -> Iterator[tuple[int, int, np.ndarray]]:
        seq = 0
        for batch in run.samples.batches():
            if not batch.size:
                continue
            seg = hist_and_moments(batch, hist, moments)
            need = max(0, -int(seg.min[0]))
            if not origins or need > origins[-1][1]:
                origins.append((seq, need))
            yield seq, origins[-1][1], batch      # stored as _records would make them
            seq += batch.size
        run.samples.finish(run)
        finished.append(True)

    store.keep_samples_in_files(run_id)      # big by nature: sample files, not rows
    try:
        store.add_latency_stream(run_id, latencies())
        if not finished:
            raise StoreError(f"run {run_id}: the samples were not all stored")
    except PARSE_ERRORS as exc:
        raise located_error(run.source, run.path, exc) from None
    final = origins[-1][1] if origins else 0
    for (first, origin), (nxt, _o) in zip(origins, origins[1:] + [(moments.count, 0)]):
        if origin < final:
            store.shift_sample_origin(run_id, final - origin, first, nxt)
    if moments.count:
        check_samples(run, moments.min, moments.max)
    stored = store.sample_figures(run_id, [q for _key, q in PCT_KEYS], histogram=hist)
    if stored.count != moments.count:
        raise StoreError(f"stored {stored.count} samples of run {run_id}, read "
                         f"{moments.count}")
    return SampleFigures(moments, {key: v for (key, _q), v in zip(PCT_KEYS,
                                                                  stored.quantile_tick)})


def _store_one(store: Store, run: ParsedRun, name: str, tags: dict[str, str],
               params: dict[str, Any]) -> StoredRun:
    run_id = store.next_run_id()
    if run.samples is not None:
        # Samples first (the file's last line may hold the tick rate), then the row.
        figures = _store_streamed(store, run, run_id)
        validate_run(run)
        summary = build_summary(run, run_id, name, samples=figures)
    else:
        summary = build_summary(run, run_id, name)
    meta = {"irqlab_version": __version__, "import": {"format": run.source, "file": run.path,
                                                      "line": run.line, **run.provenance}}
    if run.host:
        meta["host"] = dict(run.host)
    if run.probe:
        meta["probe"] = dict(run.probe)
    # One statement per table: the id first, so the summary goes in with the row.
    store.create_run(NewRun(
        name, IMPORT_TARGET, params, meta, kind=run.kind, source=run.source, tags=tags,
        status="ok", run_id=run_id,
        columns={"tick_hz": run.tick_hz, "period_ns": run.period_ns,
                 "threshold_ns": run.threshold_ns, "summary": summary,
                 "ended_at": _utcnow()}))
    store.add_windows(run_id, run.windows)
    store.add_histograms(run_id, {series: s.buckets for series, s in run.series.items()})
    stored = summary["samples"] if run.samples is not None else 0
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
