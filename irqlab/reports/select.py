"""Run selectors shared by ``compare``, ``report`` and ``check``.

A selector is a run id, a run name (the latest run of that name), ``tag:KEY=VALUE`` (every
run with that tag), ``suite:NAME`` (every run of that suite or matrix) or ``series:ID``
(every run of the series ``irqlab run --repeat`` made, tag ``series=ID``; ``series:NAME``
with a run name: the runs of the latest series of runs named NAME), in run-id order.
A name no run has, given to an import that made several runs (`import rtla-timerlat
--name rtla` makes rtla/irq and rtla/thread), selects that import's runs: the group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from irqlab.store.errors import StoreError

if TYPE_CHECKING:       # light: list, show and the parser import this (design.md "Start-up")
    from irqlab.store import Store
    from irqlab.store.db import RunRow

TAG_PREFIX = "tag:"
SUITE_PREFIX = "suite:"
SERIES_PREFIX = "series:"
SERIES_TAG = "series"      # the runs.tags (and runs.metadata) key of irqlab.suite's series
IMPORT_TARGET = "import"    # irqlab.importers.ingest.IMPORT_TARGET (not imported: light)


def select_runs(store: Store, refs: list[str], series_names: bool = False) -> list[RunRow]:
    """Runs named by ``refs`` in the order given; a run selected twice appears once.
    ``series_names`` (compare, report, the dashboard's compare): a run *name* whose
    latest run belongs to a series of several runs selects that whole series, as
    ``series:NAME`` does (issue 45: `compare aa-a ab-b` of two `--repeat 3` series
    compared their last runs only, and said "single runs"); an id stays one run."""
    if not refs:
        raise StoreError("no run given: name runs by id, name, tag:KEY=VALUE, suite:NAME or "
                         "series:ID (`irqlab list` shows them)")
    chosen: list[RunRow] = []
    seen: set[int] = set()
    for ref in refs:
        rows = _select_one(store, ref)
        if series_names and len(rows) == 1 and not ref.strip().isdigit():
            rows = _whole_series(store, rows[0]) or rows
        for row in rows:
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
    if ref.startswith(SERIES_PREFIX):
        return _series(store, ref[len(SERIES_PREFIX):])
    try:
        return [store.resolve(ref)]
    except StoreError:
        group = _import_group(store, ref)
        if group:
            return group
        raise


def _whole_series(store: Store, row: RunRow) -> list[RunRow]:
    """The runs of ``row``'s series when it has more than one, else []."""
    key = row.tags.get(SERIES_TAG)
    if not key:
        return []
    rows = [r for r in store.runs() if r.tags.get(SERIES_TAG) == key]
    return rows if len(rows) > 1 else []


def _import_group(store: Store, name: str) -> list[RunRow]:
    """The runs one import named ``name/…`` (the latest such import): imported runs of
    that prefix and of the same source file, with consecutive run ids (one import stores
    its runs in one transaction, irqlab.importers.ingest.store_runs). Empty: no group."""
    prefix = f"{name}/"
    runs = sorted(store.runs(), key=lambda r: r.run_id)
    members = [r for r in runs if r.target == IMPORT_TARGET and r.name.startswith(prefix)]
    if not members:
        return []
    latest = members[-1]
    source = (latest.metadata or {}).get("import", {}).get("file")
    group: list[RunRow] = []
    for row in reversed(runs[:runs.index(latest) + 1]):
        same = (row.target == IMPORT_TARGET and row.name.startswith(prefix)
                and (row.metadata or {}).get("import", {}).get("file") == source)
        if not same:
            break
        group.append(row)
    return group[::-1]


def _series(store: Store, key: str) -> list[RunRow]:
    """The runs of series ``key``; else, ``key`` being a run name, of the latest series
    of runs of that name (the one its highest run id belongs to)."""
    if not key:
        raise StoreError("bad selector 'series:': write series:ID or series:NAME, e.g. "
                         "series:base-1a2b3c (`irqlab list` shows the series)")
    runs = store.runs()
    rows = [r for r in runs if r.tags.get(SERIES_TAG) == key]
    if rows:
        return rows
    named = [r for r in runs if r.name == key]
    in_series = [r for r in named if r.tags.get(SERIES_TAG)]
    if in_series:
        latest = max(in_series, key=lambda r: r.run_id).tags[SERIES_TAG]
        return [r for r in runs if r.tags.get(SERIES_TAG) == latest]
    if named:
        raise StoreError(f"the runs named {key!r} in {store.path} are no series (made "
                         f"without --repeat): select them by id or name, or make a series "
                         f"with `irqlab run --repeat N --name {key}`")
    raise StoreError(f"no series {key!r} in {store.path} (neither a series id nor a run "
                     f"name): `irqlab list` shows the series ids; `irqlab run --repeat N` "
                     f"makes one")
