"""The `tail` model: one run's (or series') extreme-value fit as a versioned JSON object
(irqlab.stats.evt does the statistics; `irqlab tail`, `check --max-exceed`, the report
and the dashboard read this model)."""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np

from irqlab.reports.data import NS_PER_S, RunData
from irqlab.reports.scan import scan_runs
from irqlab.stats.topk import TopK
from irqlab.durations import format_latency
from irqlab.stats import evt

TAIL_VERSION = 1
PER_SAMPLE = (1e-6, 1e-9)        # pWCET probabilities per sample
PER_HOUR = (1e-6, 1e-9)          # ... and per hour at the run's sample rate
DEFAULT_WIDTH = 10.0             # the interval width (high / low) samples_needed aims at


def latencies_in_order(runs: list[RunData]) -> np.ndarray:
    """Every sample of the runs in ns, run after run in sequence order."""
    parts = []
    for run in runs:
        scale = NS_PER_S / run.tick_hz
        parts.append(run.over_sequence(lambda batches: np.concatenate(
            [np.asarray(b, np.float64) * scale for b in batches] or [np.empty(0)])))
    return np.concatenate(parts) if parts else np.empty(0)


def run_count(run: RunData) -> int:
    """How many raw samples a run has (in memory or in the store)."""
    return run.stored.count if run.stored is not None else int(run.latency_tick.size)


def _span_s(span: float, n: int) -> float:
    """A run's measured time: its last deadline after its first, plus one period (n
    samples cover n periods, not n - 1)."""
    return span + span / max(1, n - 1)


def _count_above(runs: list[RunData], x_ns: float) -> int:
    """Samples of the runs above x_ns: one more pass, asked only for a latency below the
    fit's kept top values (irqlab tail --at deep in the body)."""
    total = 0
    for run in runs:
        scale = NS_PER_S / run.tick_hz
        total += run.over_sequence(lambda batches: sum(
            int(np.count_nonzero(np.asarray(b, np.float64) * scale > x_ns))
            for b in batches))
    return total


def tail_sample(runs: list[RunData]) -> tuple[evt.TailSample, float]:
    """What the fit reads of the runs' samples (run after run, in sequence order) and
    their sample rate (samples per second of measurement). A single stored run's top
    values come from reports/scan.py's pass (shared with the report's other figures);
    otherwise one pass over the runs keeps them."""
    n = sum(run_count(r) for r in runs)
    if len(runs) == 1 and runs[0].stored is not None:
        scan_runs(runs, set(), tail=True)       # nothing read when already scanned
        got = runs[0].stored.tail
        values, positions, seconds = got.top_ns, got.positions, _span_s(got.span_s, n)
    else:
        top, seconds = TopK(evt.top_count(n)), 0.0
        for run in runs:
            scale = NS_PER_S / run.tick_hz

            def read(batches: Iterator[Any]) -> float:
                last = 0.0
                for tick, deadline_s in batches:
                    top.add(np.asarray(tick, np.float64) * scale)
                    if len(deadline_s):
                        last = max(last, float(np.max(deadline_s)))
                return last
            seconds += _span_s(run.over_sequence(read, with_deadline=True), run_count(run))
        values, positions = top.ascending()
    sample = evt.TailSample(n, values, positions, lambda x: _count_above(runs, x))
    return sample, (n / seconds if seconds > 0 else math.nan)


def build_tail(runs: list[RunData], at_ns: list[int] | None = None,
               width: float = DEFAULT_WIDTH) -> dict[str, Any]:
    """The tail model (docs/formats.md, `tail`). ``at_ns``: latencies whose exceedance
    probability is wanted (default: the data's maximum and 10 times beyond it in
    probability: twice the maximum)."""
    sample, rate = tail_sample(runs)
    fit = evt.fit_sample(sample)
    top = float(sample.top_ns[-1]) if sample.top_ns.size else None
    head: dict[str, Any] = {
        "type": "tail", "version": TAIL_VERSION,
        "run_ids": [r.run_id for r in runs], "name": runs[0].row.name,
        "emulated": any(bool(r.row.emulated) for r in runs),
        "method": evt.METHOD, "samples": sample.n, "rate_per_s": rate,
        "max_ns": top,
        **fit.to_dict(), "checks": [c.to_dict() for c in fit.checks],
        "exceedance": [], "pwcet": []}
    if fit.refused is not None:
        return head
    wanted = list(at_ns) if at_ns else [int(top), int(2 * top)]
    for x in wanted:
        p, lo, hi = evt.exceedance(fit, float(x))
        head["exceedance"].append({
            "latency_ns": int(x), "p": p, "p_low": lo, "p_high": hi,
            "samples_for_width": evt.samples_for_width(fit, lo, hi, width),
            "width": width})
    for prob in PER_SAMPLE:
        head["pwcet"].append(_pwcet(fit, "sample", prob, prob))
    if math.isfinite(rate) and rate > 0:
        per_hour = rate * 3600
        for prob in PER_HOUR:
            # Clusters of exceedances arrive at theta x the exceedance rate: the chance of
            # at least one in an hour is ~ theta N p (N samples an hour).
            head["pwcet"].append(_pwcet(fit, "hour", prob, prob / (fit.theta * per_hour)))
    return head


def _pwcet(fit: evt.TailFit, per: str, prob: float, per_sample: float) -> dict[str, Any]:
    x, lo, hi = evt.pwcet(fit, per_sample)
    return {"per": per, "probability": prob, "per_sample": per_sample,
            "latency_ns": x, "latency_low_ns": lo,
            "latency_high_ns": None if math.isinf(hi) else hi}


SPLIT_QUANTILE = 0.9999          # the latency the split check predicts the exceedances of


def split_check(runs: list[RunData]) -> dict[str, Any]:
    """Out-of-sample check of the fit: the first half of the samples is fitted, and the
    number of samples of the second half above the first half's p99.99 is predicted
    with an interval (predicted_count) and counted. A fit that describes the run puts
    the count inside the interval; a refused first half predicts nothing."""
    lat = latencies_in_order(runs)
    half = lat.size // 2
    first, second = lat[:half], lat[half:]
    fit = evt.fit_tail(first)
    out: dict[str, Any] = {"quantile": SPLIT_QUANTILE, "samples_first": int(half),
                           "samples_second": int(second.size), "refused": fit.refused}
    if fit.refused is not None or half == 0:
        return out
    srt = np.sort(first)
    q = float(srt[min(half - 1, int(math.ceil(SPLIT_QUANTILE * half)) - 1)])
    p, lo, hi = evt.exceedance(fit, q)
    expected, low, high = predicted_count(p, lo, hi, fit.theta, second.size)
    observed = int(np.count_nonzero(second > q))
    out.update(latency_ns=q, p=p, p_low=lo, p_high=hi, expected=expected,
               expected_low=low, expected_high=high, observed=observed,
               inside=bool(low <= observed <= high))
    return out


def predicted_count(p: float, p_low: float, p_high: float, theta: float, samples: int
                    ) -> tuple[float, float, float]:
    """(expected, low, high) exceedances in `samples` more samples: the probability
    interval times the count, widened by the Poisson noise of the clusters (clusters of
    1/theta exceedances arrive as Poisson events; 95 % normal bounds with a continuity
    term)."""
    lo_mu, hi_mu = p_low * samples * theta, p_high * samples * theta
    low = max(0.0, lo_mu - 1.96 * math.sqrt(lo_mu)) / theta
    high = (hi_mu + 1.96 * math.sqrt(hi_mu) + 1) / theta
    return p * samples, low, high


# --- the lines `irqlab tail`, the report and the dashboard print -----------------------

def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def tail_lines(model: dict[str, Any]) -> list[str]:
    """The fit in a few lines: what was fitted, each check, then the figures."""
    ids = ", ".join(f"#{i}" for i in model["run_ids"])
    out = [f"tail of {ids} {model['name']}: {model['samples']:,} samples, max "
           f"{format_latency(model['max_ns'])}"
           + (" (EMULATED: not representative)" if model["emulated"] else "")]
    if model["exceedances"]:
        out.append(f"threshold {format_latency(model['threshold_ns'])}: "
                   f"{model['exceedances']:,} exceedances, GPD shape xi "
                   f"{model['xi']:.3g}, scale {format_latency(model['sigma_ns'])}, "
                   f"extremal index {model['extremal_index']:.2f}")
    for c in model["checks"]:
        mark = "ok  " if c["passed"] else "FAIL"
        detail = f" — {c['detail']}" if c["detail"] else ""
        out.append(f"  {mark} {c['name']}: {c['test']}, p = {_p(c['p_value'])}{detail}")
    if model["refused"]:
        out.append(f"REFUSED: {model['refused']}; no extrapolation is defensible from "
                   f"these samples (a longer, steadier run, or a quieter host)")
        return out + _split_lines(model.get("split_check"))
    for e in model["exceedance"]:
        need = e["samples_for_width"]
        more = (f"; ~{need:,} samples for an interval x{e['width']:g} wide"
                if need and need > model["samples"] else "")
        out.append(f"P(latency > {format_latency(e['latency_ns'])}) per sample: "
                   f"{_p(e['p'])} (95% {_p(e['p_low'])}–{_p(e['p_high'])}){more}")
    for w in model["pwcet"]:
        hi = w["latency_high_ns"]
        out.append(f"pWCET at {w['probability']:g} per {w['per']}: "
                   f"{format_latency(w['latency_ns'])} (95% "
                   f"{format_latency(w['latency_low_ns'])}–"
                   f"{'unbounded' if hi is None else format_latency(hi)})")
    out.append("method: " + model["method"])
    out += _split_lines(model.get("split_check"))
    return out


def _split_lines(check: dict[str, Any] | None) -> list[str]:
    """--split-check's line."""
    if check is None:
        return []
    if check["refused"]:
        return [f"split check: the first half's fit is refused ({check['refused']})"]
    return [f"split check: the first half's p99.99 ({format_latency(check['latency_ns'])}) "
            f"predicted {check['expected']:.1f} exceedances in the second half (95% "
            f"{check['expected_low']:.1f}–{check['expected_high']:.1f}); counted "
            f"{check['observed']}: {'inside' if check['inside'] else 'OUTSIDE'}"]
