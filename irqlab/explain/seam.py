"""The one seam every explainer sits behind (issue 29), as every target sits behind
irqlab.targets.base.Target.

An explainer reads one kind of capture (``kind``: what the capture hook recorded as
``hooks.<hook>.kind`` in the run's metadata) and returns an :class:`Explanation`: the
``{"type": "explain"}`` object all explainers share (docs/formats.md §9: samples with
causes and stages, culprits, stage summary) and the files it can write (Perfetto through
the one writer, irqlab.explain.perfetto; ftrace text and trace.dat for tracefs captures).
``irqlab explain`` and ``irqlab report`` ask the registry (irqlab.explain.registry) and
name no capture kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from irqlab.store import Store, StoreError
from irqlab.store.arrow import numeric_view
from irqlab.store.db import RunRow


class Progress(Protocol):
    """Where explain says how far it is (the CLI shows it on a terminal)."""

    def stage(self, name: str, total: float | None = None, unit: str = "") -> None: ...
    def update(self, done: float, detail: str = "") -> None: ...


class Silent:
    """A Progress that says nothing (the report, the tests)."""

    def stage(self, name: str, total: float | None = None, unit: str = "") -> None:
        pass

    def update(self, done: float, detail: str = "") -> None:
        pass


@dataclass(frozen=True)
class Request:
    """Which samples to explain: one by ``sample`` seq, the ``top`` N, or those above
    ``threshold_ns`` (default the run's threshold); ``outputs``: the files asked for
    (their keys: "dat", "text", "perfetto", "chrome_json"), so an explainer keeps only
    what they need."""

    threshold_ns: int | None = None
    top: int | None = None
    sample: int | None = None
    outputs: frozenset[str] = frozenset()
    capture: Path | None = None      # a flight recorder's kept window instead of the run's


# A file writer: (path, progress) -> what was written ({"file": ..., "bytes": ...}).
Writer = Callable[[Path, Progress], dict[str, Any]]


@dataclass
class Explanation:
    """What every explainer returns: the explain object and its file writers."""

    js: dict[str, Any]
    writers: dict[str, Writer] = field(default_factory=dict)


class CaptureExplainer(Protocol):
    """One capture kind's explain. ``outputs``: the files it writes (Request.outputs
    keys); ``outputs_hint``: the one line a user gets when asking for another."""

    kind: str
    title: str
    outputs: tuple[str, ...]

    def outputs_hint(self, run: RunRow) -> str: ...

    def explain(self, store: Store, run: RunRow, request: Request,
                progress: Progress) -> Explanation: ...


def stored_samples(store: Store, run_id: int) -> dict[str, np.ndarray]:
    """A run's samples as columns (seq, deadline_tick, entry_tick, cpu, flags), or
    StoreError."""
    batches = list(store.iter_samples(run_id))
    if not batches:
        raise StoreError(f"run {run_id} has no samples to explain")
    return {k: np.concatenate([numeric_view(b.column(k)) for b in batches])
            for k in ("seq", "deadline_tick", "entry_tick", "cpu", "flags")}


def hook_meta(run: RunRow, hook: str) -> dict[str, Any]:
    """What capture hook ``hook`` recorded in the run's metadata ({} when nothing)."""
    return ((run.metadata or {}).get("hooks") or {}).get(hook) or {}
