"""How a run was made: one provenance record per run (docs/formats.md, "Provenance").

The record is a view over what a run already stores (its row, ``params``,
``metadata.host``, ``metadata.hooks``, ``metadata.probe`` ...): nothing is stored twice,
and a run stored before a fact was recorded shows that fact as "unknown", never a guess.
`show`, `compare` ("what differs"), the HTML report and the Python API all read it here.
"""

from __future__ import annotations

from typing import Any

PROVENANCE_VERSION = 1
UNKNOWN = "unknown"

# Host facts in the order `show` lists them (irqlab.runner.hostinfo.host_info writes them).
HOST_FACTS: tuple[str, ...] = (
    "hostname", "kernel", "kernel_version", "kernel_cmdline", "preempt_model", "machine",
    "cpu_model", "cpus_online", "microcode", "smt", "numa_nodes", "memory_kib",
    "clocksource", "cpufreq_governor", "cpuidle_driver", "cpuidle_governor", "cstates",
    "isolcpus", "nohz_full", "thp", "irqbalance", "host_is_virtual", "hw_virt",
    "kvm_modules", "kvm_halt_poll_ns")

# params keys that say what the run was asked to measure (the rest are target options);
# name/suite/cell/tags label a run and are not conditions of the measurement.
TIMING_KEYS = ("period_ns", "duration_ns", "samples", "window_ns", "threshold_ns",
               "warmup", "boot_timeout_s", "stall_timeout_s")
_LABEL_KEYS = frozenset({"name", "suite", "cell", "tags", "target"})
# What a knob's details read back from the host or the VMM (irqlab.knobs): the threads
# a vCPU knob changed, what xl reported in dom0.
_READ_BACK_KEYS = ("threads", "xl_reports")
_KNOB_KEYS = frozenset({"requested", "status", "original", "restored", "note",
                        *_READ_BACK_KEYS})


def _knob(key: str, meta: dict[str, Any]) -> dict[str, Any]:
    status = meta.get("status", UNKNOWN)
    read_back = {k: meta[k] for k in _READ_BACK_KEYS if k in meta}
    return {"key": key, "requested": meta.get("requested"), "status": status,
            "applied": status == "applied",
            "read_back": read_back or None,
            # The host's value before the run (read before writing), and whether it was
            # put back afterwards; None where the knob changed nothing to restore.
            "original": meta.get("original"), "restored": meta.get("restored"),
            "note": meta.get("note"),
            "details": {k: v for k, v in meta.items() if k not in _KNOB_KEYS}}


def _load(name: str, meta: dict[str, Any]) -> dict[str, Any]:
    # Proof that the load ran: its command, CPU time, exit code... whatever it recorded.
    return {"kind": meta.get("kind", name), "params": meta.get("params") or {},
            # Dom0 loads record no status, only an error when dom0 never ran them.
            "status": meta.get("status", "error" if meta.get("error") else "ok"),
            "proof": {k: v for k, v in meta.items() if k not in ("kind", "params", "status")}}


def _scheduling(params: dict[str, Any], meta: dict[str, Any],
                knobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Pinning and priority: what was asked (--pin/--prio, --cpus/--priority) and what
    the probe reports it got (the native probe reads its policy back after setting it)."""
    by_key = {k["key"]: k for k in knobs}
    native = meta.get("native") or {}
    return {"pin_requested": by_key.get("pin", {}).get("requested"),
            "pin_status": by_key.get("pin", {}).get("status"),
            "prio_requested": by_key.get("prio", {}).get("requested"),
            "prio_status": by_key.get("prio", {}).get("status"),
            "cpus_requested": params.get("cpus"),
            "priority_requested": params.get("priority"),
            "probe_cpus": native.get("cpus"), "probe_policy": native.get("policy"),
            "probe_priority": native.get("priority"),
            "probe_mlocked": native.get("mlocked"),
            "probe_rt_fallback": native.get("rt_fallback")}


def _identities(row: Any, meta: dict[str, Any]) -> dict[str, Any]:
    probe = meta.get("probe") or {}
    xen = meta.get("xen") or {}
    binary = xen.get("binary") or {}
    dom0 = xen.get("dom0") or {}
    return {"irqlab": meta.get("irqlab_version"), "probe_build": probe.get("build_id"),
            "probe_timer": probe.get("timer_mode"), "probe_ticks": probe.get("tick_method"),
            "qemu": meta.get("qemu_version"),
            "xen": xen.get("version_line") or xen.get("version"),
            "xen_binary_sha256": binary.get("sha256"),
            "xen_sched": xen.get("sched_in_use") or row.params.get("xen_sched"),
            "dom0_kernel": dom0.get("kernel") if isinstance(dom0, dict) else None,
            "import_source": (meta.get("import") or {}).get("file"),
            # The labgrid place (--lg-place, or the one a matrix pool gave the cell):
            # cells of one configuration on different boards are different runs.
            "board": (meta.get("labgrid") or {}).get("place")}


def provenance(row: Any) -> dict[str, Any]:
    """The run's provenance record (``row``: a store RunRow)."""
    meta = row.metadata or {}
    params = row.params or {}
    hooks = meta.get("hooks") or {}
    knobs = [_knob(n.split(":", 1)[1], m) for n, m in hooks.items()
             if n.startswith("knob:") and isinstance(m, dict)]
    loads = [_load(n.split(":", 1)[1], m) for n, m in hooks.items()
             if n.startswith("load:") and isinstance(m, dict)]
    host = meta.get("host") or {}
    return {
        "version": PROVENANCE_VERSION, "run_id": row.run_id, "name": row.name,
        "configuration": {
            "target": row.target, "arch": row.arch, "accel": row.accel,
            "emulated": row.emulated, "kind": row.kind, "source": row.source,
            "timing": {k: params.get(k) for k in TIMING_KEYS},
            "options": {k: v for k, v in params.items()
                        if k not in _LABEL_KEYS and k not in TIMING_KEYS},
            "loads": loads, "knobs": knobs,
            "scheduling": _scheduling(params, meta, knobs),
            "identities": _identities(row, meta),
            "tags": dict(row.tags or {})},
        "host": {k: host.get(k, UNKNOWN) for k in HOST_FACTS}}


def _text(value: Any) -> Any:
    """A fact as one flat value: lists and dicts as compact text, scalars kept."""
    if isinstance(value, dict):
        return ",".join(f"{k}={_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(str(_text(v)) for v in value)
    return value


def facts(record: dict[str, Any]) -> dict[str, Any]:
    """The record flattened to one value per fact, keyed ``section.name``
    (``knob.pin.status``, ``host.clocksource``): the API's runs() columns and what
    compare's "what differs" compares."""
    conf = record["configuration"]
    out: dict[str, Any] = {f"run.{k}": conf[k] for k in
                           ("target", "arch", "accel", "emulated", "kind", "source")}
    out.update({f"timing.{k}": v for k, v in conf["timing"].items()})
    out.update({f"option.{k}": _text(v) for k, v in sorted(conf["options"].items())})
    for load in conf["loads"]:
        out[f"load.{load['kind']}"] = _text(load["params"]) or "default"
        out[f"load.{load['kind']}.status"] = load["status"]
    for knob in conf["knobs"]:
        base = f"knob.{knob['key']}"
        out[base] = knob["requested"]
        for k in ("status", "read_back", "original", "restored"):
            out[f"{base}.{k}"] = _text(knob[k])
    out.update({f"scheduling.{k}": _text(v) for k, v in conf["scheduling"].items()})
    out.update({f"identity.{k}": v for k, v in conf["identities"].items()})
    out.update({f"tag.{k}": v for k, v in sorted(conf["tags"].items())})
    out.update({f"host.{k}": _text(v) for k, v in record["host"].items()})
    return out


# Facts that differ between any two runs by construction (labels, the tool's own
# version line), not conditions of the measurement: never listed in "what differs".
# The scheduling block's requests repeat knob.pin/knob.prio and option.cpus/priority.
_NOT_CONDITIONS = ("tag.", "identity.import_source", "run.source", "run.kind",
                   "scheduling.pin_", "scheduling.prio_", "scheduling.cpus_requested",
                   "scheduling.priority_requested")


def differs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The facts whose values are not all equal across ``records`` (in the records'
    order): ``{"fact": key, "values": [...]}``. A fact "unknown" for a run (not
    recorded: an imported run, a run stored before the fact was) is left out, since no
    one can say whether it differs; None is a recorded "not set" and counts. A load or
    knob present in only some runs is listed once (None where absent)."""
    flat = [facts(r) for r in records]
    keys: list[str] = []
    for f in flat:
        keys += [k for k in f if k not in keys]
    out = []
    for key in keys:
        if key.startswith(_NOT_CONDITIONS):
            continue
        values = [f.get(key) for f in flat]
        present_in_all = all(key in f for f in flat)
        if not present_in_all and key.startswith(("knob.", "load.")) and \
                key.count(".") > 1:
            continue    # the knob or load itself is listed; its status would repeat it
        if present_in_all and any(v == UNKNOWN for v in values):
            continue
        if len({repr(v) for v in values}) > 1:
            out.append({"fact": key, "values": values})
    return out


def fact_text(fact: str, value: Any) -> str:
    """A recorded fact's value for people: a duration (``*_ns``) as it is written
    ('6 s', '200 us'), yes/no for a flag, '—' when not recorded."""
    from irqlab.durations import format_ns

    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if fact.endswith("_ns") and isinstance(value, int):
        if value >= 1_000_000_000:
            return format_ns(value, "sig3")         # '6.00 s', never '60000 ms'
        return format_ns(value, "exact") if value >= 1000 else f"{value} ns"
    return str(value)


def differs_text(diff: list[dict[str, Any]]) -> str:
    """One line: ``knob.halt_poll_global (0 | 100 us); host.cpufreq_governor (...)``."""
    return "; ".join(f"{d['fact']} (" + " | ".join(
        fact_text(d["fact"], v) for v in d["values"]) + ")" for d in diff)
