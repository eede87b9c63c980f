"""The compare table model: one row per run against the first (baseline) run.

The model is plain JSON-ready dicts (versioned) so every output format, terminal, markdown,
csv, json and the HTML report, renders the same numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irqlab.reports import noise
from irqlab.reports.comparability import pair_warnings, run_warnings, threshold_warning
from irqlab.reports.data import FROM_RAW, FROM_TEXT, NS_PER_S, RunData, figures
from irqlab.reports.scan import scan_runs
from irqlab.durations import format_ns, parse_duration_ns
from irqlab.models.rtds import rtds_bound
from irqlab.stats.fields import RATIO_FIELDS

COMPARE_VERSION = 1
NA_NOISE = "n/a"


def _ratio(value: Any, base: Any) -> float | None:
    if value is None or base is None or base <= 0:
        return None
    return value / base


def build_compare(runs: list[RunData], threshold_ns: int | None = None,
                  seed: int = noise.DEFAULT_SEED,
                  resamples: int = noise.DEFAULT_RESAMPLES) -> dict[str, Any]:
    """The table model; ``runs[0]`` is the baseline."""
    if not runs:
        raise ValueError("compare needs at least one run")
    # Runs kept in the store are read once for all of the below.
    scan_runs(runs, {threshold_ns}, noise_seeds(runs, seed))
    figs = [figures(r, threshold_ns) for r in runs]
    base, base_figs = runs[0], figs[0]
    rows, warnings = [], []
    base_sorted = None
    for run, f in zip(runs, figs):
        row: dict[str, Any] = {
            "run_id": run.run_id, "name": run.row.name, "status": run.row.status,
            "accel": run.row.accel, "emulated": run.row.emulated, "source": run.row.source,
            "tags": run.row.tags, **f,
            **{f"{r.stem}_ratio": _ratio(f.get(r.key), base_figs.get(r.key))
               for r in RATIO_FIELDS},
            "baseline": run is base,
        }
        bound = rtds_server(run)
        if bound is not None:
            row["rtds_period_ns"], row["rtds_budget_ns"], row["rtds_bound_ns"] = bound
        if run is base:
            row["noise"] = None
        elif base.has_raw and run.has_raw:
            if base_sorted is None:
                base_sorted = _noise_sample(base, seed)
            run_sorted = _noise_sample(run, seed + 1)
            results = [noise.compare_quantile(base_sorted, run_sorted, q, label, seed,
                                              resamples) for q, label in noise.QUANTILES]
            row["noise"] = {"test": "bootstrap", "results": [r.to_dict() for r in results],
                            "beyond_noise": any(r.beyond_noise for r in results)}
        else:
            missing = [r.label for r in (base, run) if not r.has_raw]
            row["noise"] = {"test": NA_NOISE, "reason": f"no raw samples for "
                                                        f"{' and '.join(missing)}"}
        rows.append(row)
        if run is not base:
            warnings.extend(pair_warnings(base, run))
        warnings.extend(run_warnings(run, f))
        if bound is not None and f.get("max_ns") is not None:
            warnings.append(_rtds_note(run, f["max_ns"], *bound))
    thr = threshold_warning(runs, threshold_ns)
    if thr:
        warnings.append(thr)
    sources = {f["percentiles_from"] for f in figs}
    return {"type": "compare", "version": COMPARE_VERSION, "baseline_run_id": base.run_id,
            "threshold_override_ns": threshold_ns, "rows": rows, "warnings": warnings,
            "noise_method": noise.method_text(seed, resamples),
            "percentiles_note": _percentiles_note(sources)}


def noise_seeds(runs: list[RunData], seed: int) -> dict[int, int]:
    """The noise test's seed of each run with raw samples: the baseline's, then seed + 1
    (build_compare's rule), when the baseline has raw samples."""
    if not runs or not runs[0].has_raw:
        return {}
    return {r.run_id: seed if i == 0 else seed + 1 for i, r in enumerate(runs) if r.has_raw}


def _noise_sample(run: RunData, seed: int) -> np.ndarray:
    """The run's sorted (subsampled) latencies in ns for the noise test, read from the
    store batch by batch when the run keeps its samples there."""
    if run.stored is None:
        return noise.prepare(run.latency_ns_float(), seed)
    if seed in run.stored.noise:
        return run.stored.noise[seed]
    count, scale = run.stored.count, NS_PER_S / run.tick_hz
    return run.stored.over_sequence(
        lambda batches: noise.prepare_stream(batches, count, scale, seed))


def rtds_server(run: RunData) -> tuple[int, int, int] | None:
    """(period, budget, 2(P-B) bound) in ns of a run whose RTDS knobs were applied and read
    back (docs/xen.md), else None. The bound is irqlab.models.rtds's."""
    hooks = (run.row.metadata or {}).get("hooks") or {}
    knobs = [hooks.get("knob:rtds_period"), hooks.get("knob:rtds_budget")]
    if not all(k and k.get("status") == "applied" for k in knobs):
        return None
    try:
        period, budget = (parse_duration_ns(str(k["requested"])) for k in knobs)
        return period, budget, rtds_bound(period, budget).bound_ns
    except (KeyError, ValueError):
        return None                    # a knob value the model refuses: nothing to show


def _rtds_note(run: RunData, max_ns: int, period: int, budget: int,
               bound: int) -> dict[str, Any]:
    """The measured max against the periodic-server bound (issue 14: compare and report
    show it for runs with RTDS parameters)."""
    verdict = (f"{max_ns / bound:.2f}x the bound: something beyond the RTDS budget "
               f"delayed it" if max_ns > bound else "within the bound")
    return {"run_id": run.run_id, "kind": "rtds bound", "max_ns": max_ns,
            "rtds_bound_ns": bound,
            "text": f"{run.label} ran under RTDS period {format_ns(period, 'exact')}, budget "
                    f"{format_ns(budget, 'exact')}: the periodic-server bound 2(P-B) is "
                    f"{format_ns(bound, 'exact')} (irqlab model rtds); its max "
                    f"{format_ns(max_ns, 'sig3')} is {verdict}"}


def _percentiles_note(sources: set[str]) -> str:
    if sources == {FROM_RAW}:
        return "percentiles: " + FROM_TEXT[FROM_RAW]
    parts = [f"{'raw' if s == FROM_RAW else 'summary'}: {FROM_TEXT[s]}" for s in sorted(sources)]
    return "percentiles per run (column 'from') — " + "; ".join(parts)
