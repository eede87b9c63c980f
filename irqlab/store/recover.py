"""Runs whose irqlab process died: found at every store open, closed as ``died``.

A measuring irqlab records who writes the run (``metadata.writer``: pid, process start
time, boot id; :func:`writer_identity`). DuckDB holds a file lock for as long as a process
has the database open, and a holder closes dead runs before it lends the file to anyone
(store/share.py), so when we have it open, no other process is writing: a run still
``running`` whose writer is not this very process is dead (killed, crashed, power cut).
It becomes ``died`` with a message, and a summary computed from the samples that were
stored (the windows stored with them stay as they are). A lab store (PostgreSQL) has
writers on many hosts at once: there a run is dead only when :func:`writer_gone` says so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

import duckdb

from irqlab.stats.fields import make_summary, stats_figures

if TYPE_CHECKING:
    import numpy as np


class DeadRunStore(Protocol):
    """What closing a dead run reads and writes of the DuckDB store (irqlab.store.db.Store,
    which calls this module at every open, so this module names no class of it; it also
    passes the store to irqlab.store.percentiles, whose SampleStore it satisfies)."""

    def _query(self, sql: str, params: list[Any] | None = None) -> Any: ...
    def resolve(self, ref: str) -> Any: ...
    def sample_count(self, run_id: int) -> int: ...
    def finish_run(self, run_id: int, status: str, summary: dict[str, Any] | None,
                   message: str | None = None) -> None: ...
    def iter_samples_by_deadline(self, run_id: int, batch: int = 1_000_000
                                 ) -> Iterator[tuple["np.ndarray", "np.ndarray",
                                                     "np.ndarray"]]: ...

_FLAG_INJECTED = 1     # irqlab.samples.record.FLAG_INJECTED (the ring format, section 2)


def _starttime(pid: int) -> int | None:
    """Start time of a process (clock ticks since boot); None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        return int(text[text.rfind(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def writer_identity() -> dict[str, Any]:
    """This process as the writer of a run (kept in ``metadata.writer``)."""
    pid = os.getpid()
    return {"pid": pid, "starttime": _starttime(pid), "boot_id": _boot_id()}


def _is_this_process(writer: Any) -> bool:
    if not isinstance(writer, dict):
        return False
    pid = os.getpid()
    return writer.get("pid") == pid and writer.get("starttime") == _starttime(pid)


def writer_gone(writer: Any) -> bool:
    """Whether a run's recorded writer is known to be gone: it ran on this host (same
    boot) and that process no longer exists (pid reused: another start time). A writer on
    another host, or not recorded, cannot be judged from here (a lab store's rule)."""
    if not isinstance(writer, dict) or writer.get("boot_id") is None:
        return False
    if writer.get("boot_id") != _boot_id():
        return False
    pid = writer.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    return _starttime(pid) != writer.get("starttime")


def dead_running_runs(store: DeadRunStore) -> list[tuple[int, dict[str, Any]]]:
    """``(run_id, metadata)`` of every ``running`` run not written by this process."""
    import json

    rows = store._query("SELECT run_id, metadata FROM runs WHERE status = 'running'"
                        ).fetchall()
    out = []
    for run_id, meta in rows:
        try:
            meta = json.loads(meta) if meta else {}
        except ValueError:
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        if not _is_this_process(meta.get("writer")):
            out.append((int(run_id), meta))
    return out


def close_dead_run(store: DeadRunStore, run_id: int, meta: dict[str, Any]) -> str:
    """Mark one dead run ``died`` with a message and a summary from its stored samples;
    returns the message."""
    row = store.resolve(str(run_id))
    writer = meta.get("writer") if isinstance(meta.get("writer"), dict) else {}
    who = (f"irqlab process {writer.get('pid')}" if writer.get("pid") else
           "the irqlab process (not recorded: an older irqlab wrote this run)")
    params = row.params or {}
    n = store.sample_count(run_id)
    injected = 0
    summary_stats = None
    why_no_stats = ""
    if n and row.tick_hz:
        try:
            summary_stats, injected = _stats_of(store, run_id, row, params)
        except (ValueError, ArithmeticError, duckdb.Error) as exc:
            why_no_stats = f" (no statistics: {exc})"
    message = (f"died: {who} ended without closing this run (killed or crashed); "
               f"summary computed from the {n} samples stored{why_no_stats}")
    summary = make_summary(run_id, row.name, {
        "target": row.target, "arch": row.arch, "accel": row.accel,
        "emulated": row.emulated, "status": "died", "lost": None, "overruns": None,
        "tick_hz": row.tick_hz, "period_ns": row.period_ns,
        "threshold_ns": row.threshold_ns, "injected": injected, "message": message,
        **stats_figures(summary_stats, row.tick_hz)})
    if summary_stats is not None:
        from irqlab.store.percentiles import with_exact_percentiles

        # Exact percentiles of the stored samples, as every finished run has.
        with_exact_percentiles(store, run_id, summary, summary_stats.histogram)
    store.finish_run(run_id, "died", summary, message)
    return message


def _stats_of(store: DeadRunStore, run_id: int, row: Any, params: dict[str, Any]
              ) -> tuple[Any, int]:
    """The run's statistics recomputed from its stored samples, and the injected count."""
    # Here, not at the top: every store open imports this module to look for dead runs,
    # and numpy is needed only when one is found (docs/design.md, "Start-up").
    import numpy as np

    from irqlab.stats import RunStats

    injected = 0
    tick_hz = int(row.tick_hz)
    threshold_ns = int(params.get("threshold_ns") or row.threshold_ns or 0)
    window_ns = int(params.get("window_ns") or 10_000_000_000)
    stats = RunStats(tick_hz, threshold_ns * tick_hz // 1_000_000_000,
                     max(1, window_ns * tick_hz // 1_000_000_000),
                     int(params.get("warmup") or 0))
    for dl, en, flags in store.iter_samples_by_deadline(run_id):
        stats.add(dl, en - dl)
        injected += int(np.count_nonzero(flags & _FLAG_INJECTED))
    _last, summary_stats = stats.finish()
    return summary_stats, injected
