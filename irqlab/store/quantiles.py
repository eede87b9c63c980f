"""Exact figures of a run's stored samples, computed by the database (DuckDB or the lab's
PostgreSQL) so that no sample comes into Python memory.

Percentiles are nearest rank (``irqlab.stats.quantile_rank``: the ceil(q*n)-th smallest,
Hyndman & Fan 1996 definition 1). The databases' discrete quantiles (DuckDB
``quantile_disc``, PostgreSQL ``percentile_disc``: "the first value whose position in
the ordering equals or exceeds the specified fraction") follow the same rule but with
float arithmetic, so each value is then proved with exact counts: v is the r-th
smallest iff count(lat < v) < r <= count(lat <= v). A value that fails the proof (none
seen in tests) is replaced by the r-th smallest through ORDER BY ... OFFSET.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


# The signed latency of a stored record: entry - deadline as int64 (docs/formats.md
# section 2), without the unsigned subtraction DuckDB refuses below zero.
LATENCY_SQL = ("CASE WHEN entry_tick >= deadline_tick "
               "THEN CAST(entry_tick - deadline_tick AS BIGINT) "
               "ELSE -CAST(deadline_tick - entry_tick AS BIGINT) END")

# query(select, run_id, tail) -> rows of
#   SELECT {select} FROM (SELECT <LATENCY_SQL> AS lat FROM samples WHERE run_id = ?) {tail}
SampleQuery = Callable[[str, int, str], list[tuple]]
# The dialect's discrete quantiles of column lat as one list value.
QuantileSql = Callable[[list[float]], str]


def duckdb_quantiles(qs: list[float]) -> str:
    return f"quantile_disc(lat, [{', '.join(repr(float(q)) for q in qs)}])"


def postgres_quantiles(qs: list[float]) -> str:
    return (f"percentile_disc(ARRAY[{', '.join(repr(float(q)) for q in qs)}]) "
            f"WITHIN GROUP (ORDER BY lat)")


@dataclass(frozen=True)
class StoredFigures:
    """Exact figures of a run's stored latencies, in ticks."""

    count: int
    min_tick: int | None
    max_tick: int | None
    above: int | None              # samples > threshold_tick (None: no threshold given)
    quantile_tick: list[int]       # one per asked quantile (empty when count == 0)


def stored_figures(query: SampleQuery, quantile_sql: QuantileSql, run_id: int,
                   quantiles: list[float], threshold_tick: int | None = None
                   ) -> StoredFigures:
    """Count, min, max, count above `threshold_tick` and exact nearest-rank quantiles,
    in one scan plus one proving scan."""
    above = ("count(*) FILTER (WHERE lat > %d)" % int(threshold_tick)
             if threshold_tick is not None else "NULL")
    qsql = quantile_sql(quantiles) if quantiles else "NULL"
    count, lo, hi, n_above, values = query(
        f"count(*), min(lat), max(lat), {above}, {qsql}", run_id, "")[0]
    count = int(count)
    if count == 0:
        return StoredFigures(0, None, None, 0 if threshold_tick is not None else None, [])
    values = [int(v) for v in values] if quantiles else []
    from irqlab.stats import quantile_rank    # numpy: only when figures are read

    ranks = [quantile_rank(q, count) for q in quantiles]
    values = _proved(query, run_id, values, ranks)
    return StoredFigures(count, int(lo), int(hi),
                         None if n_above is None else int(n_above), values)


def _proved(query: SampleQuery, run_id: int, values: list[int],
            ranks: list[int]) -> list[int]:
    """The values, each proved to be the sample of its rank (or replaced by it)."""
    if not values:
        return values
    distinct = sorted(set(values))
    cols = ", ".join(f"count(*) FILTER (WHERE lat < {v}), count(*) FILTER (WHERE lat <= {v})"
                     for v in distinct)
    row = query(cols, run_id, "")[0]
    bounds = {v: (int(row[2 * i]), int(row[2 * i + 1])) for i, v in enumerate(distinct)}
    out = []
    for v, r in zip(values, ranks):
        below, upto = bounds[v]
        if not below < r <= upto:
            v = int(query("lat", run_id, f"ORDER BY lat LIMIT 1 OFFSET {r - 1}")[0][0])
        out.append(v)
    return out
