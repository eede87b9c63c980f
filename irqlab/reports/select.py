"""Run selectors shared by ``compare``, ``report`` and ``check``.

A selector is a run id, a run name (the latest run of that name), ``tag:KEY=VALUE`` (every
run with that tag) or ``suite:NAME`` (every run of that suite or matrix), in run-id order.
"""

from __future__ import annotations

from irqlab.store import Store, StoreError
from irqlab.store.db import RunRow

TAG_PREFIX = "tag:"
SUITE_PREFIX = "suite:"


def select_runs(store: Store, refs: list[str]) -> list[RunRow]:
    """Runs named by ``refs`` in the order given; a run selected twice appears once."""
    if not refs:
        raise StoreError("no run given: name runs by id, name, tag:KEY=VALUE or suite:NAME "
                         "(`irqlab list` shows them)")
    chosen: list[RunRow] = []
    seen: set[int] = set()
    for ref in refs:
        for row in _select_one(store, ref):
            if row.run_id not in seen:
                seen.add(row.run_id)
                chosen.append(row)
    return chosen


def _select_one(store: Store, ref: str) -> list[RunRow]:
    if ref.startswith(TAG_PREFIX):
        key, sep, value = ref[len(TAG_PREFIX):].partition("=")
        if not sep or not key:
            raise StoreError(f"bad selector {ref!r}: write tag:KEY=VALUE, e.g. tag:kernel=6.1")
        rows = [r for r in store.runs() if r.tags.get(key) == value]
        if not rows:
            raise StoreError(f"no run has tag {key}={value} in {store.path}: "
                             f"`irqlab list --json` shows the runs")
        return rows
    if ref.startswith(SUITE_PREFIX):
        name = ref[len(SUITE_PREFIX):]
        rows = [r for r in store.runs() if r.suite == name]
        if not rows:
            raise StoreError(f"no run belongs to suite {name!r} in {store.path}: "
                             f"`irqlab list --json` shows the runs")
        return rows
    return [store.resolve(ref)]
