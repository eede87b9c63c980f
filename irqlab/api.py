"""irqlab from Python: a store's runs, summaries, windows and samples as Arrow tables in ns.

    import irqlab
    with irqlab.open_store("~/.local/share/irqlab/irqlab.duckdb") as lab:   # or postgresql://
        runs = lab.runs()                                   # Arrow (pandas: .to_pandas())
        lat = lab.samples(runs.column("run_id")[-1].as_py()).column("latency_ns")

Everything here is read-only and in integer nanoseconds (raw ticks converted exactly,
half away from zero, as irqlab.stats.units does for one value). docs/api.md documents it.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from irqlab.stats.fields import SUMMARY_FIELDS, percentiles_from
from irqlab.store import open_store as _open
from irqlab.store.arrow import numeric_array, numeric_view
from irqlab.store.interface import RunReader
from irqlab.store.provenance import facts, provenance

_NS_PER_S = 1_000_000_000

SAMPLE_SCHEMA = pa.schema([("run_id", pa.int64()), ("seq", pa.uint64()),
                          ("cpu", pa.uint32()), ("deadline_ns", pa.int64()),
                          ("latency_ns", pa.int64()), ("flags", pa.uint32())])


def ticks_to_ns_array(tick: np.ndarray, tick_hz: int) -> np.ndarray:
    """int64 ticks -> int64 ns, exactly (irqlab.stats.units.ticks_to_ns, vectorised).

    tick * 10^9 overflows int64 for a TSC after ~10 s, so the whole seconds and the
    remainder are converted apart: remainder * 10^9 < tick_hz * 10^9 fits for any
    tick_hz below 9.2 GHz."""
    if tick_hz == _NS_PER_S:
        return tick.astype(np.int64, copy=True)
    mag = np.abs(tick.astype(np.int64))
    # ns beyond int64 (292 years) means a corrupt counter, not a latency: say so.
    limit = ((2**63 - 1) // _NS_PER_S) * tick_hz
    if mag.size and int(mag.max()) > limit:
        raise OverflowError(f"a tick count of {int(mag.max())} at {tick_hz} Hz is beyond "
                            f"int64 nanoseconds")
    whole, rem = np.divmod(mag, tick_hz)
    num = rem * _NS_PER_S
    frac, left = np.divmod(num, tick_hz)
    frac += (2 * left >= tick_hz)                 # half away from zero
    ns = whole * _NS_PER_S + frac
    return np.where(tick < 0, -ns, ns)


def _fact_columns(rows: list[Any]) -> dict[str, pa.Array]:
    """Every run's provenance facts flattened (``host.clocksource``, ``knob.pin``,
    ``load.cpu``...), one column per fact any run has; null where a run has not it.
    Values are text (facts mix numbers and words across runs), null kept null."""
    flat = [facts(provenance(r)) for r in rows]
    keys: dict[str, None] = {}
    for f in flat:
        keys.update(dict.fromkeys(f))
    return {k: pa.array([None if f.get(k) is None else str(f[k]) for f in flat],
                        pa.string()) for k in keys}


class StoreView:
    """Read-only tables of one store (a DuckDB file or a lab store)."""

    def __init__(self, store: RunReader) -> None:
        self._store = store

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> "StoreView":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def runs(self) -> pa.Table:
        """One row per run: id, name, target, status, accel, tick rate, period, suite,
        then the runs' provenance facts, one text column each (docs/formats.md §4a)."""
        rows = self._store.runs()
        return pa.table({
            "run_id": pa.array([r.run_id for r in rows], pa.int64()),
            "name": [r.name for r in rows], "target": [r.target for r in rows],
            "status": [r.status for r in rows], "accel": [r.accel for r in rows],
            "emulated": pa.array([r.emulated for r in rows], pa.bool_()),
            "started_at": pa.array([r.started_at for r in rows], pa.timestamp("us")),
            "tick_hz": pa.array([r.tick_hz for r in rows], pa.int64()),
            "period_ns": pa.array([r.period_ns for r in rows], pa.int64()),
            "suite": [r.suite for r in rows], "source": [r.source for r in rows],
            **_fact_columns(rows)})

    def provenance(self, run: int | str) -> dict[str, Any]:
        """How the run was made: its provenance record (docs/formats.md, "Provenance")."""
        return provenance(self._store.resolve(str(run)))

    def summaries(self) -> pa.Table:
        """One row per run with every summary key (docs/formats.md section 4)."""
        rows = self._store.runs()
        cols: dict[str, list[Any]] = {"run_id": [r.run_id for r in rows]}
        for f in SUMMARY_FIELDS:
            if f.key not in cols:
                cols[f.key] = [(r.summary or {}).get(f.key) for r in rows]
        # Runs stored before the key existed say it too (their histogram estimate).
        cols["percentiles_from"] = [percentiles_from(r.summary or {}) for r in rows]
        return pa.table(cols)

    def windows(self, run: int | str) -> pa.Table:
        """The run's windows (the JSON window keys, ns)."""
        row = self._store.resolve(str(run))
        wins = self._store.windows(row.run_id)
        keys = ("index", "start_s", "samples", "mean_ns", "stddev_ns", "min_ns", "max_ns",
                "above_threshold", "global_min_ns", "global_max_ns")
        return pa.table({k: [w.get(k) for w in wins] for k in keys})

    def sample_batches(self, run: int | str) -> Iterator[pa.RecordBatch]:
        """The run's raw samples in ns, a batch at a time (memory bounded by a batch)."""
        row = self._store.resolve(str(run))
        hz = row.tick_hz or _NS_PER_S         # imported in ns: no rate to convert with
        for b in self._store.iter_samples(row.run_id):
            deadline = numeric_view(b.column("deadline_tick")).astype(np.int64)
            entry = numeric_view(b.column("entry_tick")).astype(np.int64)
            # u64 counters: two's complement subtraction gives the signed latency.
            yield pa.record_batch([
                numeric_array(np.full(len(b), row.run_id, np.int64)), b.column("seq"),
                b.column("cpu"), numeric_array(ticks_to_ns_array(deadline, hz)),
                numeric_array(ticks_to_ns_array(entry - deadline, hz)), b.column("flags")],
                schema=SAMPLE_SCHEMA)

    def samples(self, run: int | str) -> pa.Table:
        """The run's raw samples in ns: run_id, seq, cpu, deadline_ns, latency_ns, flags."""
        return pa.Table.from_batches(list(self.sample_batches(run)), schema=SAMPLE_SCHEMA)


def open_store(ref: str | os.PathLike) -> StoreView:
    """Open a store read-only: a DuckDB file or an export directory (``~`` expanded), or
    a postgresql:// URL."""
    return StoreView(_open(ref if isinstance(ref, str) else os.fspath(ref), read_only=True))
