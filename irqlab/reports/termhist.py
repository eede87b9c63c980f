"""A latency histogram for the terminal (`irqlab show RUN --hist`, `compare --hist`), as
`rtla timerlat hist` and `cyclictest -h` print one, in log-spaced buckets.

Display buckets follow the 1-2-5 series (1 us, 2 us, 5 us, 10 us, ...): three a decade,
readable edges, each [low, high). A run whose raw samples are read into memory
(irqlab.reports.data.IN_MEMORY_SAMPLES) is binned exactly from them, each sample by its
ticks_to_ns value (the one every figure uses). A bigger run, or one without raw samples
(an import), is drawn from its stored histogram (irqlab run stores its log histogram,
imports their source's buckets) without reading its samples: a stored bucket counts in
the display bucket holding its lower edge. irqlab's stored buckets are at most 1/128 of
their value wide, so there a sample up to 1/128 above an edge can count in the bucket
below it; an imported histogram's buckets are the source's (cyclictest: 1 us). The JSON
key ``from`` says which. Samples below the first 1-2-5 edge that a log axis cannot place
(at or below 0 ns; an imported bucket starting at 0, e.g. rtla's [0, 1 us)) are counted
apart (``below``), as is a source's overflow bucket (``overflow``).
"""

from __future__ import annotations

import math
import textwrap
from typing import Any, Callable, Iterable

import numpy as np

from irqlab.durations import format_latency
from irqlab.reports.data import NS_PER_S, RunData
from irqlab.stats import ticks_to_ns

HISTOGRAM_VERSION = 1
FROM_STORED = "stored histogram"
FROM_RAW = "raw samples"
# The widest line a histogram prints (as compare's tables, issue 32).
WIDTH = 120
_STEPS = (1, 2, 5)


def edges_1_2_5(lo_ns: int, hi_ns: int) -> list[int]:
    """1-2-5 edges from the largest one <= lo_ns to the smallest one > hi_ns (ns >= 1)."""
    lo_ns, hi_ns = max(1, int(lo_ns)), max(1, int(hi_ns))
    decade = 10 ** int(math.floor(math.log10(lo_ns)))
    edges = [s * decade for s in _STEPS if s * decade <= lo_ns][-1:]
    while edges[-1] <= hi_ns:
        decade = decade * 10 if edges[-1] == 5 * decade else decade
        nxt = next(s * decade for s in _STEPS + (10,) if s * decade > edges[-1])
        edges.append(nxt)
    return edges


# show --hist --bucket: at most this many uniform buckets (a line each).
MAX_UNIFORM_BUCKETS = 5_000
EdgesFor = Callable[[int, int], list[int]]


def uniform_edges(bucket_ns: int) -> EdgesFor:
    """Edges every ``bucket_ns`` (cyclictest -h's 1 us, rtla's --bucket-size) covering
    [lo_ns, hi_ns]; the first edge is at least 1 ns (a log axis' and `below`'s rule)."""
    def edges(lo_ns: int, hi_ns: int) -> list[int]:
        start = max(1, int(lo_ns) // bucket_ns * bucket_ns)
        first = bucket_ns * (start // bucket_ns + 1)       # the edge after start
        # Edges from first to the first one above hi_ns (the last bucket holds hi_ns).
        n = max(0, (int(hi_ns) - first) // bucket_ns + 1) + 1
        if n > MAX_UNIFORM_BUCKETS:
            raise ValueError(f"--bucket {format_latency(bucket_ns)} makes {n:,} buckets from "
                             f"{format_latency(lo_ns)} to {format_latency(hi_ns)}: at most "
                             f"{MAX_UNIFORM_BUCKETS:,}; give a wider --bucket")
        return [start] + [first + k * bucket_ns for k in range(n)]
    return edges


def _counts_of(pairs: Iterable[tuple[int, int]], edges: list[int]) -> np.ndarray:
    """Counts per display bucket of (value_ns, count) pairs (value >= edges[0])."""
    counts = np.zeros(len(edges) - 1, np.int64)
    for value, n in pairs:
        i = int(np.searchsorted(edges, value, side="right")) - 1
        counts[min(max(i, 0), counts.size - 1)] += n
    return counts


def _stored_pairs(buckets: list[tuple[int, int | None, int]]
                  ) -> tuple[list[tuple[int, int]], dict[str, int], dict[str, int] | None]:
    """(lower edge, count) of stored buckets above 0 ns; the buckets starting at or below
    0 ns as {"high_ns": their highest upper edge, "count"} (high_ns 1: every sample at or
    below 0 ns); the overflow bucket (no upper edge: samples beyond the source's range)
    as {"from_ns", "count"} (None without one)."""
    pairs, over = [], None
    low = {"high_ns": 1, "count": 0}
    for lower, upper, n in buckets:
        # Assigned by the lower edge, like every bucket: one not above 0 ns is apart.
        if lower <= 0:
            low["count"] += int(n)
            low["high_ns"] = max(low["high_ns"], int(upper or 1))
        elif upper is None:
            from_ns = int(lower) if over is None else min(over["from_ns"], int(lower))
            over = {"from_ns": from_ns, "count": int(n) + (over or {}).get("count", 0)}
        else:
            pairs.append((int(lower), int(n)))
    return pairs, low, over


def first_tick_at(ns: int, tick_hz: int) -> int:
    """The smallest tick count whose ns (ticks_to_ns: rounded half away from zero) is
    >= ``ns`` (ns >= 1): tick >= (ns - 1/2) * hz / 10^9, in exact integers."""
    return -(-(2 * ns - 1) * tick_hz // (2 * NS_PER_S))


def _raw_counts(run: RunData, edges: list[int] | None, edges_for: EdgesFor = edges_1_2_5
                ) -> tuple[list[int], np.ndarray, dict[str, int]] | None:
    """(edges, counts, {"high_ns": 1, "count": samples at or below 0 ns}) of the raw
    samples, binned exactly: each edge becomes the first tick count at it, so a sample's
    bucket is that of its ticks_to_ns value, without converting every sample (None: no
    raw samples in memory)."""
    if run.latency_tick is None or not run.latency_tick.size:
        return None
    srt, hz = run.sorted_tick(), run.tick_hz
    low = int(np.searchsorted(srt, first_tick_at(1, hz), side="left"))
    if edges is None:
        positive = srt[low:]
        if not positive.size:
            return [1, 2], np.zeros(1, np.int64), {"high_ns": 1, "count": low}
        edges = edges_for(ticks_to_ns(int(positive[0]), hz),
                          ticks_to_ns(int(positive[-1]), hz))
    at = np.searchsorted(srt, [first_tick_at(e, hz) for e in edges], side="left")
    counts = np.diff(at).astype(np.int64)
    counts[0] += int(at[0]) - low          # shared edges may start above a run's min
    counts[-1] += int(srt.size - at[-1])
    return edges, counts, {"high_ns": 1, "count": low}


def histogram_model(run: RunData, buckets: list[tuple[int, int | None, int]] | None,
                    edges: list[int] | None = None,
                    bucket_ns: int | None = None) -> dict[str, Any] | None:
    """The ``histogram`` JSON line of a run (None: neither raw samples in memory nor a
    stored histogram). ``buckets``: its stored buckets (stored_buckets);
    ``edges``: display edges shared with other runs (compare --hist)."""
    edges_for = edges_1_2_5 if bucket_ns is None else uniform_edges(bucket_ns)
    got = _raw_counts(run, edges, edges_for)
    over = None
    if got is not None:
        edges, counts, low = got
        source = FROM_RAW
    elif buckets:
        pairs, low, over = _stored_pairs(buckets)
        source = FROM_STORED
        if edges is None:
            edges = edges_for(min((v for v, _ in pairs), default=1),
                              max((v for v, _ in pairs), default=1))
        counts = _counts_of(pairs, edges)
    else:
        return None
    first, last = _span(counts)
    return {"type": "histogram", "version": HISTOGRAM_VERSION, "run_id": run.run_id,
            "name": run.row.name, "from": source,
            "samples": int(counts.sum()) + low["count"] + (over or {}).get("count", 0),
            "below": low if low["count"] else None, "overflow": over,
            "scale": ("1-2-5 log buckets, [low_ns, high_ns)" if bucket_ns is None else
                      f"{format_latency(bucket_ns)} buckets, [low_ns, high_ns)"),
            "buckets": [{"low_ns": edges[i], "high_ns": edges[i + 1],
                         "count": int(counts[i])} for i in range(first, last + 1)]}


def _span(counts: np.ndarray) -> tuple[int, int]:
    """First and last non-empty bucket (0, -1 when all are empty)."""
    nz = np.flatnonzero(counts)
    return (int(nz[0]), int(nz[-1])) if nz.size else (0, -1)


def shared_edges(models: list[dict[str, Any] | None],
                 edges_for: EdgesFor = edges_1_2_5) -> list[int] | None:
    """Edges (1-2-5, or ``edges_for``'s) covering every run's buckets (compare --hist)."""
    found = [b for m in models if m for b in m["buckets"]]
    if not found:
        return None
    return edges_for(min(b["low_ns"] for b in found), max(b["high_ns"] for b in found) - 1)


def bar(count: int, most: int, width: int) -> str:
    """A bar of ``width`` at most, log-scaled (log10 of 1 + count): one sample in a
    tail bucket stays visible beside 10^6 in the body; linear would hide it."""
    if count <= 0 or most <= 0 or width <= 0:
        return ""
    return "█" * max(1, round(width * math.log10(1 + count) / math.log10(1 + most)))


def bucket_share(count: int, total: int) -> str:
    """A share in 8 columns, 3 significant digits: '   37.5%', '0.00458%'."""
    return f"{100.0 * count / total if total else 0.0:>7.3g}%"


def cumulative_share(count: int, total: int) -> str:
    """A cumulative share in 8 columns that reads 100% only when it is: 99.995% is
    '  99.995%', not the '100%' three significant digits would round it to."""
    if not total:
        return f"{0:>7}%"
    value = 100.0 * count / total
    text = f"{value:.3g}"
    # Below 100 %: more decimals (cut, never rounded up) until it shows below 100.
    places = 2
    while count < total and float(text) >= 100 and places <= 5:
        text, places = f"{value:.{places + 3}f}"[:places + 3], places + 1
    return f"{text:>7}%"


def _below_text(below: dict[str, Any]) -> str:
    """'<= 0 ns', or '< 1000 ns' for an imported bucket [0, 1 us)."""
    return "<= 0 ns" if below["high_ns"] <= 1 else f"< {format_latency(below['high_ns'])}"


def _range(b: dict[str, Any]) -> str:
    return f"{format_latency(b['low_ns']):>9} – {format_latency(b['high_ns']):>9}"


def histogram_lines(model: dict[str, Any]) -> list[str]:
    """One run's histogram: a heading, then a line per bucket with its count, percent,
    cumulative percent and bar, each line at most WIDTH columns."""
    n = model["samples"]
    head = [f"run {model['run_id']} {model['name']}: {n} samples, from its "
            f"{model['from']}; bar: log10(1 + count)"]
    head.append(f"{'latency':>21}  {'count':>10}  {'%':>8}  {'cum %':>8}")
    most = max((b["count"] for b in model["buckets"]), default=0)
    width = WIDTH - 21 - 2 - 10 - 2 - 8 - 2 - 8 - 2
    below = model.get("below")
    cum = below["count"] if below else 0
    out = head
    if below:
        out.append(f"{_below_text(below):>21}  {cum:>10}  {bucket_share(cum, n)}  {cumulative_share(cum, n)}  "
                   f"{bar(cum, max(most, cum), width)}")
    for b in model["buckets"]:
        cum += b["count"]
        out.append(f"{_range(b)}  {b['count']:>10}  {bucket_share(b['count'], n)}  {cumulative_share(cum, n)}  "
                   f"{bar(b['count'], most, width)}")
    over = model.get("overflow")
    if over:
        out.append(f"{'>= ' + format_latency(over['from_ns']):>21}  {over['count']:>10}  "
                   f"{bucket_share(over['count'], n)}  {cumulative_share(n, n)}  (the source's overflow bucket)")
    return [line.rstrip() for line in out]


def side_by_side_lines(models: list[dict[str, Any]]) -> list[str]:
    """compare --hist: the runs' histograms on shared buckets, a count and a bar per run
    and bucket, within WIDTH (bars shrink as runs are added; counts stay)."""
    found = [b for m in models for b in m["buckets"]]
    if not found:
        return ["(no sample above 0 ns)"]
    # Every bucket between the lowest and the highest, empty ones too (no silent gap).
    grid = edges_1_2_5(min(b["low_ns"] for b in found), max(b["high_ns"] for b in found) - 1)
    edges = list(zip(grid[:-1], grid[1:]))
    by_run = [{(b["low_ns"], b["high_ns"]): b["count"] for b in m["buckets"]}
              for m in models]
    count_w = max([5] + [len(str(c)) for r in by_run for c in r.values()])
    bar_w = max(0, (WIDTH - 21 - len(models) * (count_w + 3)) // max(1, len(models)))
    heads = "".join(f"  #{m['run_id']:<{count_w + bar_w}}" for m in models)
    out = [f"{'latency':>21}{heads}".rstrip()]
    mosts = [max(r.values(), default=0) for r in by_run]
    for low, high in edges:
        cells = ""
        for r, most in zip(by_run, mosts):
            c = r.get((low, high), 0)
            cells += f"  {c:>{count_w}} {bar(c, most, bar_w):<{bar_w}}"
        out.append((_range({"low_ns": low, "high_ns": high}) + cells).rstrip())
    for m in models:
        if m.get("below"):
            out.append(f"#{m['run_id']}: {m['below']['count']} samples "
                       f"{_below_text(m['below'])} (not on the log scale)")
        if m.get("overflow"):
            out.append(f"#{m['run_id']}: {m['overflow']['count']} samples >= "
                       f"{format_latency(m['overflow']['from_ns'])} (the source's overflow "
                       f"bucket)")
    out += textwrap.wrap("runs: " + ", ".join(
        f"#{m['run_id']} {m['name']} ({m['samples']} samples, {m['from']})" for m in models),
        WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
    return out


def stored_buckets(series: dict[str, list[tuple[int, int | None, int]]]
                   ) -> list[tuple[int, int | None, int]] | None:
    """The buckets a run's histogram is drawn from: its "all" series, else every series
    it stored (an import's per-CPU series) together; None when it stored none."""
    if "all" in series:
        return series["all"]
    merged = [b for buckets in series.values() for b in buckets]
    return merged or None


def run_histograms(store: Any, runs: list[RunData],
                   bucket_ns: int | None = None) -> list[dict[str, Any]]:
    """Each run's histogram model, on edges shared by all of them (1-2-5, or every
    ``bucket_ns``); a run with neither raw samples in memory nor a stored histogram, or
    a bucket too narrow for its span, raises ValueError naming it."""
    buckets = [stored_buckets(store.histogram(r.run_id)) for r in runs]
    models = [histogram_model(r, b, bucket_ns=bucket_ns) for r, b in zip(runs, buckets)]
    for run, model in zip(runs, models):
        if model is None:
            raise ValueError(f"run {run.label} has no histogram: neither raw samples nor a "
                             f"stored histogram (show it without --hist)")
    if len(runs) > 1:
        edges = shared_edges(models, edges_1_2_5 if bucket_ns is None
                             else uniform_edges(bucket_ns))
        models = [histogram_model(r, b, edges, bucket_ns) for r, b in zip(runs, buckets)]
    return [m for m in models if m is not None]
