"""A run's provenance record (irqlab.store.provenance) as lines people read: the
"configuration" and "host" blocks of `irqlab show` and of the HTML report."""

from __future__ import annotations

from typing import Any

from irqlab.durations import format_ns


def _value(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_value(x)}" for k, x in v.items()) or "—"
    if isinstance(v, (list, tuple)):
        return ",".join(_value(x) for x in v) or "—"
    if isinstance(v, bool):
        return "yes" if v else "no"     # not Python's True/False
    return str(v)


def _timing(t: dict[str, Any]) -> str:
    parts = [f"{k.removesuffix('_ns')} {format_ns(v, 'exact')}" if k.endswith("_ns")
             else f"{k} {v}" for k, v in t.items() if v is not None]
    return ", ".join(parts) or "—"


def _knob(k: dict[str, Any]) -> str:
    text = f"{k['requested']}: {k['status']}"
    for key in ("read_back", "original", "restored", "note"):
        if k.get(key) is not None:
            text += f"; {key.replace('_', ' ')} {_value(k[key])}"
    return text


def _load(load: dict[str, Any]) -> str:
    proof = load["proof"]
    shown = {k: proof[k] for k in ("argv", "cpu_s", "wall_s", "cpu_util", "exit_code",
                                   "error") if k in proof}
    if "argv" in shown:
        shown["argv"] = " ".join(map(str, shown["argv"]))
    rest = {k: v for k, v in proof.items() if k not in shown and k != "cpus"}
    return (f"{_value(load['params']) if load['params'] else 'defaults'}: {load['status']}"
            f" ({_value({**shown, **rest})})")


def configuration_lines(record: dict[str, Any]) -> list[str]:
    """The "configuration" block: target, timing, options, loads, knobs, scheduling,
    identities and tags, one line each (a load or knob per line)."""
    c = record["configuration"]
    s = c["scheduling"]
    lines = [f"target: {c['target']} {c['arch'] or ''} accel {c['accel'] or '—'} "
             f"({c['kind']}, from {c['source']})",
             f"timing: {_timing(c['timing'])}",
             f"options: {_value(c['options'])}"]
    lines += [f"load {x['kind']}: {_load(x)}" for x in c["loads"]] or ["loads: none"]
    lines += [f"knob {k['key']}: {_knob(k)}" for k in c["knobs"]] or ["knobs: none"]
    if any(s[k] is not None for k in ("probe_policy", "probe_priority", "probe_cpus")):
        lines.append(f"probe scheduling (read back): {s['probe_policy'] or '—'} priority "
                     f"{_value(s['probe_priority'])} on CPUs {_value(s['probe_cpus'])}"
                     f" (mlocked {_value(s['probe_mlocked'])})")
    lines.append(f"identities: {_value({k: v for k, v in c['identities'].items() if v is not None})}")
    lines.append(f"tags: {_value(c['tags'])}")
    return lines


def host_lines(record: dict[str, Any]) -> list[str]:
    """The "host" block: one fact per line, "unknown" where the run did not record it."""
    return [f"{k}: {_value(v)}" for k, v in record["host"].items()]
