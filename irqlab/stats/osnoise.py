"""A noise run's figures (``--target noise``, issue 44), as rtla osnoise top prints them:
per CPU the time measured, the noise (the sum of the gaps the busy loop saw, each at
least the threshold), the CPU left to the loop, the largest single gap and, with a
trace, the gaps counted by class (HW NMI IRQ Softirq Thread); the summary key
``noise`` (docs/formats.md section 4, ``noise`` object).

Noise per second = noise / runtime: rtla osnoise top's "Noise" column over its
"Runtime", and its "%CPU Aval" = 100 × (1 − noise / runtime)
(tools/tracing/rtla/src/osnoise_top.c, osnoise_top_print). The totals come from the
probe's own counters (ring header ``noise_tick``, ``progress_tick − busy_start_tick``),
so records the ring lost still count; the largest gap and the classes come from the
stored gaps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irqlab.stats.units import ticks_to_ns

NOISE_VERSION = 1
# Classes, innermost first, in rtla osnoise top's column order (HW NMI IRQ Softirq
# Thread): the kernel's trace names every one but the first (irqlab.explain.noise).
OUTSIDE, NMI, IRQ, SOFTIRQ, THREAD = "outside", "nmi", "irq", "softirq", "thread"
KINDS = (OUTSIDE, NMI, IRQ, SOFTIRQ, THREAD)
OUTSIDE_TEXT = "outside the kernel: hypervisor, SMI or hardware"
TOP_CLASSES = 10          # classes listed by name in the summary, largest time first


def _rates(runtime_ns: int, noise_ns: int) -> dict[str, Any]:
    """Noise per second of runtime (ns/s) and the CPU left to the loop (%)."""
    if runtime_ns <= 0:
        return {"noise_per_s_ns": None, "cpu_available_pct": None}
    return {"noise_per_s_ns": round(noise_ns * 1_000_000_000 / runtime_ns),
            "cpu_available_pct": round(100.0 * (1 - noise_ns / runtime_ns), 5)}


def _by_kind(kinds: np.ndarray, gap_ns: np.ndarray) -> dict[str, dict[str, int]]:
    return {k: {"count": int(np.count_nonzero(kinds == k)),
                "time_ns": int(gap_ns[kinds == k].sum())} for k in KINDS}


def noise_summary(threshold_ns: int, tick_hz: int, rings: list[dict[str, Any]],
                  gap_cpu: np.ndarray, gap_tick: np.ndarray,
                  classes: tuple[np.ndarray, np.ndarray] | None) -> dict[str, Any]:
    """The ``noise`` object. ``rings``: per CPU ``cpu, busy_tick, noise_tick, written,
    lost`` (irqlab.samples.multiring per_ring); ``gap_cpu``/``gap_tick``: the stored
    gaps; ``classes``: each stored gap's (kind, name), or None without a trace."""
    gap_cpu = np.asarray(gap_cpu).astype(np.int64)
    gap_ns = np.asarray(gap_tick).astype(np.int64) * 1_000_000_000 // tick_hz
    per_cpu = []
    for r in sorted(rings, key=lambda r: r["cpu"]):
        mine = gap_cpu == r["cpu"]
        runtime_ns = ticks_to_ns(int(r["busy_tick"]), tick_hz)
        noise_ns = ticks_to_ns(int(r["noise_tick"]), tick_hz)
        entry = {"cpu": r["cpu"], "runtime_ns": runtime_ns, "noise_ns": noise_ns,
                 **_rates(runtime_ns, noise_ns),
                 "max_gap_ns": int(gap_ns[mine].max()) if mine.any() else None,
                 "gaps": int(r["written"]), "lost": int(r["lost"])}
        if classes is not None:
            entry["by_kind"] = _by_kind(classes[0][mine], gap_ns[mine])
        per_cpu.append(entry)
    runtime_ns = sum(c["runtime_ns"] for c in per_cpu)
    noise_ns = sum(c["noise_ns"] for c in per_cpu)
    out: dict[str, Any] = {
        "version": NOISE_VERSION, "threshold_ns": threshold_ns, "cpus": len(per_cpu),
        "runtime_ns": runtime_ns, "noise_ns": noise_ns, **_rates(runtime_ns, noise_ns),
        "max_gap_ns": int(gap_ns.max()) if len(gap_ns) else None,
        "gaps": sum(c["gaps"] for c in per_cpu), "lost": sum(c["lost"] for c in per_cpu),
        "classified": classes is not None, "per_cpu": per_cpu}
    if classes is not None:
        kinds, names = classes
        out["by_kind"] = _by_kind(kinds, gap_ns)
        out["classes"] = top_classes(kinds, names, gap_ns)
    return out


def top_classes(kinds: np.ndarray, names: np.ndarray, gap_ns: np.ndarray
                ) -> list[dict[str, Any]]:
    """The classes by name with their gaps' count and time, largest time first (ties:
    more gaps, then the name), at most TOP_CLASSES."""
    totals: dict[tuple[str, str], list[int]] = {}
    for kind, name, ns in zip(kinds.tolist(), names.tolist(), gap_ns.tolist()):
        t = totals.setdefault((kind, name), [0, 0])
        t[0] += 1
        t[1] += ns
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))
    return [{"kind": k, "name": n, "count": c, "time_ns": t}
            for (k, n), (c, t) in ranked[:TOP_CLASSES]]
