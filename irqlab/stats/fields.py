"""The one catalog of run-summary fields, and the one builder of a summary object.

A summary (docs/formats.md section 4) is what `irqlab run` prints last, what the store
keeps with every run (measured or imported) and what every report, table and CI check
reads. Its keys, the labels people see and which table shows which field are defined here
and nowhere else: a new statistic is added once, and every table, check and importer
agrees on its name.

Catalog:
    Field                  one summary key: label, unit, kind (and quantile for percentiles)
    SUMMARY_FIELDS         every key of every summary, in JSON order
    IMPORT_FIELDS          keys every imported summary adds (source, kind, ...)
    IMPORT_EXTRA_FIELDS    keys an imported summary has only when the source allowed them
    LATENCY_FIELDS         latency statistics in ns (min .. p99.99), JSON order
    PERCENTILE_FIELDS      the percentiles, with their quantiles
    RATIO_FIELDS           percentiles compared against a baseline (compare, noise test)
    TAIL_FIELDS            percentiles that need many samples beyond them to be trusted
    field(key)             the Field of a key
Views, tuples of Column (heading, field) in the order shown:
    SUMMARY_TABLE, REPORT_TABLE, SUITE_TABLE, COMPARE_TABLE, MATRIX_TABLE, LIST_TABLE,
    WINDOW_TABLE, IMPORTED_ROWS, NOTE_FIELDS, CHECK_LIMITS
Builder:
    SUMMARY_VERSION, make_summary, stats_figures
    PERCENTILES_EXACT, PERCENTILES_HISTOGRAM, PERCENTILES_SOURCE, percentiles_from
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Protocol


class TickFigures(Protocol):
    """What stats_figures reads of a run's statistics (irqlab.stats.run.RunSummary, which
    takes its percentile names from this catalog, so this module names no class of it):
    the counts here, and each latency field's ``tick_attr`` (min_tick, p99_tick, ...)."""

    samples: int
    above_threshold: int
    invalid: int

SUMMARY_VERSION = 1

# Values of the summary key ``percentiles_from`` (docs/formats.md section 4). A finished
# run's percentiles are exact: nearest rank over its stored samples (Hyndman & Fan 1996
# definition 1, irqlab.stats.quantile_rank), the figures every report recomputes. The log
# histogram's estimate (<= 1/128 relative error, never under-reported) stays only where
# the samples are not stored: a live run, a run whose store write failed. An imported
# run says what its source allowed (its ``percentile_source``).
PERCENTILES_EXACT = "exact"
PERCENTILES_HISTOGRAM = "histogram"
PERCENTILES_SOURCE = "source"
_FROM_IMPORT = {"samples": PERCENTILES_EXACT, "histogram": PERCENTILES_HISTOGRAM,
                "source": PERCENTILES_SOURCE}

# "ns" latencies and durations (integer ns), "count" sample counts, "hz" a rate, "int"
# ids and versions, "text", "bool".
Unit = Literal["ns", "count", "hz", "int", "text", "bool"]
# "latency" a statistic of the latencies, "count" a count of samples, "setting" a
# parameter or a figure given by the source, "meta" identity and provenance, "note" a
# sentence for people.
Kind = Literal["latency", "count", "setting", "meta", "note"]


@dataclass(frozen=True)
class Field:
    """One key of a run summary."""

    key: str                      # JSON key (a contract: docs/formats.md section 4)
    label: str                    # as in the human summary table ("above threshold")
    unit: Unit
    kind: Kind
    short: str = ""               # narrow column heading ("above thr"); default: label
    quantile: float | None = None  # percentiles only: the nearest-rank quantile

    def __post_init__(self) -> None:
        if not self.short:
            object.__setattr__(self, "short", self.label)

    @property
    def stem(self) -> str:
        """The key without its unit suffix ("p999" of "p999_ns"): derived keys use it."""
        return self.key[:-3] if self.key.endswith("_ns") else self.key

    @property
    def tick_attr(self) -> str:
        """The RunSummary attribute (in ticks) a latency field is computed from."""
        if self.kind != "latency":
            raise ValueError(f"{self.key} is not a latency statistic: it has no ticks")
        return f"{self.stem}_tick"

    @property
    def exceedance(self) -> float:
        """Fraction of samples above a percentile (1e-3 for p99.9), exact in decimal."""
        if self.quantile is None:
            raise ValueError(f"{self.key} is not a percentile")
        # round: 1 - 0.999 in binary is 0.0010000000000000009, not the 1e-3 people mean.
        return round(1.0 - self.quantile, 12)


def _latency(key: str, label: str, quantile: float | None = None) -> Field:
    return Field(key, label, "ns", "latency", quantile=quantile)


def _meta(key: str, label: str, unit: Unit = "text") -> Field:
    return Field(key, label, unit, "meta")


# Every summary has every one of these keys, in this (JSON) order; a value that does not
# exist is None.
SUMMARY_FIELDS: tuple[Field, ...] = (
    _meta("type", "type"), _meta("version", "version", "int"),
    _meta("run_id", "run", "int"), _meta("name", "name"),
    _meta("target", "target"), _meta("arch", "arch"), _meta("accel", "accel"),
    _meta("emulated", "emulated", "bool"), _meta("status", "status"),
    Field("samples", "samples", "count", "count"),
    Field("lost", "lost", "count", "count"),
    Field("overruns", "overruns", "count", "count"),
    Field("tick_hz", "tick rate", "hz", "setting"),
    Field("period_ns", "period", "ns", "setting"),
    Field("threshold_ns", "threshold", "ns", "setting"),
    Field("above_threshold", "above threshold", "count", "count", short="above thr"),
    _latency("min_ns", "min"), _latency("mean_ns", "mean"), _latency("stddev_ns", "stddev"),
    _latency("max_ns", "max"), _latency("warm_max_ns", "warm max"),
    _latency("p50_ns", "p50", 0.5), _latency("p90_ns", "p90", 0.9),
    _latency("p99_ns", "p99", 0.99), _latency("p999_ns", "p99.9", 0.999),
    _latency("p9999_ns", "p99.99", 0.9999),
    Field("injected", "injected", "count", "count"),
    _meta("message", "message"),
    # Where the percentiles come from (PERCENTILES_EXACT or PERCENTILES_HISTOGRAM): every
    # reader shows one value per percentile, and says which kind it is.
    _meta("percentiles_from", "percentiles"),
    # Samples whose ISR entry preceded their deadline: no latency, in no other figure
    # (not even `samples`); None for imports (irqlab.stats.window).
    Field("invalid", "invalid", "count", "count"),
)
# Every imported summary adds these, after SUMMARY_FIELDS (docs/formats.md section 8).
IMPORT_FIELDS: tuple[Field, ...] = (
    _meta("source", "source"), _meta("kind", "kind"),
    _meta("percentile_source", "percentiles from"),
)
# An imported summary has these only when its source allowed them.
IMPORT_EXTRA_FIELDS: tuple[Field, ...] = (
    Field("source_avg_ns", "source avg", "ns", "setting"),
    Field("percentile_note", "percentile note", "text", "note"),
    Field("above_threshold_note", "above threshold note", "text", "note"),
    Field("mean_from", "mean from", "text", "note"),
    Field("stddev_from", "stddev from", "text", "note"),
    Field("warm_max_from", "warm max from", "text", "note"),
)

_BY_KEY: dict[str, Field] = {f.key: f for f in
                             SUMMARY_FIELDS + IMPORT_FIELDS + IMPORT_EXTRA_FIELDS}
SUMMARY_KEYS: frozenset[str] = frozenset(f.key for f in SUMMARY_FIELDS)


def field(key: str) -> Field:
    """The catalog entry of a summary key (KeyError naming the key if there is none)."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"{key!r} is not a summary field (irqlab/stats/fields.py)") from None


def _fields(*keys: str) -> tuple[Field, ...]:
    return tuple(field(k) for k in keys)


LATENCY_FIELDS: tuple[Field, ...] = tuple(f for f in SUMMARY_FIELDS if f.kind == "latency")
PERCENTILE_FIELDS: tuple[Field, ...] = tuple(f for f in LATENCY_FIELDS
                                             if f.quantile is not None)
# The body and the tail: what `irqlab compare` divides by the baseline and noise-tests.
RATIO_FIELDS: tuple[Field, ...] = _fields("p50_ns", "p999_ns")
# Percentiles with few samples beyond them in short runs: warned about, marked in plots.
TAIL_FIELDS: tuple[Field, ...] = _fields("p999_ns", "p9999_ns")


@dataclass(frozen=True)
class Column:
    """A field as one table shows it: its heading there and the field."""

    heading: str
    field: Field

    @property
    def key(self) -> str:
        return self.field.key


def _view(*specs: str | tuple[str, str],
          heading: Literal["label", "short"] = "label") -> tuple[Column, ...]:
    """Columns from keys (heading = the field's ``label`` or ``short``) or (key, heading)."""
    out = []
    for spec in specs:
        if isinstance(spec, tuple):
            out.append(Column(spec[1], field(spec[0])))
        else:
            f = field(spec)
            out.append(Column(getattr(f, heading), f))
    return tuple(out)


# The summary table of `irqlab run` / `irqlab show`.
SUMMARY_TABLE = _view("samples", "lost", "overruns", "injected", "invalid",
                      "above_threshold", "min_ns", "mean_ns", "stddev_ns", "p50_ns",
                      "p90_ns", "p99_ns", "p999_ns", "p9999_ns", "max_ns", "warm_max_ns")
# The HTML report's per-run summary: its figures recompute what raw samples allow
# (reports/data.py), which does not include stddev and p90.
REPORT_TABLE = tuple(c for c in SUMMARY_TABLE if c.key not in ("stddev_ns", "p90_ns"))
# Targets side by side (`irqlab run --target a,b`), after target, accel and status.
SUITE_TABLE = _view("samples", "lost", "min_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns",
                    "warm_max_ns", "above_threshold", heading="short")
# Summary figures of `irqlab compare` (before its ratio, noise and provenance columns).
COMPARE_TABLE = _view("samples", "min_ns", "p50_ns", "p99_ns", "p999_ns", "p9999_ns",
                      "max_ns", "warm_max_ns", "above_threshold", heading="short")
# `irqlab matrix`: the headings of the board logs engineers already read (rt_eval, tbm).
MATRIX_TABLE = _view(("mean_ns", "AVG"), ("min_ns", "MIN"), ("max_ns", "MAX"),
                     ("warm_max_ns", "WARM MAX"), ("p999_ns", "p99.9"),
                     ("above_threshold", "ABOVE THR"))
# `irqlab list`: one line per run.
LIST_TABLE = _view("samples", "p99_ns", "max_ns", heading="short")
# Windows share the summary's key names (docs/formats.md section 4, window objects).
WINDOW_TABLE = _view("samples", "mean_ns", "stddev_ns", "min_ns", "max_ns",
                     "above_threshold", heading="short")
# Provenance lines `irqlab show` prints under an imported run's table, then its notes.
IMPORTED_ROWS = _view("kind", "percentile_source", "source_avg_ns")
NOTE_FIELDS: tuple[Field, ...] = tuple(f for f in IMPORT_EXTRA_FIELDS if f.kind == "note")
# Which latency of a split run (irqlab.stats.parts) compare, check and report read
# (`--metric`): the whole, the IRQ part or the thread part.
METRICS = {"total": "total latency (deadline -> probe thread running)",
           "irq": "IRQ latency (deadline -> the timer's hard IRQ)",
           "thread": "thread latency (the timer's hard IRQ -> probe thread running)"}
# `irqlab check` limits: heading = option name (--max, --warm-max, --p99.9, ...).
CHECK_LIMITS = tuple(Column(f.label.replace(" ", "-"), f) for f in _fields(
    "max_ns", "warm_max_ns", "p50_ns", "p99_ns", "p999_ns", "p9999_ns", "above_threshold"))


# ---- the builder ----------------------------------------------------------------

def make_summary(run_id: int, name: str, values: Mapping[str, Any],
                 imported: bool = False) -> dict[str, Any]:
    """A summary object: every catalog key in JSON order (then IMPORT_FIELDS when
    ``imported``), each from ``values`` or None. Runs and importers both build theirs
    here, so their key sets and order cannot drift apart.

    A key of ``values`` outside those fields is a ValueError: a misspelt key would
    otherwise be a silent None in the summary.
    """
    fields = SUMMARY_FIELDS + (IMPORT_FIELDS if imported else ())
    allowed = {f.key for f in fields} - {"type", "version", "run_id", "name"}
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise ValueError(f"not summary fields: {', '.join(unknown)}")
    given = {**values, "type": "summary", "version": SUMMARY_VERSION, "run_id": run_id,
             "name": name}
    return {f.key: given.get(f.key) for f in fields}


def percentiles_from(summary: Mapping[str, Any]) -> str | None:
    """Where a stored summary's percentiles come from: its ``percentiles_from``; for an
    import, what its ``percentile_source`` says; a measured run stored before the key
    existed (2026-11-26) has the live histogram's estimate. None: no percentiles."""
    if summary.get("percentiles_from"):
        return str(summary["percentiles_from"])
    if summary.get("percentile_source"):
        return _FROM_IMPORT.get(str(summary["percentile_source"]))
    if summary.get("source") is None and summary.get("p50_ns") is not None:
        return PERCENTILES_HISTOGRAM
    return None


def stats_figures(s: TickFigures | None, tick_hz: int | None) -> dict[str, Any]:
    """``samples``, ``above_threshold`` and every latency field of a run's statistics,
    latencies in ns; no statistics (or no samples, or no tick rate) gives 0, 0, None."""
    if s is None or tick_hz is None or s.samples == 0:
        return {"samples": 0, "above_threshold": 0, **{f.key: None for f in LATENCY_FIELDS},
                "percentiles_from": None, "invalid": s.invalid if s is not None else 0}
    out: dict[str, Any] = {"samples": s.samples, "above_threshold": s.above_threshold,
                           "invalid": s.invalid}
    from .units import ticks_to_ns   # here: units imports numpy, the catalog must not

    for f in LATENCY_FIELDS:
        val = getattr(s, f.tick_attr)
        out[f.key] = None if val is None else ticks_to_ns(val, tick_hz)
    # RunStats' percentiles are the histogram's; the run's end replaces them with exact
    # ones from the stored samples (irqlab.store.percentiles).
    out["percentiles_from"] = PERCENTILES_HISTOGRAM
    return out
