"""Pass/fail limits for CI: evaluate a run against them, explain, and write JUnit XML.

A check has two parts:

* **gates** — whether the run may be judged at all: it ended ``ok`` (or
  ``--allow-interrupted``), it lost no more samples than ``--max-lost``, it ran on
  hardware (only with ``--require-hardware``), and it has enough samples for every
  percentile limit (see ``samples_needed``);
* **limits** — maxima on its figures (``--max 30us``, ``--p99.9 20us`` ...).

A run passes when every gate and every limit passes. Values are printed with the one
formatter of latency figures the run summary and ``irqlab show`` use
(``irqlab.durations.format_latency``), so ``check`` shows the same number as they do.

JUnit XML follows the de-facto schema CI systems read (Jenkins, GitLab, GitHub actions
reporters): <testsuites> holding one <testsuite> per run and one <testcase> per gate and
per limit, with <failure> for one not met, <skipped> for a gate that cannot be applied
(lost samples unknown) and <error> when the run cannot be judged. CI systems track tests
by (suite, classname, name) across builds, so none of them holds a run id, a limit's value
or a time: the suite is the run's name (its configuration when the name is irqlab's
time-stamped default), the classname ``irqlab.check.<suite>``, the name the gate or the
limit (``status``, ``lost``, ``hardware``, ``samples``, ``p99.9``, ``max`` ...).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from irqlab.durations import format_latency, format_ns
from irqlab.reports.comparability import MIN_TAIL_SAMPLES
from irqlab.reports.data import FROM_TEXT, RunData, figures
from irqlab.reports.percpu import NO_PER_CPU, cpu_runs
from irqlab.reports.select import SERIES_TAG
from irqlab.stats.fields import CHECK_LIMITS
from irqlab.store.db import RunRow

# v2 (2026-11-26): gates (status, lost, hardware, samples) and the run's identity keys.
CHECK_VERSION = 2

# (option / limit name, figures key, unit) in the order limits are reported.
LIMITS: list[tuple[str, str, str]] = [(c.heading, c.key, c.field.unit)
                                      for c in CHECK_LIMITS]
_UNIT = {name: unit for name, _, unit in LIMITS}
_KEY = {name: key for name, key, _ in LIMITS}
# The nearest-rank quantile of each percentile limit (None: not a percentile).
_QUANTILE = {c.heading: c.field.quantile for c in CHECK_LIMITS}

# Statuses of a run that did not end normally (irqlab/store/db.py RUN_STATUSES): stopped
# by the user, its process died (store/recover.py), a measurement error, or still open.
NOT_OK_STATUSES = ("interrupted", "died", "failed", "running")
# `irqlab run --break-at`'s status: a result, which the status gate passes (_status_gate).
BREAK_STATUS = "stopped-at-break"
_WHY_NOT_OK = {"interrupted": "was stopped before its end",
               "died": "lost its irqlab process before its end",
               "failed": "failed",
               "running": "has not ended (still measuring, or its process died and no "
                          "writable open has closed it yet)"}

# irqlab run's default names: "<target>-YYYYmmdd-HHMMSS" (measure/run.py), and a suite's
# "suite-YYYYmmdd-HHMMSS-<target>" (cli/cmd_run.py). They change with every run.
_STAMP = r"\d{8}-\d{6}"


class CheckDataError(Exception):
    """The run cannot be judged (no samples, failed, figure missing): exit 2."""


@dataclass
class Gates:
    """What a run must be, besides its limits (the command's options)."""

    allow_interrupted: bool = False   # judge a run that did not end ok on what it has
    max_lost: int = 0                 # most lost samples allowed
    require_hardware: bool = False    # fail emulated runs (and runs not known to be real)


@dataclass
class CheckResult:
    """Every gate's and limit's outcome for one run (``error``: it cannot be judged)."""

    run_id: int
    name: str
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)
    suite_name: str = ""              # the JUnit testsuite (stable across runs)
    target: str | None = None
    status: str | None = None
    emulated: bool | None = None
    accel: str | None = None
    samples: int | None = None
    lost: int | None = None
    # check --per-cpu: {"0": {"cpu", "samples", "passed", "limits", "gates"}, ...}
    # (None: not asked; {} asked, but the run has no per-CPU samples).
    per_cpu: dict[str, dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        self.suite_name = self.suite_name or self.name

    @property
    def passed(self) -> bool:
        return (self.error is None and all(g["passed"] for g in self.gates)
                and all(o["passed"] for o in self.outcomes)
                and all(c["passed"] for c in (self.per_cpu or {}).values()))

    @property
    def failed_cpus(self) -> list[int]:
        return [c["cpu"] for c in (self.per_cpu or {}).values() if not c["passed"]]

    @property
    def gate_failed(self) -> bool:
        """A gate failed: the run is judged failed (exit 1) even when it cannot be
        checked against its limits."""
        return not all(g["passed"] for g in self.gates)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "check", "version": CHECK_VERSION, "run_id": self.run_id,
                "name": self.name, "passed": self.passed, "error": self.error,
                "limits": self.outcomes, "notes": self.notes, "gates": self.gates,
                "suite_name": self.suite_name, "target": self.target,
                "status": self.status, "emulated": self.emulated, "accel": self.accel,
                "samples": self.samples, "lost": self.lost,
                **({} if self.per_cpu is None else {"per_cpu": self.per_cpu})}


def show_value(value: int | float, unit: str) -> str:
    """A limit's value as the run summary and `irqlab show` print it (format_latency)."""
    return format_latency(value) if unit == "ns" else str(value)


def samples_needed(quantile: float) -> int:
    """Fewest samples for which the nearest-rank ``quantile`` is not simply the maximum.

    Nearest rank (Hyndman & Fan 1996, definition 1; ``irqlab.stats.quantile_rank``) takes
    sample ceil(q*n) of the n sorted ones. That is below the largest, sample n, only
    when ceil(q*n) <= n - 1, i.e. q*n <= n - 1, i.e. n*(1 - q) >= 1: n >= 1/(1 - q).
    With fewer samples the "p99.9" is the run's max and says nothing about a 1-in-1000
    tail. p50: 2, p99: 100, p99.9: 1000, p99.99: 10000. q is taken at its decimal repr
    (0.999 is 999/1000): in binary 1/(1 - 0.999) is 1000.0000000000009, whose ceil is
    1001.
    """
    frac = Fraction(repr(float(quantile)))
    if not 0 <= frac < 1:
        raise ValueError(f"quantile must be in [0, 1), got {quantile}")
    return math.ceil(1 / (1 - frac))


def suite_name(row: RunRow) -> str:
    """The run's JUnit testsuite name: its name, or, when the name is irqlab's
    time-stamped default, its configuration, so two runs of one configuration share it:
    the target, its period, every parameter that differs from irqlab run's default, and
    its tags: 'guest (period=1ms, idle=poll, cfg=a)'."""
    target = re.escape(row.target or "")
    if not (re.fullmatch(rf"{target}-{_STAMP}", row.name)
            or re.fullmatch(rf"suite-{_STAMP}-{target}", row.name)):
        return row.name
    params = dict(row.params or {})
    period = row.period_ns or params.get("period_ns")
    defaults = _default_params(row.target, int(period)) if period else None
    shown = [] if not period else [_param("period_ns", period)]
    for key in sorted(set(params) - _NOT_CONFIG - {"period_ns"}):
        val = params[key]
        # Without known defaults every parameter that is set belongs to the name.
        off_default = val is not None if defaults is None else val != defaults.get(key)
        if off_default:
            shown.append(_param(key, val))
    # A series' tag names one series (a random id): runs of a configuration share the rest.
    shown += [f"{k}={v}" for k, v in sorted((row.tags or {}).items()) if k != SERIES_TAG]
    return f"{row.target} ({', '.join(shown)})" if shown else str(row.target)


def series_suite_name(row: RunRow) -> str:
    """suite_name, and a run of a --repeat series its place in it ('idle #2'): the runs
    of one series are distinct test suites, and the second run of any series of one
    configuration has the same name in every build (issue 46)."""
    name = suite_name(row)
    series = (row.metadata or {}).get(SERIES_TAG)
    if isinstance(series, dict) and series.get("index") is not None \
            and (series.get("count") or 0) > 1:
        name += f" #{series['index']}"
    return name


# Parameters that are not a run's configuration: who it is, and its watchdogs.
_NOT_CONFIG = {"target", "name", "suite", "cell", "tags", "boot_timeout_s",
               "stall_timeout_s"}


def _default_params(target: str, period_ns: int) -> dict[str, Any] | None:
    """The params `irqlab run --target TARGET --period P` stores when given nothing else
    (None when the target needs options, e.g. serial's port, or is unknown)."""
    try:
        # Imported here: only default-named runs need the targets' definitions.
        from irqlab.measure.config import config_for_target
        return config_for_target(target, period_ns=period_ns).params()
    except Exception:       # any target error: then every set parameter is shown
        return None


def _param(key: str, val: Any) -> str:
    """'period=1ms', 'idle=poll', 'xen_opts={"a": 1}' (a duration as its argument)."""
    if key.endswith("_ns") and isinstance(val, int):
        return f"{key[:-3]}={format_ns(val, 'exact').replace(' ', '')}"
    if isinstance(val, (dict, list)):
        return f"{key}={json.dumps(val, sort_keys=True)}"
    return f"{key}={val}"


def evaluate(run: RunData, limits: list[tuple[str, int]],
             threshold_ns: int | None = None, gates: Gates | None = None,
             per_cpu: bool = False) -> CheckResult:
    """Judge ``run`` against ``(limit name, maximum allowed)`` pairs (ns or a count) and
    the ``gates`` (default: strict: ended ok, no lost sample). With ``per_cpu`` every
    limit must also hold on each CPU's samples (evaluate_cpus)."""
    gates = gates or Gates()
    row = run.row
    res = CheckResult(run.run_id, row.name, suite_name=series_suite_name(row), target=row.target,
                      status=row.status, emulated=row.emulated, accel=row.accel)
    res.gates.append(_status_gate(row, gates))
    if gates.require_hardware:
        res.gates.append(_hardware_gate(row))
    try:
        figs = _figures(run, threshold_ns)
    except CheckDataError as exc:
        res.error = str(exc)
        return res
    res.samples, res.lost = int(figs["samples"]), figs.get("lost")
    res.gates.append(_lost_gate(res.lost, gates.max_lost))
    needed = _needed(limits)
    if needed:
        res.gates.append(_samples_gate(res.samples, needed))
    res.notes.append("percentiles " + FROM_TEXT[figs["percentiles_from"]])
    if row.status not in ("ok", BREAK_STATUS) and gates.allow_interrupted:
        res.notes.append(f"run {row.status}: judged on the samples it has "
                         f"(--allow-interrupted)")
    if figs.get("threshold_ns") is not None:
        res.notes.append(f"threshold {show_value(figs['threshold_ns'], 'ns')}")
    for name, allowed in limits:
        value = figs.get(_KEY[name])
        if value is None:
            res.error = (f"run {run.label} has no {name} figure (its summary lacks it and "
                         f"no raw samples are stored): it cannot be checked against --{name}")
            return res
        res.outcomes.append(_outcome(name, value, allowed, needed.get(name)))
    res.notes += _thin_tail_notes(res.samples, [n for n, _ in limits])
    if per_cpu:
        res.per_cpu = evaluate_cpus(run, limits, threshold_ns)
        if not res.per_cpu:
            res.notes.append(f"--per-cpu: {NO_PER_CPU}")
    return res


def evaluate_cpus(run: RunData, limits: list[tuple[str, int]],
                  threshold_ns: int | None = None) -> dict[str, dict[str, Any]]:
    """Each CPU's samples against the limits (a limit holds on every CPU, as
    cyclictest's per-thread max): its figures are the whole run's computation over that
    CPU's samples (irqlab.reports.percpu); a percentile limit needs as many samples on
    the CPU as on a run (samples gate)."""
    needed = _needed(limits)
    out: dict[str, dict[str, Any]] = {}
    for cpu, sub in cpu_runs(run):
        figs = figures(sub, threshold_ns)
        samples = int(figs.get("samples") or 0)
        cpu_gates = [_samples_gate(samples, needed)] if needed else []
        outcomes = [_outcome(name, figs[_KEY[name]], allowed, needed.get(name))
                    for name, allowed in limits if figs.get(_KEY[name]) is not None]
        missing = [name for name, _ in limits if figs.get(_KEY[name]) is None]
        passed = (bool(samples) and not missing and all(g["passed"] for g in cpu_gates)
                  and all(o["passed"] for o in outcomes))
        out[str(cpu)] = {"cpu": cpu, "samples": samples, "passed": passed,
                         "limits": outcomes, "gates": cpu_gates,
                         "missing": missing}
    return out


def _figures(run: RunData, threshold_ns: int | None) -> dict[str, Any]:
    if run.row.status == "failed" and not run.has_raw:
        raise CheckDataError(f"run {run.label} failed ({run.row.message or 'no message'}): "
                             f"fix the measurement before gating on it")
    figs = figures(run, threshold_ns)
    if not figs.get("samples"):
        raise CheckDataError(f"run {run.label} has no samples ({run.row.status}): nothing to "
                             f"check; rerun it")
    return figs


def _outcome(name: str, value: int, allowed: int, needed: int | None) -> dict[str, Any]:
    excess = value - allowed
    out: dict[str, Any] = {
        "limit": name, "value": value, "allowed": allowed, "unit": _UNIT[name],
        "passed": excess <= 0, "excess": max(0, excess),
        "excess_pct": (100.0 * excess / allowed) if excess > 0 and allowed else None,
        "samples_needed": needed}
    out["text"] = outcome_text(out)
    return out


def _gate(name: str, passed: bool, value: Any, allowed: Any, text: str,
          skipped: bool = False) -> dict[str, Any]:
    return {"gate": name, "passed": passed, "skipped": skipped, "value": value,
            "allowed": allowed, "text": text}


def tail_gates(run: RunData, max_exceed: list[tuple[int, float]]) -> list[dict[str, Any]]:
    """`check --max-exceed LAT:PROB`: one gate each, passed when the 95 % upper bound of
    the per-sample probability of a latency above LAT is at most PROB (the tail fit of
    irqlab tail); a refused fit fails it (nothing defensible was shown)."""
    if not max_exceed:
        return []
    from irqlab.reports.tail import build_tail
    model = build_tail([run], [lat for lat, _p in max_exceed])
    out = []
    for lat, prob in max_exceed:
        name = f"max-exceed {show_value(lat, 'ns')}"
        if model["refused"]:
            out.append(_gate(name, False, None, prob,
                             f"tail fit refused ({model['refused']}): P(latency > "
                             f"{show_value(lat, 'ns')}) cannot be bounded"))
            continue
        row = next(e for e in model["exceedance"] if e["latency_ns"] == lat)
        ok = row["p_high"] <= prob
        out.append(_gate(name, ok, row["p_high"], prob,
                         f"P(latency > {show_value(lat, 'ns')}) per sample <= "
                         f"{row['p_high']:.3g} (95% upper bound; estimate {row['p']:.3g}) "
                         f"{'<=' if ok else '>'} {prob:g}"))
    return out


def _status_gate(row: RunRow, gates: Gates) -> dict[str, Any]:
    status = row.status
    if status == "ok":
        return _gate("status", True, status, "ok", "PASS status ok")
    if status == BREAK_STATUS:
        # A break is a result, not an interruption: the run ended where it was asked to,
        # at its first sample above --break-at, and that sample is among its figures, so
        # a max (or high percentile) limit below it fails on the figures themselves.
        return _gate("status", True, status, "ok or stopped-at-break",
                     f"PASS status {status}: the run ended as asked, at its first sample "
                     f"above --break-at (judged on its samples up to it)")
    why = _WHY_NOT_OK.get(status, f"ended {status}")
    if gates.allow_interrupted:
        return _gate("status", True, status, "any (--allow-interrupted)",
                     f"PASS status {status}: allowed by --allow-interrupted (the run {why})")
    msg = f" ({row.message})" if row.message else ""
    return _gate("status", False, status, "ok",
                 f"FAIL status {status}: the run {why}{msg}; rerun it to completion, or "
                 f"pass --allow-interrupted to judge it on the samples it has")


def _lost_gate(lost: int | None, max_lost: int) -> dict[str, Any]:
    if lost is None:
        # Imported runs (their source does not count them) and runs whose process died
        # have no lost count: failing them would make --max-lost refuse every import, and
        # passing silently would claim what nobody counted. So the gate is skipped, said.
        return _gate("lost", True, None, max_lost,
                     "SKIP lost unknown (the run's source did not count lost samples, or "
                     "its process died): --max-lost not applied", skipped=True)
    lost = int(lost)
    if lost <= max_lost:
        return _gate("lost", True, lost, max_lost, f"PASS lost {lost} <= {max_lost}")
    return _gate("lost", False, lost, max_lost,
                 f"FAIL lost {lost} > {max_lost}: samples went missing (ring overruns or "
                 f"sequence gaps), perhaps the slow ones; rerun with a longer --period or "
                 f"on a quieter host, or allow them with --max-lost {lost}")


def _hardware_gate(row: RunRow) -> dict[str, Any]:
    accel = row.accel or "unknown accel"
    if row.emulated is False:
        return _gate("hardware", True, accel, "hardware",
                     f"PASS hardware: not emulated ({accel})")
    if row.emulated:
        return _gate("hardware", False, accel, "hardware",
                     f"FAIL hardware: the run was emulated ({accel}), its latencies are "
                     f"the emulator's; run on hardware (KVM or native), or drop "
                     f"--require-hardware")
    # Imported runs do not say: a gate that asks for hardware cannot take it on trust.
    return _gate("hardware", False, None, "hardware",
                 "FAIL hardware: not known whether the run was emulated (its source does "
                 "not say); gate it without --require-hardware")


def _needed(limits: list[tuple[str, int]]) -> dict[str, int]:
    """Samples each percentile limit needs (samples_needed)."""
    return {name: samples_needed(q) for name, _ in limits
            if (q := _QUANTILE.get(name)) is not None}


def _samples_gate(samples: int, needed: dict[str, int]) -> dict[str, Any]:
    most = max(needed.values())
    short = [f"{name} needs at least {n}" for name, n in needed.items() if samples < n]
    if not short:
        return _gate("samples", True, samples, most, f"PASS samples {samples} >= {most}")
    return _gate("samples", False, samples, most,
                 f"FAIL samples {samples} < {most}: {', '.join(short)} (with fewer, its "
                 f"nearest-rank value is the run's max); measure at least {most} samples "
                 f"(--samples or a longer --duration)")


def _thin_tail_notes(samples: int, names: list[str]) -> list[str]:
    """Enough samples to pass, but few beyond the percentile (compare warns the same)."""
    out = []
    for name in names:
        q = _QUANTILE.get(name)
        if q is None:
            continue
        beyond = samples * float(1 - Fraction(repr(float(q))))
        steady = MIN_TAIL_SAMPLES * samples_needed(q)
        if samples_needed(q) <= samples and beyond < MIN_TAIL_SAMPLES:
            out.append(f"{name} rests on {beyond:.2g} samples beyond it (fewer than "
                       f"{MIN_TAIL_SAMPLES}): {steady} samples would make it steadier")
    return out


def outcome_text(o: dict[str, Any]) -> str:
    """'PASS max 29 ns <= 30.0 us' or 'FAIL p99.9 3.40 ms > 20.0 us: over by 3.38 ms
    (170x the limit)'."""
    unit, value, allowed = o["unit"], o["value"], o["allowed"]
    if o["passed"]:
        return (f"PASS {o['limit']} {show_value(value, unit)} <= "
                f"{show_value(allowed, unit)} (margin {show_value(allowed - value, unit)})")
    pct = ""
    if o["excess_pct"] is not None:
        # Past +100 % a factor reads better than a percentage ("150x the limit").
        pct = (f" (+{o['excess_pct']:.3g}%)" if o["excess_pct"] < 100
               else f" ({value / allowed:.3g}x the limit)")
    return (f"FAIL {o['limit']} {show_value(value, unit)} > {show_value(allowed, unit)}: "
            f"over by {show_value(o['excess'], unit)}{pct}")


def _mark(res: CheckResult) -> str:
    """' [emulated: tcg]' for an emulated run, else ''."""
    return f" [emulated: {res.accel or 'unknown accel'}]" if res.emulated else ""


def result_lines(res: CheckResult) -> list[str]:
    """Human lines: the verdict first, then every gate and limit, then notes."""
    gate_lines = [f"  {g['text']}" for g in res.gates]
    if res.error:
        return [f"ERROR run {res.run_id} {res.name}{_mark(res)}: {res.error}"] + gate_lines
    failed = sum(not o["passed"] for o in res.outcomes)
    head = (f"{'PASS' if res.passed else 'FAIL'} run {res.run_id} {res.name}{_mark(res)}: "
            f"{len(res.outcomes) - failed}/{len(res.outcomes)} limits met")
    bad = [g["gate"] for g in res.gates if not g["passed"]]
    if bad:
        head += f"; failed: {', '.join(bad)}"
    if res.failed_cpus:
        # The count above is of the whole run's limits; say so, and which CPUs fail
        # theirs ("1/1 limits met; failed on cpu 1" read as a contradiction).
        head += (f" over all CPUs; not met on cpu "
                 f"{', '.join(map(str, res.failed_cpus))}")
    return [head] + gate_lines + [f"  {o['text']}" for o in res.outcomes] + \
        cpu_lines(res) + [f"  ({n})" for n in res.notes]


def cpu_lines(res: CheckResult) -> list[str]:
    """check --per-cpu: 'cpu 1: FAIL 0/1 limits met (4000 samples)', then its gates and
    limits, indented under it."""
    out = []
    for c in (res.per_cpu or {}).values():
        met = sum(o["passed"] for o in c["limits"])
        out.append(f"  cpu {c['cpu']}: {'PASS' if c['passed'] else 'FAIL'} "
                   f"{met}/{len(c['limits'])} limits met ({c['samples']} samples)")
        out += [f"    {g['text']}" for g in c["gates"]]
        out += [f"    {o['text']}" for o in c["limits"]]
        out += [f"    FAIL {name}: no figure for this CPU" for name in c["missing"]]
    return out


def _properties(suite: ET.Element, res: CheckResult) -> None:
    """Run identity as properties: the id changes every run, so it lives only here."""
    props = ET.SubElement(suite, "properties")
    emulated = "unknown" if res.emulated is None else str(res.emulated).lower()
    # emulated and accel are always there (CI filters on them); the others when known.
    for name, value in (("run_id", res.run_id), ("run_name", res.name),
                        ("target", res.target), ("status", res.status),
                        ("emulated", emulated), ("accel", res.accel or "")):
        if value is not None:
            ET.SubElement(props, "property", name=name, value=str(value))


def _case(suite: ET.Element, cls: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=cls, name=name, time="0")


def _suite(root: ET.Element, res: CheckResult, stamp: str, seconds: float
           ) -> tuple[int, int, int, int]:
    """One run's <testsuite>; returns (tests, failures, errors, skipped)."""
    suite = ET.SubElement(root, "testsuite", name=res.suite_name, timestamp=stamp,
                          time=f"{seconds:.3f}")
    _properties(suite, res)
    cls = f"irqlab.check.{res.suite_name}"
    n = fails = errors = skipped = 0
    for g in res.gates:
        case = _case(suite, cls, g["gate"])
        if g["skipped"]:
            ET.SubElement(case, "skipped", message=g["text"])
            skipped += 1
        elif not g["passed"]:
            ET.SubElement(case, "failure", message=g["text"],
                          type="GateFailed").text = g["text"]
            fails += 1
        n += 1
    if res.error:
        case = _case(suite, cls, "run data")
        ET.SubElement(case, "error", message=res.error, type="DataError").text = res.error
        n, errors = n + 1, errors + 1
    for o in res.outcomes:
        case = _case(suite, cls, o["limit"])
        if not o["passed"]:
            ET.SubElement(case, "failure", message=o["text"],
                          type="LimitExceeded").text = o["text"]
            fails += 1
        else:
            # The limit and the value are in the message, never in the test's id.
            ET.SubElement(case, "system-out").text = o["text"]
        n += 1
    # check --per-cpu: a case per CPU and limit, named "cpu1 max" (stable across runs).
    for c in (res.per_cpu or {}).values():
        for o in c["gates"] + c["limits"]:
            name = o.get("limit") or o["gate"]
            case = _case(suite, cls, f"cpu{c['cpu']} {name}")
            if not o["passed"]:
                ET.SubElement(case, "failure", message=o["text"],
                              type="LimitExceeded" if "limit" in o else "GateFailed"
                              ).text = o["text"]
                fails += 1
            else:
                ET.SubElement(case, "system-out").text = o["text"]
            n += 1
    for key, val in (("tests", n), ("failures", fails), ("errors", errors),
                     ("skipped", skipped)):
        suite.set(key, str(val))
    ET.SubElement(suite, "system-out").text = "\n".join(result_lines(res))
    return n, fails, errors, skipped


def junit_xml(results: list[CheckResult], seconds: float = 0.0) -> bytes:
    """JUnit XML for CI systems; ElementTree escapes every run-supplied text."""
    root = ET.Element("testsuites", name="irqlab check")
    totals = [0, 0, 0, 0]
    stamp = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    # Suites named alike (one run checked twice, runs of one name outside a series)
    # are told apart by their order: a duplicate id is merged or overwritten by CI.
    seen: dict[str, int] = {}
    for res in results:
        seen[res.suite_name] = seen.get(res.suite_name, 0) + 1
        if seen[res.suite_name] > 1:
            res = dataclasses.replace(res, suite_name=f"{res.suite_name} "
                                                      f"({seen[res.suite_name]})")
        totals = [a + b for a, b in zip(totals, _suite(root, res, stamp, seconds))]
    for key, val in zip(("tests", "failures", "errors", "skipped"), totals):
        root.set(key, str(val))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
