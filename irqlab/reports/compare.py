"""The compare table model: one row per run against the first (baseline) run.

Runs of one series (`irqlab run --repeat`, tag ``series``) form a group; the noise test
compares each group with the baseline's group, the run being the unit
(irqlab.reports.noise). Ratios in the row stay each run's against the baseline run.

The model is plain JSON-ready dicts (versioned) so every output format, terminal, markdown,
csv, json and the HTML report, renders the same numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irqlab.reports import noise
from irqlab.reports.comparability import pair_warnings, run_warnings, threshold_warning
from irqlab.store.provenance import differs, provenance
from irqlab.reports.data import FROM_RAW, FROM_TEXT, NS_PER_S, RunData, figures
from irqlab.reports.percpu import per_cpu_figures
from irqlab.reports.scan import scan_runs
from irqlab.reports.select import SERIES_TAG
from irqlab.durations import format_ns, parse_duration_ns
from irqlab.models.rtds import rtds_bound
from irqlab.stats.fields import RATIO_FIELDS

COMPARE_VERSION = 2
NA_NOISE = "n/a"
# The key of a stored run's kept sample (StoredSamples.noise): the thinning does not
# depend on the seed, so one sample serves every seed.
NOISE_KEY = 0

# What a noise object's intervals and p-values describe (issue 45): one run a side, the
# samples' variation within those runs only, which says nothing of run-to-run variation
# (the tables then print ratios alone); two or more a side, the runs' variation.
SCOPE_WITHIN_RUN = "within-run"
SCOPE_BETWEEN_RUNS = "between-runs"


def _ratio(value: Any, base: Any) -> float | None:
    if value is None or base is None or base <= 0:
        return None
    return value / base


def groups_of(runs: list[RunData]) -> list[list[int]]:
    """Indices of runs by group, groups in order of their first run: the runs sharing
    one `series` tag (replicates of `irqlab run --repeat`) form one group, adjacent or
    not (a suite's interleaved series A1 B1 A2 B2 gives the groups A and B); a run
    without the tag is a group of its own."""
    out: list[list[int]] = []
    by_series: dict[str, int] = {}
    for i, run in enumerate(runs):
        series = series_of(run)
        if series is None or series not in by_series:
            if series is not None:
                by_series[series] = len(out)
            out.append([i])
        else:
            out[by_series[series]].append(i)
    return out


def series_of(run: RunData) -> str | None:
    return (run.row.tags or {}).get(SERIES_TAG)


def build_compare(runs: list[RunData], threshold_ns: int | None = None,
                  seed: int = noise.DEFAULT_SEED,
                  resamples: int = noise.DEFAULT_RESAMPLES,
                  per_cpu: bool = False,
                  margins: dict[str, float] | None = None) -> dict[str, Any]:
    """The table model; ``runs[0]`` is the baseline, its group the baseline group.
    With ``per_cpu`` each row gains ``per_cpu``: {"0": that CPU's figures, ...} ({} for
    a run without per-CPU samples; irqlab.reports.percpu). ``margins``: the `same`
    verdict's equivalence margin per quantile label (noise.DEFAULT_MARGINS)."""
    if not runs:
        raise ValueError("compare needs at least one run")
    # Runs kept in the store are read once for all of the below.
    scan_runs(runs, {threshold_ns}, noise_seeds(runs, seed))
    figs = [figures(r, threshold_ns) for r in runs]
    base, base_figs = runs[0], figs[0]
    groups = groups_of(runs)
    group_of = {i: g for g, members in enumerate(groups) for i in members}
    margins = {**noise.DEFAULT_MARGINS, **(margins or {})}
    noise_of = _group_noise(runs, figs, groups, seed, resamples, margins)
    rows, warnings = [], []
    for i, (run, f) in enumerate(zip(runs, figs)):
        g = group_of[i]
        row: dict[str, Any] = {
            "run_id": run.run_id, "name": run.row.name, "status": run.row.status,
            "accel": run.row.accel, "emulated": run.row.emulated, "source": run.row.source,
            "tags": run.row.tags, **f,
            **{f"{r.stem}_ratio": _ratio(f.get(r.key), base_figs.get(r.key))
               for r in RATIO_FIELDS},
            "baseline": run is base,
            "group": g, "series": series_of(run), "group_runs": len(groups[g]),
        }
        bound = rtds_server(run)
        if bound is not None:
            row["rtds_period_ns"], row["rtds_budget_ns"], row["rtds_bound_ns"] = bound
        row["noise"] = noise_of[g]
        if per_cpu:
            row["per_cpu"] = per_cpu_figures(run, threshold_ns)
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
    # Every recorded condition (setting, load, knob, host fact) not equal across the
    # runs: a difference in latency may come from any of them (issue 31).
    diff = differs([provenance(r.row) for r in runs]) if len(runs) > 1 else []
    model = {"type": "compare", "differs": diff, "version": COMPARE_VERSION,
             "baseline_run_id": base.run_id,
             "threshold_override_ns": threshold_ns, "rows": rows, "warnings": warnings,
             "noise_method": noise.method_text(seed, resamples),
             "percentiles_note": _percentiles_note(sources), "groups": len(groups),
             "margins": margins}
    if per_cpu:
        model["per_cpu"] = True
    return model


def _group_noise(runs: list[RunData], figs: list[dict[str, Any]], groups: list[list[int]],
                 seed: int, resamples: int, margins: dict[str, float]
                 ) -> list[dict[str, Any] | None]:
    """The noise object of each group against the baseline group (None for that one)."""
    out: list[dict[str, Any] | None] = [None]
    base = groups[0]
    base_side = None
    for members in groups[1:]:
        counts = [len(base), len(members)]
        if min(counts) >= 2:
            out.append(_replicate_noise(figs, base, members, margins))
            continue
        missing = [runs[i].label for i in base + members if not runs[i].has_raw]
        if missing:
            out.append({"test": NA_NOISE, "reason": f"no raw samples for "
                                                    f"{' and '.join(missing)}",
                        "replicates": counts,
                        "verdict": noise.VERDICT_UNKNOWN, "beyond_noise": None,
                        "scope": SCOPE_WITHIN_RUN})
            continue
        if base_side is None:
            base_side = _block_side(runs, base)
        run_side = _block_side(runs, members)
        results = noise.block_bootstrap(base_side, run_side, seed, resamples)
        beyond = (None if any(r.beyond_noise is None for r in results) else False)
        out.append({"test": noise.TEST_SINGLE, "results": [r.to_dict() for r in results],
                    "beyond_noise": beyond, "verdict": noise.VERDICT_UNKNOWN,
                    "reason": noise.SINGLE_REASON, "scope": SCOPE_WITHIN_RUN,
                    "method": noise.row_method(noise.TEST_SINGLE, seed, resamples),
                    "block_len": [base_side.block_len_samples, run_side.block_len_samples],
                    "replicates": counts})
    return out


def _replicate_noise(figs: list[dict[str, Any]], base: list[int],
                     members: list[int], margins: dict[str, float]) -> dict[str, Any]:
    """The t-tests on each run's quantiles (the run is the unit; noise.run_level_ratio)."""
    results = []
    samples = (sum(figs[i]["samples"] or 0 for i in base),
               sum(figs[i]["samples"] or 0 for i in members))
    for field in RATIO_FIELDS:
        qa = [figs[i].get(field.key) for i in base]
        qb = [figs[i].get(field.key) for i in members]
        if any(v is None for v in qa + qb):
            continue
        results.append(noise.run_level_ratio(qa, qb, field.label, samples=samples,
                                             margin=margins.get(field.label)))
    counts = [len(base), len(members)]
    if not results:
        return {"test": NA_NOISE, "reason": "a run has no percentiles", "replicates": counts,
                "verdict": noise.VERDICT_UNKNOWN, "beyond_noise": None,
                "scope": SCOPE_BETWEEN_RUNS}
    verdict, reason = noise.row_verdict(results)
    flags = [r.beyond_noise for r in results if r.beyond_noise is not None]
    return {"test": noise.TEST_REPLICATES, "results": [r.to_dict() for r in results],
            "beyond_noise": any(flags) if flags else None, "verdict": verdict,
            "reason": reason, "scope": SCOPE_BETWEEN_RUNS,
            "method": noise.row_method(noise.TEST_REPLICATES), "block_len": None,
            "replicates": counts}


def noise_seeds(runs: list[RunData], seed: int) -> dict[int, int]:
    """The runs whose samples the single-run bootstrap will read (run_id -> the key of
    their kept sample): those of a group compared by the block bootstrap, i.e. when it
    or the baseline group has one run."""
    if not runs:
        return {}
    groups = groups_of(runs)
    wanted: set[int] = set()
    for members in groups[1:]:
        if min(len(groups[0]), len(members)) < 2:
            wanted.update(groups[0] + members)
    if not all(runs[i].has_raw for i in wanted):
        wanted = {i for i in wanted if runs[i].has_raw}
    return {runs[i].run_id: NOISE_KEY for i in sorted(wanted)}


def _block_side(runs: list[RunData], members: list[int]) -> noise.BlockSide:
    series = [_noise_sample(runs[i]) for i in members]
    strides = [noise.thinning(_sample_count(runs[i])) for i in members]
    return noise.BlockSide.of(series, strides)


def _sample_count(run: RunData) -> int:
    if run.stored is not None:
        return run.stored.count
    assert run.latency_tick is not None
    return int(run.latency_tick.size)


def _noise_sample(run: RunData) -> np.ndarray:
    """The run's latencies in ns, time order, thinned for the bootstrap; read from the
    store batch by batch when the run keeps its samples there."""
    if run.stored is None:
        return noise.prepare(run.latency_ns_float())
    if NOISE_KEY in run.stored.noise:
        return run.stored.noise[NOISE_KEY]
    count, scale = run.stored.count, NS_PER_S / run.tick_hz
    got = run.stored.over_sequence(
        lambda batches: noise.prepare_stream(batches, count, scale))
    run.stored.noise[NOISE_KEY] = got
    return got


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
