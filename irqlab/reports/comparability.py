"""Why two runs may not be comparable, in words that say what to do about it."""

from __future__ import annotations

from typing import Any, Callable

from irqlab.durations import format_ns
from irqlab.reports.data import RunData
from irqlab.humanize import format_count
from irqlab.stats.fields import TAIL_FIELDS

# A tick rate this far from the baseline's is another counter, not calibration jitter.
TICK_HZ_TOLERANCE = 0.01
# Fewer samples beyond a percentile than this and the percentile is one or two outliers.
MIN_TAIL_SAMPLES = 10


def _probe(run: RunData) -> dict[str, Any]:
    return run.row.metadata.get("probe") or {}


def _ns(v: Any) -> str:
    """A setting (period, threshold) as people type it: '30 us', '1 ms'."""
    return format_ns(v, "exact") if isinstance(v, (int, float)) else "unknown"


def _emul(v: Any) -> str:
    return {True: "emulated", False: "hardware-assisted"}.get(v, "of unknown kind")


def _ticks(v: Any) -> str:
    return f"{v[0] or 'unknown'} ticks and a {v[1] or 'unknown'} timer"


# (kind, fact getter, how a fact is shown, message template with {base} {run} {a} {b}).
_PAIR_CHECKS: list[tuple[str, Callable[[RunData], Any], Callable[[Any], str], str]] = [
    ("kind", lambda r: r.row.kind, str,
     "{run} measures {b} but the baseline {base} measures {a}: these are different "
     "quantities; compare runs of one kind only"),
    # Host, kernel and every other host fact and setting: compare's "what differs"
    # (irqlab.store.provenance.differs), which names each fact that differs.
    ("emulated", lambda r: r.row.emulated, _emul,
     "{run} is {b} but the baseline {base} is {a}: emulated figures show the pipeline, "
     "not hardware; compare emulated with emulated and real with real"),
    ("accel", lambda r: r.row.accel, str,
     "{run} ran under {b} and the baseline {base} under {a}: the accelerator dominates "
     "latency; compare runs with the same --accel (and --icount)"),
    ("period", lambda r: r.row.period_ns, _ns,
     "{run} used a {b} period and the baseline {base} {a}: sample counts and load per "
     "second differ; rerun with the same --period"),
    ("tick source", lambda r: (_probe(r).get("tick_method"), _probe(r).get("timer_mode")),
     _ticks,
     "{run} timed with {b} but the baseline {base} with {a}: a different tick source or "
     "timer mode changes what is measured; rerun with the same --timer on the same kind "
     "of machine"),
    ("source", lambda r: r.row.source, str,
     "{run} comes from {b} and the baseline {base} from {a}: tools measure latency "
     "differently (start and end points); compare runs from one tool"),
]


def pair_warnings(base: RunData, run: RunData) -> list[dict[str, Any]]:
    """Warnings about comparing ``run`` with the baseline ``base``."""
    out = []
    for kind, get, show, template in _PAIR_CHECKS:
        a, b = get(base), get(run)
        if a is None and b is None or a == b:
            continue
        if a == (None, None) or b == (None, None):
            continue  # no probe facts (e.g. an imported run): nothing to compare
        out.append({"run_id": run.run_id, "kind": kind, "text": template.format(
            base=base.label, run=run.label, a=show(a), b=show(b))})
    ha, hb = base.row.tick_hz, run.row.tick_hz
    if ha and hb and abs(hb - ha) > TICK_HZ_TOLERANCE * ha and \
            not any(w["kind"] == "tick source" for w in out):
        out.append({"run_id": run.run_id, "kind": "tick rate", "text":
                    f"{run.label} counted at {hb / 1e6:.1f} MHz and the baseline "
                    f"{base.label} at {ha / 1e6:.1f} MHz: another counter or a bad "
                    f"calibration; check both runs' tick method with `irqlab show`"})
    return out


def run_warnings(run: RunData, figs: dict[str, Any]) -> list[dict[str, Any]]:
    """Warnings about one run on its own."""
    out = []
    rid, label = run.run_id, run.label
    if run.row.status != "ok":
        out.append({"run_id": rid, "kind": "status", "text":
                    f"{label} is {run.row.status}: its figures cover only what was measured "
                    f"before it stopped; rerun it to completion before deciding on it"})
    if figs.get("lost"):
        out.append({"run_id": rid, "kind": "lost", "text":
                    f"{label} lost {figs['lost']} samples (ring overruns or sequence gaps): "
                    f"its tail may be missing exactly the slow ones; rerun with a longer "
                    f"--period or on a quieter host"})
    n = figs.get("samples") or 0
    thin = [(f.label, n * (1 - f.quantile), f.quantile) for f in TAIL_FIELDS
            if f.quantile is not None and figs.get(f.key) is not None
            and n * (1 - f.quantile) < MIN_TAIL_SAMPLES]
    if thin:
        beyond = " and ".join(f"its {name} {'rests ' if i == 0 else ''}on {k:.2g}"
                              for i, (name, k, _) in enumerate(thin))
        need = round(MIN_TAIL_SAMPLES / (1 - thin[-1][2]))
        out.append({"run_id": rid, "kind": "few samples", "text":
                    f"{label} has {format_count(n)} samples, so {beyond} samples beyond "
                    f"it (fewer than {MIN_TAIL_SAMPLES}): measure at least "
                    f"{format_count(need)} samples (--samples, --duration) to trust "
                    f"{'them' if len(thin) > 1 else 'it'}"})
    return out


def threshold_warning(runs: list[RunData], override: int | None) -> dict[str, Any] | None:
    """The above-threshold columns count against different thresholds."""
    if override is not None:
        return None
    thresholds = sorted({r.threshold_ns for r in runs if r.threshold_ns is not None})
    if len(thresholds) < 2:
        return None
    shown = ", ".join(_ns(t) for t in thresholds)
    return {"run_id": None, "kind": "threshold", "text":
            f"the runs counted 'above threshold' against different thresholds ({shown}): "
            f"pass --threshold (e.g. --threshold {_ns(thresholds[0]).replace(' ', '')}) "
            f"to count all runs against one"}
