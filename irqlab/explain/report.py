"""Human output of ``irqlab explain``, in the shape of rtla's auto-analysis."""

from __future__ import annotations

import textwrap

from irqlab.explain.run import Explained, as_json


def _us(ns: int) -> str:
    return f"{ns / 1000:10.1f} us"


WORST_SHOWN = 10          # samples printed by default (--all: every one)
CULPRITS_SHOWN = 10
LOST_SHOWN = 3            # lost regions printed (--json lists every one)
# The widest line printed by default (as compare's tables, issue 32); --wide: no limit.
WIDTH = 120


def render_text(res: Explained, show_all: bool = False) -> str:
    return render_json(as_json(res), show_all)


def fit(lines: list[str], width: int | None) -> list[str]:
    """Lines wrapped at ``width`` columns (None: as they are), a wrapped line's rest
    indented under it."""
    if width is None:
        return lines
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")) + 4)
        out += textwrap.wrap(line, width, subsequent_indent=indent,
                             break_on_hyphens=False) or [line[:width]]
    return out


def render_json(js: dict, show_all: bool = False, width: int | None = WIDTH) -> str:
    """The human form of an explain object (every explainer's alike): the top culprits,
    where the time goes, then the WORST_SHOWN worst samples, traced ones first
    (``show_all``: every one); lines wrapped at ``width`` (None: not)."""
    c = js["clock"]
    events = {"xentrace": "xentrace records", "linux-guest": "guest and host events"}.get(
        js.get("source") or "", "host events")
    out = [f"run {js['run_id']}: {len(js['samples'])} samples ({js['selected_by']}), "
           f"{js['events']} {events}",
           f"clock: {c['method']}; offset {c['offset_tick']} ticks, error bound "
           f"±{c['error_bound_ns']} ns ({c['anchors']} anchors"
           + (f", {c['msr_anchors']} kvm_msr anchors" if c.get("msr_anchors") else "") + ")"]
    rejected = [x for x in c.get("candidates", []) if x["status"] in ("rejected", "unusable")
                and x["source"] != "tcg"]          # expected under TCG (formats.md §9)
    for x in rejected:
        out.append(f"clock candidate {x['source']} {x['status']}: {x['why']}")
    if c.get("causality", {}).get("violations"):
        out.append(f"causality: {c['causality']['violations']} samples have host events "
                   f"outside their mapped window (clock mapping error?)")
    if js["events_missing"]:
        out.append("events missing on this kernel: " + ", ".join(js["events_missing"]))
    if js["events_never_fired"]:
        out.append("events enabled but never fired: " + ", ".join(js["events_never_fired"]))
    lost = js["lost_regions"]
    for region in lost[:LOST_SHOWN]:
        out.append(f"LOST: {region['why']} ({region['from_ns'] / 1e6:.3f}-"
                   f"{region['to_ns'] / 1e6:.3f} ms)")
    if len(lost) > LOST_SHOWN:
        out.append(f"LOST: {len(lost) - LOST_SHOWN} more regions (--json lists them)")
    out.extend(_culprits(js))
    out.extend(_stages(js))
    # The worst samples the capture saw first: one outside it has nothing to explain.
    ranked = sorted(js["samples"], key=lambda s: (s["status"] == "not traced",
                                                  -s["latency_ns"]))
    shown = ranked if show_all else ranked[:WORST_SHOWN]
    if shown:
        out.append("")
        out.append("every sample, worst first:" if show_all else
                   f"the {len(shown)} worst samples (the worst in full, the others one "
                   f"line each: --all or --sample SEQ for theirs):")
    for k, s in enumerate(shown):
        out.extend(_sample(s) if show_all or k == 0 else [_sample_line(s)])
    if len(ranked) > len(shown):
        out.append(f"({len(ranked) - len(shown)} more samples: --all prints them, "
                   f"--json gives them all)")
    return "\n".join(fit(out, width))


def _culprits(js: dict) -> list[str]:
    out = ["", f"top culprits over {len(js['samples']) - js['incomplete'] - js['not_traced']} "
           f"explained samples ({js['incomplete']} incomplete, {js['not_traced']} not "
           f"traced):"]
    # A cause in no sample took no time: not a culprit.
    culprits = [cul for cul in js["culprits"] if cul["samples"]]
    for cul in culprits[:CULPRITS_SHOWN]:
        out.append(f"  {cul['cause']:<58} total {_us(cul['total_ns'])}  worst "
                   f"{_us(cul['worst_ns'])}  in {cul['samples']} samples")
    if len(culprits) > CULPRITS_SHOWN:
        out.append(f"  ({len(culprits) - CULPRITS_SHOWN} more causes: --json)")
    return out


def _stages(js: dict) -> list[str]:
    if not js.get("stage_summary"):
        return []
    out = ["", "where the time goes (between stages, over the explained samples):",
           f"  {'from -> to':<62} {'n':>6} {'p50':>12} {'p99':>12} {'max':>12}"]
    for st in js["stage_summary"]:
        out.append(f"  {st['from'] + ' -> ' + st['to']:<62} {st['samples']:>6} "
                   f"{_us(st['p50_ns'])} {_us(st['p99_ns'])} {_us(st['max_ns'])}")
    for stage, why in (js.get("stages_not_traced") or {}).items():
        out.append(f"  not traced: {stage}: {why}")
    return out


def _sample_line(s: dict) -> str:
    """One sample on one line: its two largest causes and the unexplained time."""
    head = f"sample {s['seq']}: latency {s['latency_ns'] / 1000:.1f} us"
    if s["status"] != "explained":
        return f"{head}  [{s['status'].upper()}: {s['reason']}]"
    top = [c for c in s["causes"] if c["ns"] and c["cause"] != "unexplained"][:2]
    rest = next((c["ns"] for c in s["causes"] if c["cause"] == "unexplained"), 0)
    return (f"{head}: " + "; ".join(f"{c['cause']} {c['pct']:.1f} %" for c in top)
            + f"; unexplained {rest / 1000:.1f} us")


def _sample(s: dict) -> list[str]:
    out = [f"sample {s['seq']}: latency {s['latency_ns'] / 1000:.1f} us"
           + ("" if s["status"] == "explained" else f"  [{s['status'].upper()}: "
              f"{s['reason']}]")]
    if s["status"] != "explained":
        return out
    for cause in s["causes"]:
        if cause["ns"] or cause["cause"] == "unexplained":
            out.append(f"  {cause['cause']:<58} {_us(cause['ns'])} {cause['pct']:6.1f} %")
            extra = s["irq_during_ns"].get(cause["cause"])
            if extra:
                out.append(f"    (+{extra / 1000:.1f} us of IRQs while it held the CPU)")
    if s["stages"]:
        out.append("  stages: " + " -> ".join(f"{st['stage']} +{st['at_ns'] / 1000:.1f}us"
                                            for st in s["stages"]))
    for m in s["stages_missing"]:
        out.append(f"  stage not seen: {m}")
    for n in s["notes"]:
        out.append(f"  note: {n}")
    return out
