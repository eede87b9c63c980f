"""Text formatters of the tools beside the runs: `model rtds`, `xentrace FILE`, `doctor`.
Each takes its model and the View and returns lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from irqlab.cli.output.seam import OUTPUT_WIDTH
from irqlab.durations import format_ns

if TYPE_CHECKING:
    from irqlab.cli.output.screen import Block
    from irqlab.cli.output.seam import View


def rtds_text(m: dict[str, Any], view: View) -> list[Block]:
    """`irqlab model rtds` (model: its `model` line, irqlab.models.rtds)."""
    out = [f"RTDS periodic server: period {format_ns(m['period_ns'])}, budget "
           f"{format_ns(m['budget_ns'])}, bandwidth {m['bandwidth']:.1%} of one pCPU",
           f"worst-case wait before the vCPU runs: 2(P-B) = {format_ns(m['bound_ns'])}"]
    if m["handler_ns"] is not None:
        out.append(f"handler of {format_ns(m['handler_ns'])} done within "
                   f"{format_ns(m['response_bound_ns'])} ({m['periods_for_handler']} "
                   f"budget(s))")
    return out + [f"source: {m['source']}"]


def xentrace_text(m: dict[str, Any], view: View) -> list[Block]:
    """`irqlab xentrace FILE` (model: {"type": "xentrace_summary", "lines": its JSON
    lines, "head": the file's facts})."""
    h, lines = m["head"], m["lines"]
    out = [f"{h['path']}: {h['records']:,} records, {h['span_s']:.3f} s at "
           f"{h['hz'] / 1e6:.3f} MHz, pCPUs {','.join(map(str, h['cpus']))}, "
           f"{h['lost_records']} lost records", "",
           f"{'vCPU':<10} {'state':<9} {'count':>8} {'total':>12} {'mean':>12}"]
    for ln in (x for x in lines if x["type"] == "runstate" and x["count"]):
        mean = ln["total_ns"] / ln["count"] / 1e3
        out.append(f"{_vcpu(ln):<10} {ln['state']:<9} {ln['count']:>8} "
                   f"{ln['total_ns'] / 1e6:>9.3f} ms {mean:>9.1f} us")
    calls = [x for x in lines if x["type"] == "hypercall"]
    if calls:
        out += ["", f"{'vCPU':<10} {'hypercall':<30} {'count':>8}"]
        out += [f"{_vcpu(ln):<10} {ln['name']:<30} {ln['count']:>8}" for ln in calls]
    return out


def _vcpu(line: dict[str, Any]) -> str:
    dom = "idle" if line["domain"] == 32767 else f"d{line['domain']}"
    return f"{dom}v{line['vcpu']}"


def doctor_text(m: dict[str, Any], view: View) -> list[Block]:
    """`irqlab doctor` (model: {"type": "doctor_checks", "groups": [(heading, checks)]},
    checks as irqlab.doctor.Check): each group under its heading."""
    out: list[Block] = []
    for heading, checks in m["groups"]:
        if checks:
            out.append(f"{heading}:")
        out += ["\n".join(c.lines(OUTPUT_WIDTH)) for c in checks]
    return out
