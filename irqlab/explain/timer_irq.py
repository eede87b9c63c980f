"""The timer interrupt that woke a native probe thread: which hard IRQ entry on the
sample's CPU ran its expiry. One definition for `irqlab explain` (its "timer IRQ entry"
stage, irqlab.explain.native) and for the IRQ/thread split of every sample
(irqlab.explain.parts)."""

from __future__ import annotations

import numpy as np

from irqlab.explain.load import Trace

# The timer interrupt's entry and exit, best first: x86's local APIC timer vector, arm64's
# per-CPU timer IRQ (an ordinary IRQ, irq_handler_entry/exit of ARCH_TIMER_IRQ), the
# hrtimer expiry inside either (later than the entry).
TIMER_EVENTS = ("local_timer_entry", "irq_handler_entry", "hrtimer_expire_entry")
TIMER_EXITS = ("local_timer_exit", "irq_handler_exit", "hrtimer_expire_exit")  # same order
# The name arm64's generic timer driver requests its IRQs under
# (drivers/clocksource/arm_arch_timer.c: request_percpu_irq(..., "arch_timer", ...)).
ARCH_TIMER_IRQ = "arch_timer"


def arch_timer_irqs(trace: Trace) -> list[int]:
    """The IRQ numbers the trace's ``irq_handler_entry`` names ARCH_TIMER_IRQ (arm64's
    timer; none on x86, whose timer is a system vector)."""
    e = trace.t("irq_handler_entry")
    if not len(e):
        return []
    irq = e["irq"].astype(np.int64)
    out = []
    for n in np.unique(irq).tolist():
        name = e["name"][np.flatnonzero(irq == n)[0]]
        text = name.split(b"\0", 1)[0].decode("utf-8", "replace") \
            if isinstance(name, bytes) else str(name)
        if text == ARCH_TIMER_IRQ:
            out.append(int(n))
    return out


def timer_entries(trace: Trace, events: tuple[str, ...]) -> dict[int, np.ndarray]:
    """Per CPU, the sorted times of the first of ``events`` the capture has (the timer
    interrupt's entries, or its exits); of the IRQ handler events, only the arm64
    timer's (ARCH_TIMER_IRQ)."""
    timer_irqs = arch_timer_irqs(trace)
    for event in events:
        tb = trace.t(event)
        if not len(tb):
            continue
        ts, cpus = tb["ts"], tb["cpu"]
        if event in ("irq_handler_entry", "irq_handler_exit"):
            sel = np.isin(tb["irq"].astype(np.int64), timer_irqs)
            ts, cpus = ts[sel], cpus[sel]
        if len(ts):
            return {int(c): np.sort(ts[cpus == c].astype(np.int64))
                    for c in np.unique(cpus).tolist()}
    return {}


def first_in(ts: np.ndarray | None, a: int, b: int) -> int | None:
    """The first time of sorted ``ts`` in [a, b]."""
    if ts is None:
        return None
    i = int(np.searchsorted(ts, a, "left"))
    return int(ts[i]) if i < len(ts) and ts[i] <= b else None


class TimerIrqs:
    """The timer interrupt's entries and exits of a capture, per CPU."""

    def __init__(self, trace: Trace) -> None:
        self.entries = timer_entries(trace, TIMER_EVENTS)
        self.exits = timer_entries(trace, TIMER_EXITS)

    def entered(self, cpu: int, a: int, b: int, woken: int | None
                ) -> tuple[int | None, int | None]:
        """When the timer IRQ that woke the probe thread (at ``woken``) for the deadline
        ``a`` was entered, as a time in [a, b], and, when that IRQ began before the
        deadline, how long before (else None).

        The interrupt that runs the probe's expiry can have been entered before the
        deadline: hrtimer_interrupt() runs every timer that expires while it works
        (kernel/time/hrtimer.c, its retry loop), so a deadline that passes inside the
        tick's handler has no timer IRQ entry of its own. Then the entry is the deadline
        itself. Without a wake-up, the first timer IRQ entry in the window."""
        entries = self.entries.get(cpu)
        if entries is not None and woken is not None:
            i = int(entries.searchsorted(woken, "right")) - 1
            if i >= 0 and entries[i] >= a:
                return int(entries[i]), None
            if i >= 0 and not self._exited(cpu, int(entries[i]), a):
                return a, a - int(entries[i])
        return first_in(entries, a, b), None

    def _exited(self, cpu: int, entry: int, t: int) -> bool:
        """Did the timer IRQ entered at ``entry`` exit before ``t``? (No exits traced:
        assume not; the wake-up that followed came from it.)"""
        exits = self.exits.get(cpu)
        return exits is not None and first_in(exits, entry, t) is not None
