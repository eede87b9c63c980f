"""Pass/fail limits for CI: evaluate a run against them, explain, and write JUnit XML.

JUnit XML follows the de-facto schema CI systems read (Jenkins, GitLab, GitHub actions
reporters): <testsuites> holding one <testsuite> per run and one <testcase> per limit,
with <failure> for a limit exceeded and <error> when the run cannot be judged.
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from irqlab.durations import format_ns
from irqlab.reports.data import FROM_TEXT, RunData, figures
from irqlab.stats.fields import CHECK_LIMITS

CHECK_VERSION = 1

# (option / limit name, figures key, unit) in the order limits are reported.
LIMITS: list[tuple[str, str, str]] = [(c.heading, c.key, c.field.unit)
                                      for c in CHECK_LIMITS]
_UNIT = {name: unit for name, _, unit in LIMITS}
_KEY = {name: key for name, key, _ in LIMITS}


class CheckDataError(Exception):
    """The run cannot be judged (no samples, failed, figure missing): exit 2."""


@dataclass
class CheckResult:
    """Every limit's outcome for one run (``error`` set when it cannot be judged)."""

    run_id: int
    name: str
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.error is None and all(o["passed"] for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "check", "version": CHECK_VERSION, "run_id": self.run_id,
                "name": self.name, "passed": self.passed, "error": self.error,
                "limits": self.outcomes, "notes": self.notes}


def _show(value: int | float, unit: str) -> str:
    return format_ns(value, "sig3") if unit == "ns" else str(value)


def evaluate(run: RunData, limits: list[tuple[str, int]],
             threshold_ns: int | None = None) -> CheckResult:
    """Judge ``run`` against ``(limit name, maximum allowed)`` pairs (ns or a count)."""
    res = CheckResult(run.run_id, run.row.name)
    try:
        figs = _figures(run, threshold_ns)
    except CheckDataError as exc:
        res.error = str(exc)
        return res
    res.notes.append("percentiles " + FROM_TEXT[figs["percentiles_from"]])
    if run.row.status != "ok":
        res.notes.append(f"run {run.row.status}: judged on the samples it has")
    if figs.get("threshold_ns") is not None:
        res.notes.append(f"threshold {format_ns(figs['threshold_ns'], 'sig3')}")
    for name, allowed in limits:
        unit = _UNIT[name]
        value = figs.get(_KEY[name])
        if value is None:
            res.error = (f"run {run.label} has no {name} figure (its summary lacks it and "
                         f"no raw samples are stored): it cannot be checked against --{name}")
            return res
        excess = value - allowed
        out = {"limit": name, "value": value, "allowed": allowed, "unit": unit,
               "passed": excess <= 0, "excess": max(0, excess),
               "excess_pct": (100.0 * excess / allowed) if excess > 0 and allowed else None}
        out["text"] = outcome_text(out)
        res.outcomes.append(out)
    return res


def _figures(run: RunData, threshold_ns: int | None) -> dict[str, Any]:
    if run.row.status == "failed" and not run.has_raw:
        raise CheckDataError(f"run {run.label} failed ({run.row.message or 'no message'}): "
                             f"fix the measurement before gating on it")
    figs = figures(run, threshold_ns)
    if not figs.get("samples"):
        raise CheckDataError(f"run {run.label} has no samples ({run.row.status}): nothing to "
                             f"check; rerun it")
    return figs


def outcome_text(o: dict[str, Any]) -> str:
    """'PASS max 29 ns <= 30 us' or 'FAIL p99.9 3.4 ms > 20 us: over by 3.38 ms (+17k%)'."""
    unit, value, allowed = o["unit"], o["value"], o["allowed"]
    if o["passed"]:
        return (f"PASS {o['limit']} {_show(value, unit)} <= {_show(allowed, unit)} "
                f"(margin {_show(allowed - value, unit)})")
    pct = ""
    if o["excess_pct"] is not None:
        # Past +100 % a factor reads better than a percentage ("150x the limit").
        pct = (f" (+{o['excess_pct']:.3g}%)" if o["excess_pct"] < 100
               else f" ({value / allowed:.3g}x the limit)")
    return (f"FAIL {o['limit']} {_show(value, unit)} > {_show(allowed, unit)}: over by "
            f"{_show(o['excess'], unit)}{pct}")


def result_lines(res: CheckResult) -> list[str]:
    """Human lines: the verdict first, then every limit, then notes."""
    if res.error:
        return [f"ERROR run {res.run_id} {res.name}: {res.error}"]
    failed = sum(not o["passed"] for o in res.outcomes)
    head = (f"{'PASS' if res.passed else 'FAIL'} run {res.run_id} {res.name}: "
            f"{len(res.outcomes) - failed}/{len(res.outcomes)} limits met")
    return [head] + [f"  {o['text']}" for o in res.outcomes] + \
        [f"  ({n})" for n in res.notes]


def junit_xml(results: list[CheckResult], seconds: float = 0.0) -> bytes:
    """JUnit XML for CI systems; ElementTree escapes every run-supplied text."""
    root = ET.Element("testsuites", name="irqlab check")
    total = failures = errors = 0
    stamp = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    for res in results:
        suite = ET.SubElement(root, "testsuite", name=f"irqlab check run {res.run_id} "
                              f"{res.name}", timestamp=stamp, time=f"{seconds:.3f}")
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="run_id", value=str(res.run_id))
        ET.SubElement(props, "property", name="run_name", value=res.name)
        cls = f"irqlab.check.run{res.run_id}"
        s_fail = s_err = 0
        if res.error:
            case = ET.SubElement(suite, "testcase", classname=cls, name="run data", time="0")
            ET.SubElement(case, "error", message=res.error, type="DataError").text = res.error
            s_err = 1
        for o in res.outcomes:
            case = ET.SubElement(suite, "testcase", classname=cls,
                                 name=f"{o['limit']} <= {_show(o['allowed'], o['unit'])}",
                                 time="0")
            if not o["passed"]:
                ET.SubElement(case, "failure", message=o["text"],
                              type="LimitExceeded").text = o["text"]
                s_fail += 1
        n = len(res.outcomes) + (1 if res.error else 0)
        suite.set("tests", str(n))
        suite.set("failures", str(s_fail))
        suite.set("errors", str(s_err))
        suite.set("skipped", "0")
        ET.SubElement(suite, "system-out").text = "\n".join(result_lines(res))
        total, failures, errors = total + n, failures + s_fail, errors + s_err
    root.set("tests", str(total))
    root.set("failures", str(failures))
    root.set("errors", str(errors))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
