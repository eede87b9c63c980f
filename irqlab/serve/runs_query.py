"""The runs table: filters, sort and paging done by the database, not in Python.

A lab store holds 100,000 runs and more; decoding every row (``Store.runs()``, what
`irqlab list` reads) to show 50 of them costs seconds. So a page is one COUNT and one
``ORDER BY ... LIMIT ... OFFSET`` query over the runs table, with the summary figures and
tags read by the database's own JSON functions (DuckDB: json_extract_string; PostgreSQL:
JSONB ``->>``). Sorting by a summary figure would parse every summary on every page;
those pages take the filtered ids from the database and the figures from a
:class:`FigureCache` the server keeps. DuckDB's statements are the store's own named
operations (store/share.py: run_count, run_ids_page, runs_by_ids), so while another
irqlab process holds the file and lends it, the holder cuts the page the same way. Only
a holder from before those operations has the page cut from ``Store.runs()`` in Python,
by :func:`select_page` with the same filters and order (the tests hold all equal).

Each row of a page has the keys of an `irqlab list --json` line (docs/formats.md) plus
``host`` (the run's host name), ``p50_ns`` and ``p999_ns``.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

import duckdb

from irqlab.reports.select import SERIES_TAG
from irqlab.store.tag_keys import valid_tag_key
from irqlab.stats.fields import LIST_TABLE, percentiles_from
from irqlab.store import share

if TYPE_CHECKING:
    from irqlab.store.db import RunRow
    from irqlab.store.interface import RunReader

PER_PAGE = 50
PER_PAGE_MAX = 500
# Columns a page sorts by: a runs column, or a summary figure (ns, None sorts last).
SORT_COLUMNS = ("run_id", "name", "started_at", "target", "status")
SORT_FIGURES = ("samples", "p50_ns", "p99_ns", "p999_ns", "max_ns")
SORTS = SORT_COLUMNS + SORT_FIGURES


class BadQuery(ValueError):
    """A filter or paging value that cannot be used; the message names the fix."""


@dataclass(frozen=True)
class RunsQuery:
    """What the runs page was asked for (its URL's query string)."""

    name: str = ""                        # substring of the run name, any case
    target: str = ""
    status: str = ""
    host: str = ""                        # the run's host name, exactly
    tag: tuple[str, str] | None = None    # KEY=VALUE
    since: dt.datetime | None = None      # started at or after (UTC as stored)
    sort: str = "run_id"
    desc: bool = True
    page: int = 1
    per_page: int = PER_PAGE

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> RunsQuery:
        """The query of a URL; BadQuery names the parameter and what it takes."""
        tag = None
        if params.get("tag"):
            key, sep, value = params["tag"].partition("=")
            if not sep or not valid_tag_key(key):   # the store's rule (tag_keys.py)
                raise BadQuery(f"tag {params['tag']!r}: write KEY=VALUE, e.g. kernel=6.1")
            tag = (key, value)
        since = None
        if params.get("since"):
            try:
                since = dt.datetime.fromisoformat(params["since"]).replace(tzinfo=None)
            except ValueError:
                raise BadQuery(f"since {params['since']!r}: write YYYY-MM-DD or "
                               f"YYYY-MM-DDTHH:MM") from None
        sort = params.get("sort") or "run_id"
        if sort not in SORTS:
            raise BadQuery(f"sort {sort!r}: one of {', '.join(SORTS)}")
        order = params.get("order") or "desc"
        if order not in ("asc", "desc"):
            raise BadQuery(f"order {order!r}: asc or desc")
        return cls(name=params.get("name", ""), target=params.get("target", ""),
                   status=params.get("status", ""), host=params.get("host", ""),
                   tag=tag, since=since, sort=sort, desc=order == "desc",
                   page=_int_param(params, "page", 1, 1, 10**9),
                   per_page=_int_param(params, "per_page", PER_PAGE, 1, PER_PAGE_MAX))

    def params(self, **change: Any) -> dict[str, str]:
        """This query (with ``change``) as URL parameters, defaults left out."""
        q = replace(self, **change)
        out = {"name": q.name, "target": q.target, "status": q.status, "host": q.host,
               "tag": f"{q.tag[0]}={q.tag[1]}" if q.tag else "",
               "since": q.since.isoformat() if q.since else "",
               "sort": "" if q.sort == "run_id" else q.sort,
               "order": "" if q.desc else "asc",
               "page": "" if q.page == 1 else str(q.page),
               "per_page": "" if q.per_page == PER_PAGE else str(q.per_page)}
        return {k: v for k, v in out.items() if v}


def _int_param(params: Mapping[str, str], key: str, default: int, low: int,
               high: int) -> int:
    text = params.get(key)
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        raise BadQuery(f"{key} {text!r}: a whole number from {low} to {high}")
    return int(text)


@dataclass
class RunsPage:
    rows: list[dict[str, Any]]
    total: int          # runs that pass the filters
    query: RunsQuery

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.query.per_page))


def list_row(row: RunRow) -> dict[str, Any]:
    """One run as `irqlab list --json` shows it (irqlab/cli/cmd_runs.py, whose keys and
    values a test holds equal), plus host, p50_ns and p999_ns."""
    s = row.summary or {}
    figs = {c.key: s.get(c.key, 0 if c.key == "samples" else None) for c in LIST_TABLE}
    host = row.metadata.get("host")
    return {"run_id": row.run_id, "name": row.name, "started_at": row.started_at.isoformat(),
            "target": row.target, "accel": row.accel, "emulated": row.emulated,
            "status": row.status, **figs, "source": row.source, "kind": row.kind,
            "percentiles_from": percentiles_from(s),
            "series": row.tags.get(SERIES_TAG), "tags": row.tags,
            "host": host.get("hostname") if isinstance(host, dict) else None,
            "p50_ns": s.get("p50_ns"), "p999_ns": s.get("p999_ns")}


def runs_page(store: RunReader, q: RunsQuery,
              cache: FigureCache | None = None) -> RunsPage:
    """One page of runs, filtered and sorted by the database when it can; ``cache``
    keeps the figures a page sorts by between requests (:class:`FigureCache`)."""
    dialect = _DIALECTS[store.sql_dialect]
    if store.holder_pid is None:
        return _sql_page(store, q, dialect, cache)
    # Borrowed: the holder cuts the page by the named operations (its own SQL); the
    # figure cache would need every filtered id, so figures sort in its SQL too.
    try:
        return _sql_page(store, q, dialect, None)
    except duckdb.InvalidInputException as exc:   # share.BadRequest, as the holder says
        if "refused by the holder" not in str(exc):
            raise
        # An irqlab from before those operations holds the file: every row, in Python.
        return select_page(store.runs(), q)



# ---- in Python (a borrowed DuckDB file) ------------------------------------------------

def _figure(row: RunRow, key: str) -> float | None:
    value = (row.summary or {}).get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(
        value, bool) else None


def _passes(row: RunRow, q: RunsQuery) -> bool:
    host = row.metadata.get("host")
    hostname = host.get("hostname") if isinstance(host, dict) else None
    return ((not q.name or q.name.lower() in row.name.lower())
            and (not q.target or row.target == q.target)
            and (not q.status or row.status == q.status)
            and (not q.host or hostname == q.host)
            and (q.tag is None or row.tags.get(q.tag[0]) == q.tag[1])
            and (q.since is None or row.started_at.replace(tzinfo=None) >= q.since))


def select_page(rows: list[RunRow], q: RunsQuery) -> RunsPage:
    """The page of ``rows`` the query asks for, in the SQL path's order (None last, ties
    by run id in the same direction)."""
    kept = [r for r in rows if _passes(r, q)]
    if q.sort in SORT_FIGURES:
        key: Callable[[RunRow], Any] = lambda r: _figure(r, q.sort)
    else:
        key = lambda r: getattr(r, q.sort)
    present = [r for r in kept if key(r) is not None]
    absent = [r for r in kept if key(r) is None]
    present.sort(key=lambda r: (key(r), r.run_id), reverse=q.desc)
    absent.sort(key=lambda r: r.run_id, reverse=q.desc)
    ordered = present + absent
    start = (q.page - 1) * q.per_page
    return RunsPage([list_row(r) for r in ordered[start:start + q.per_page]],
                    len(kept), q)


# ---- in SQL ----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Dialect:
    mark: str                                 # parameter placeholder
    text: Callable[[str], str]                # SQL of a JSON column's member as text
    number: Callable[[str], str]              # ... as a number (NULL if not one)
    hostname: str                             # SQL of metadata.host.hostname
    contains: str                             # SQL: name contains a lower-case parameter


# DuckDB's SQL of the page is the store's own (irqlab/store/share.py, runs_page_where,
# the run_count/run_ids_page/runs_by_ids operations): the same statements run here and,
# for a borrowed file, in the process that holds it. Only its mark and figures are used.
_DUCKDB = _Dialect(
    mark="?", text=lambda col: "", number=lambda key: share.figure_sql(key),
    hostname="", contains="")
_POSTGRES = _Dialect(
    mark="%s",
    text=lambda col: f"({col} ->> %s)",
    number=lambda key: (f"(CASE WHEN jsonb_typeof(summary -> '{key}') = 'number' "
                        f"THEN (summary ->> '{key}')::double precision END)"),
    hostname="(metadata -> 'host' ->> 'hostname')",
    contains="strpos(lower(name), %s) > 0")
# By the SQL a store says it speaks (RunReader.sql_dialect), never by its class.
_DIALECTS = {"duckdb": _DUCKDB, "postgres": _POSTGRES}


def _filters(q: RunsQuery) -> dict[str, Any]:
    """The query's filters as share.runs_page_where takes them."""
    out: dict[str, Any] = {k: v for k, v in (("name", q.name), ("target", q.target),
                                             ("status", q.status), ("host", q.host)) if v}
    if q.tag is not None:
        out["tag_key"], out["tag_value"] = q.tag
    if q.since is not None:
        out["since"] = q.since
    return out


def _where(q: RunsQuery, d: _Dialect) -> tuple[str, list[Any]]:
    if d is _DUCKDB:
        return share.runs_page_where(_filters(q))
    clauses: list[str] = []
    args: list[Any] = []
    if q.name:
        clauses.append(d.contains)
        args.append(q.name.lower())
    for column, value in (("target", q.target), ("status", q.status)):
        if value:
            clauses.append(f"{column} = {d.mark}")
            args.append(value)
    if q.host:
        clauses.append(f"{d.hostname} = {d.mark}")
        args.append(q.host)
    if q.tag is not None:
        clauses.append(f"{d.text('tags')} = {d.mark}")
        args += [q.tag[0], q.tag[1]]
    if q.since is not None:
        clauses.append(f"started_at >= {d.mark}")
        args.append(q.since)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def _order(q: RunsQuery, d: _Dialect) -> str:
    # SORTS is a fixed list: the column name or figure key is never user text.
    way = "DESC" if q.desc else "ASC"
    column = d.number(q.sort) if q.sort in SORT_FIGURES else q.sort
    return f" ORDER BY {column} {way} NULLS LAST, run_id {way}"


def _fetch(store: RunReader, d: _Dialect, sql: str, args: list[Any]) -> list[tuple]:
    """Every row of a read-only query, on either store."""
    if d is _DUCKDB:
        return store._query(sql, args).fetchall()
    with store.con.cursor() as cur:
        cur.execute(sql, args)
        rows = cur.fetchall()
    store.con.rollback()                      # read-only: end the snapshot
    return rows


def _columns(store: RunReader, d: _Dialect, sql: str, args: list[Any]) -> list[Any]:
    """A query's columns as numpy arrays (NULL: NaN in a number column). DuckDB hands
    them over whole (fetchnumpy: 100,000 ids in ms, not a Python tuple each)."""
    import numpy as np

    if d is _DUCKDB:
        import duckdb

        from irqlab.store.errors import StoreError

        try:
            got = store.con.execute(sql, args).fetchnumpy()
        except duckdb.Error as exc:
            raise StoreError(f"cannot read {store.path}: {exc}") from None
        return [np.ma.filled(v.astype(np.float64), np.nan) if np.ma.isMaskedArray(v)
                else np.asarray(v) for v in got.values()]
    with store.con.cursor() as cur:
        cur.execute(sql, args)
        rows = cur.fetchall()
        width = len(cur.description)
    store.con.rollback()                      # read-only: end the snapshot
    if not rows:
        return [np.empty(0) for _ in range(width)]
    return [np.array([np.nan if v is None else v for v in col]) for col in zip(*rows)]


def _rows_by_id(store: RunReader, d: _Dialect, ids: list[int]) -> list[RunRow]:
    """The runs ``ids`` in that order (one that went meanwhile is left out)."""
    if not ids:
        return []
    if d is _DUCKDB:
        from irqlab.store.db import _row      # the store's own decoding of a runs row

        rows = [_row(r) for r in store._query(share.RUNS_BY_IDS, ids).fetchall()]
    else:
        rows = store._run_rows("WHERE run_id = ANY(%s)", (ids,))
    by_id = {r.run_id: r for r in rows}
    return [by_id[i] for i in ids if i in by_id]


def _sql_page(store: RunReader, q: RunsQuery, d: _Dialect,
              cache: FigureCache | None) -> RunsPage:
    if q.sort in SORT_FIGURES and cache is not None:
        return _cached_page(store, q, d, cache, *_where(q, d))
    offset = (q.page - 1) * q.per_page
    if d is _DUCKDB:
        total = int(store._query(share.RUN_COUNT, _filters(q)).fetchone()[0])
        ids = [int(r[0]) for r in store._query(share.RUN_IDS_PAGE, {
            "filters": _filters(q), "sort": q.sort, "desc": q.desc,
            "limit": q.per_page, "offset": offset}).fetchall()]
        return RunsPage([list_row(r) for r in _rows_by_id(store, d, ids)], total, q)
    where, args = _where(q, d)
    total = int(_fetch(store, d, f"SELECT count(*) FROM runs{where}", args)[0][0])
    # The page's ids first, then only their rows: an ORDER BY ... OFFSET over every
    # column drags each skipped row's JSON along (0.35 s for the last of 2,000 pages).
    tail = f"{_order(q, d)} LIMIT {q.per_page} OFFSET {offset}"
    ids = [int(r[0]) for r in _fetch(store, d, f"SELECT run_id FROM runs{where}{tail}",
                                     args)]
    return RunsPage([list_row(r) for r in _rows_by_id(store, d, ids)], total, q)


# ---- sorted by a summary figure: the figures kept between requests ---------------------

class FigureCache:
    """The summary figures a page sorts by (SORT_FIGURES), of every run that was not
    running when read, kept by the server between requests.

    Sorting by a figure makes the database parse every run's summary JSON: 0.3-0.6 s
    for 100,000 runs, on every page. A run's summary is written once, when it stops
    running (finish_run; an import writes its row whole; a dead run is closed once), so
    a figure read from a run that was not running stays true: each request reads only
    the figures of runs the cache has not seen and of runs running now (never kept).
    A run removed meanwhile is simply not among the filtered ids. Another file at the
    same path (or another lab store) starts the cache over.
    """

    def __init__(self) -> None:
        import numpy as np

        self._np = np
        self.identity: Any = None
        self._reset()

    def _reset(self) -> None:
        np = self._np
        self.ids = np.empty(0, dtype=np.int64)                 # sorted
        self.values = np.empty((0, len(SORT_FIGURES)), dtype=np.float64)   # NaN: none

    def figures(self, store: RunReader, d: _Dialect, ids: Any, running: Any) -> Any:
        """The figures (rows in the order of ``ids``; NaN where a run has none) of the
        runs ``ids`` (numpy int64), ``running`` a mask of those running now."""
        np = self._np
        identity = _identity(store)
        if identity != self.identity:
            self._reset()
            self.identity = identity
        if self.ids.size:
            at = np.minimum(np.searchsorted(self.ids, ids), self.ids.size - 1)
            known = self.ids[at] == ids
        else:
            at, known = np.zeros(ids.size, dtype=np.int64), np.zeros(ids.size, dtype=bool)
        need = ~known | running
        out = np.full((ids.size, len(SORT_FIGURES)), np.nan)
        out[known & ~running] = self.values[at[known & ~running]]
        if need.any():
            fresh_ids, fresh, fresh_running = self._read(store, d, ids[need])
            pos = np.searchsorted(fresh_ids, ids[need])
            found = pos < fresh_ids.size
            rows = np.flatnonzero(need)[found]
            out[rows] = fresh[pos[found]]
            keep = ~fresh_running
            self._add(fresh_ids[keep], fresh[keep])
        return out

    def _read(self, store: RunReader, d: _Dialect, ids: Any) -> tuple[Any, Any, Any]:
        """(ids sorted, their figures, running mask) of the runs ``ids`` in the store."""
        np = self._np
        where, args = "", []
        if ids.size <= 1000:
            # Few (the usual request: the runs that are new or running): by id; many
            # (the first request): one scan of every run.
            where, args = f" WHERE run_id IN ({', '.join([d.mark] * ids.size)})", ids.tolist()
        if d is _DUCKDB:
            # One parse of each summary for all five figures (json_extract_string with a
            # list of paths): 0.4 s for 100,000 runs, against 1.3-2.4 s one key at a time.
            paths = ", ".join(f"'$.{k}'" for k in SORT_FIGURES)
            figures = ", ".join(f"TRY_CAST(f[{i + 1}] AS DOUBLE)"
                                for i in range(len(SORT_FIGURES)))
            sql = (f"SELECT run_id, running, {figures} FROM (SELECT run_id, status = "
                   f"'running' AS running, json_extract_string(summary, [{paths}]) AS f "
                   f"FROM runs{where})")
        else:
            sql = (f"SELECT run_id, status = 'running', "
                   f"{', '.join(d.number(k) for k in SORT_FIGURES)} FROM runs{where}")
        cols = _columns(store, d, sql, args)
        order = np.argsort(cols[0], kind="stable")
        values = np.column_stack([c.astype(np.float64) for c in cols[2:]]) if cols[0].size \
            else np.empty((0, len(SORT_FIGURES)))
        return (cols[0].astype(np.int64)[order], values[order],
                cols[1].astype(bool)[order])

    def _add(self, ids: Any, values: Any) -> None:
        np = self._np
        keep = ~np.isin(self.ids, ids)
        all_ids = np.concatenate([self.ids[keep], ids])
        order = np.argsort(all_ids, kind="stable")
        self.ids = all_ids[order]
        self.values = np.concatenate([self.values[keep], values])[order]


def _identity(store: RunReader) -> Any:
    path = getattr(store, "path", None)
    try:
        st = os.stat(path)                    # DuckDB: the file itself, not its name
        return ("file", st.st_dev, st.st_ino)
    except (OSError, TypeError):
        return ("url", str(path))


def _cached_page(store: RunReader, q: RunsQuery, d: _Dialect, cache: FigureCache,
                 where: str, args: list[Any]) -> RunsPage:
    """A page sorted by a figure: the filtered ids from the database, their figures from
    the cache, sorted as the SQL order does (None last, ties by run id the same way)."""
    import numpy as np

    ids, running = _columns(store, d, f"SELECT run_id, status = 'running' FROM runs{where}",
                            args)
    ids, running = ids.astype(np.int64), running.astype(bool)
    value = cache.figures(store, d, ids, running)[:, SORT_FIGURES.index(q.sort)]
    present = ~np.isnan(value)
    sign = -1 if q.desc else 1
    have, lack = ids[present], ids[~present]
    order = np.lexsort((sign * have, sign * value[present]))   # last key sorts first
    ordered = np.concatenate([have[order], np.sort(lack)[::sign]])
    start = (q.page - 1) * q.per_page
    page_ids = [int(i) for i in ordered[start:start + q.per_page]]
    return RunsPage([list_row(r) for r in _rows_by_id(store, d, page_ids)], int(ids.size), q)
