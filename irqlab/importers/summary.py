"""The summary of an imported run: the keys of `irqlab run`'s summary, derived only from
what the source recorded.

Resolution decides what can be said (docs/formats.md, "Imported runs"):
* raw samples: every statistic, percentiles exact (`percentile_source: "samples"`);
* histogram buckets: count, and percentiles computed from the buckets, each the highest
  value its bucket can hold at the source's resolution (`percentile_source: "histogram"`);
  min/max/mean only when the source printed them;
* window summaries: count, min/max, a sample-weighted mean and warm max; no percentile;
* whole-run figures: exactly those figures.
A statistic that cannot be derived is None (shown "—").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from irqlab.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    # numpy on first use (irqlab/lazy.py): a refused input is refused before it loads.
    np = lazy_import("numpy")

from irqlab.importers.base import PCT_KEYS, ParsedRun, Series
from irqlab.stats import Moments, quantile_rank, ticks_to_ns
from irqlab.stats.fields import field, make_summary, percentiles_from

WARMUP_WINDOWS = 1   # as `irqlab run --warmup`'s default: warm max skips the first window


def _empty(run: ParsedRun, run_id: int, name: str) -> dict[str, Any]:
    # An imported run knows only what its source recorded: every count starts unknown
    # (None), unlike a measured run whose counts start at 0.
    return make_summary(run_id, name, {
        "target": "import", "status": "ok", "tick_hz": run.tick_hz,
        "period_ns": run.period_ns, "threshold_ns": run.threshold_ns,
        "source": run.source, "kind": run.kind}, imported=True)


def bucket_percentile(buckets: list[tuple[int, int | None, int, int]], total: int, q: float,
                      vmin: int | None, vmax: int | None) -> int | None:
    """Nearest-rank percentile from (lower, upper, count, resolution) buckets, in ns.

    The value is the highest one the bucket can hold at the source's resolution (never
    under-reported), clamped to the printed max; rank 1 and rank n are the printed min
    and max when known. None when the rank falls in the overflow bucket, whose values
    are unknown.
    """
    if total <= 0:
        return None
    rank = quantile_rank(q, total)
    if rank == 1 and vmin is not None:
        return vmin
    if rank == total and vmax is not None:
        return vmax
    seen = 0
    for lo, hi, n, res in buckets:
        seen += n
        if seen >= rank:
            if hi is None:
                return None
            value = max(lo, hi - res)
            return min(value, vmax) if vmax is not None else value
    return None


def bucket_stddev(buckets: list[tuple[int, int | None, int, int]]) -> int | None:
    """Population standard deviation (ddof 0, as a measured run's) of bucketed samples,
    in ns, each sample taken at the value bucket_percentile gives its bucket: exact at
    the source's resolution when the buckets are that wide (cyclictest -h: 1 us buckets
    of latencies it truncated to whole us), bucket-resolution otherwise. None when any
    sample overflowed: its value, and so its square, is unknown. Exact integer sums
    (n*S2 - S1^2) / n^2, so no cancellation."""
    if any(hi is None for _lo, hi, _n, _res in buckets):
        return None
    n = s1 = s2 = 0
    for lo, hi, count, res in buckets:
        assert hi is not None
        value = max(lo, hi - res)
        n += count
        s1 += count * value
        s2 += count * value * value
    if n == 0:
        return None
    return round(math.sqrt((n * s2 - s1 * s1) / (n * n)))


def _overflow_bound(buckets: list[tuple[int, int | None, int, int]], total: int, q: float,
                    vmax: int | None) -> list[int | None] | None:
    """[lowest, highest] a percentile can be when its rank falls in the overflow bucket
    (values >= the bucket's lower edge, <= the printed max); None when it does not."""
    rank = quantile_rank(q, total) if total > 0 else 0
    inside = sum(n for _lo, hi, n, _res in buckets if hi is not None)
    over = [lo for lo, hi, _n, _res in buckets if hi is None]
    # Rank n with a printed max is that max (bucket_percentile), no bound needed.
    if not over or rank <= inside or (rank == total and vmax is not None):
        return None
    return [min(over), vmax]


def _stddev_and_bounds(out: dict[str, Any], rows: list[tuple[int, int | None, int, int]],
                       total: int, vmax: int | None) -> None:
    """stddev_ns from the buckets, and the bounds of percentiles lost in the overflow."""
    out["stddev_ns"] = bucket_stddev(rows)
    bounds = {key: b for key, q in PCT_KEYS
              if out.get(key) is None and (b := _overflow_bound(rows, total, q, vmax))}
    if bounds:
        out["percentile_bounds"] = bounds


def _merged(series: dict[str, Series]) -> list[tuple[int, int | None, int, int]]:
    rows = [(lo, hi, n, s.resolution_ns) for s in series.values() for lo, hi, n in s.buckets]
    # Overflow buckets last: their values lie above every regular bucket of their series.
    return sorted(rows, key=lambda r: (r[1] is None, r[0]))


def _series_figures(s: Series) -> dict[str, Any]:
    total = s.count if s.count is not None else sum(n for _lo, _hi, n in s.buckets)
    rows = [(lo, hi, n, s.resolution_ns) for lo, hi, n in s.buckets]
    rows.sort(key=lambda r: (r[1] is None, r[0]))
    out: dict[str, Any] = {"samples": total, "min_ns": s.min_ns,
                           "mean_ns": None if s.mean_ns is None else round(s.mean_ns),
                           "max_ns": s.max_ns}
    for key, q in PCT_KEYS:
        out[key] = bucket_percentile(rows, total, q, s.min_ns, s.max_ns) if rows else None
    overflow = sum(n for _lo, hi, n in s.buckets if hi is None)
    if rows:
        out["overflow"] = overflow
        _stddev_and_bounds(out, rows, total, s.max_ns)
    out.update(s.extra)
    return out


def _from_series(run: ParsedRun, out: dict[str, Any]) -> None:
    per = {name: _series_figures(s) for name, s in run.series.items()}
    out["series"] = per
    counts = [p["samples"] for p in per.values()]
    total = sum(counts)
    out["samples"] = total
    mins = [s.min_ns for s in run.series.values()]
    maxs = [s.max_ns for s in run.series.values()]
    out["min_ns"] = min(mins) if None not in mins and mins else None
    out["max_ns"] = max(maxs) if None not in maxs and maxs else None
    means = [(s.mean_ns, p["samples"]) for s, p in zip(run.series.values(), per.values())]
    if means and all(m is not None for m, _n in means) and total:
        out["mean_ns"] = round(sum(m * n for m, n in means) / total)
        if len(means) > 1:
            out["mean_from"] = "count-weighted mean of the per-series means the source printed"
    if any(s.buckets for s in run.series.values()):
        rows = _merged(run.series)
        for key, q in PCT_KEYS:
            out[key] = bucket_percentile(rows, total, q, out["min_ns"], out["max_ns"])
        out["percentile_source"] = "histogram"
        out["percentile_rule"] = ("nearest rank; highest value of the bucket at the "
                                  "source's resolution; None when the rank falls in "
                                  "the overflow bucket")
        out["overflow"] = sum(n for s in run.series.values() for _l, hi, n in s.buckets
                              if hi is None)
        _stddev_and_bounds(out, rows, total, out["max_ns"])
        out["stddev_from"] = _stddev_from(out)
        if out.get("percentile_bounds"):
            out["percentile_note"] = (
                "; ".join(f"{field(key).label} lies in the overflow bucket, "
                          f"{_us(lo)} to {_us(hi)}"
                          for key, (lo, hi) in out["percentile_bounds"].items())
                + ": the source keeps no value above its histogram (a larger histogram "
                  "gives it)")


def _us(ns: int | None) -> str:
    return "the max (not printed)" if ns is None else f"{ns / 1000:g} us"


def _stddev_from(out: dict[str, Any]) -> str:
    if out["stddev_ns"] is not None:
        return ("stddev from the histogram, each sample at its bucket's value (bucket "
                "resolution: exact to the source's unit where buckets are 1 unit wide)")
    return (f"no stddev: {out['overflow']} samples overflowed the histogram, their "
            f"values unknown")


@dataclass(frozen=True)
class SampleFigures:
    """What a run's raw samples give, in ticks: exact moments (count, sum, sum of
    squares, min, max) and the nearest-rank percentiles by summary key. Computed where
    the samples are: in memory (`sample_figures`) or by the store over the stored ones."""

    moments: Moments
    percentile_tick: dict[str, int]


def sample_figures(latency_tick: np.ndarray) -> SampleFigures:
    """The figures of samples held in memory (one sort)."""
    lat = np.sort(np.asarray(latency_tick, dtype=np.int64))
    moments = Moments()
    moments.add(lat)
    pct = ({key: int(lat[quantile_rank(q, lat.size) - 1]) for key, q in PCT_KEYS}
           if lat.size else {})
    return SampleFigures(moments, pct)


def _from_samples(run: ParsedRun, out: dict[str, Any], figures: SampleFigures) -> None:
    hz = run.tick_hz
    assert hz, "raw samples need a tick rate"
    moments = figures.moments
    n = moments.count
    out["samples"] = n
    if n == 0:
        return
    assert moments.min is not None and moments.max is not None
    mean, stddev = moments.mean, moments.stddev
    out.update(min_ns=ticks_to_ns(moments.min, hz), max_ns=ticks_to_ns(moments.max, hz),
               mean_ns=ticks_to_ns(mean, hz), stddev_ns=ticks_to_ns(stddev, hz),
               percentile_source="samples")
    for key, _q in PCT_KEYS:
        out[key] = ticks_to_ns(figures.percentile_tick[key], hz)


def _from_windows(run: ParsedRun, out: dict[str, Any]) -> None:
    ws = run.windows
    out["samples"] = sum(w["samples"] for w in ws)
    if any(w.get("extra", {}).get("samples_assumed") for w in ws):
        out["samples_assumed"] = True
    mins = [w["min_ns"] for w in ws if w["min_ns"] is not None]
    maxs = [w["max_ns"] for w in ws if w["max_ns"] is not None]
    gmins = [w["global_min_ns"] for w in ws if w["global_min_ns"] is not None]
    gmaxs = [w["global_max_ns"] for w in ws if w["global_max_ns"] is not None]
    out["min_ns"] = min(mins + gmins) if mins or gmins else None
    out["max_ns"] = max(maxs + gmaxs) if maxs or gmaxs else None
    if len(maxs) == len(ws) and len(ws) > WARMUP_WINDOWS:
        out["warm_max_ns"] = max(maxs[WARMUP_WINDOWS:])
        out["warm_max_from"] = f"max of windows {WARMUP_WINDOWS}.. (first skipped)"
    if all(w["mean_ns"] is not None for w in ws) and out["samples"]:
        out["mean_ns"] = round(sum(w["mean_ns"] * w["samples"] for w in ws) / out["samples"])
        out["mean_from"] = "sample-weighted mean of the window means"
    exact = [w.get("extra", {}).get("above_threshold_exact", True) for w in ws]
    if all(exact):
        out["above_threshold"] = sum(w["above_threshold"] for w in ws)
    else:
        bounds = [w.get("extra", {}).get("above_threshold_bound") for w in ws]
        if all(b is not None for b in bounds):
            out["above_threshold_bound"] = [sum(b[0] for b in bounds), sum(b[1] for b in bounds)]
            out["above_threshold_note"] = ("the source printed a rounded percentage per "
                                           "window: the count lies within this bound")
        else:
            out["above_threshold_note"] = "the source does not report threshold crossings"
    out["percentile_source"] = None
    out["percentile_note"] = "window summaries hold no distribution: percentiles absent"


def build_summary(run: ParsedRun, run_id: int, name: str,
                  samples: SampleFigures | None = None) -> dict[str, Any]:
    """The summary dict stored with an imported run (and printed by `show --json`): the
    keys of every summary (irqlab.stats.fields), filled in as far as the source allows.
    `samples`: the figures of raw samples that are not in memory (streamed imports)."""
    out = _empty(run, run_id, name)
    if samples is not None:
        _from_samples(run, out, samples)
    elif run.latency_tick is not None:
        _from_samples(run, out, sample_figures(run.latency_tick))
    elif run.series:
        _from_series(run, out)
    elif run.windows:
        _from_windows(run, out)
    for key, val in run.figures.items():
        out[key] = val
    if run.notes:
        out["notes"] = list(run.notes)
    out["import"] = {"format": run.source, "file": run.path, "line": run.line,
                     **run.provenance}
    out["percentiles_from"] = percentiles_from(out)    # its percentile_source, in summary words
    return out
