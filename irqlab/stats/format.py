"""The live per-window line, in the seed logs' (rt_eval) layout: raw ticks, then ns.

One line (wrapped here):
    Mean: 306 (9180 ns) stddev: 3 (90 ns) above thr: 2 (0.20%)
    [265 (7950 ns) - 376 (11280 ns)] global [263 (7890 ns) 376 (11280 ns)]

A traced run whose capture is read live (irqlab.explain.live) appends the window's IRQ
and thread parts, as rtla timerlat top shows its IRQ and Thread columns, in the same
bracket layout (format_parts_columns):
    ... global [263 (7890 ns) 376 (11280 ns)] IRQ [2 (60 ns) - 9 (270 ns)]
    Thr [260 (7800 ns) - 370 (11100 ns)]

Mean and stddev are rounded to whole ticks (half away from zero) and the ns figure is
converted from that rounded tick count, as in the seed logs (where ns is always an
exact multiple of the tick length).
"""

from __future__ import annotations

from .parts import WindowParts
from .units import round_half_away, ticks_to_ns
from .window import WindowStats


def format_ticks(tick: int, tick_hz: int) -> str:
    """'306 (9180 ns)'."""
    return f"{tick} ({ticks_to_ns(tick, tick_hz)} ns)"


def format_percent(count: int, total: int) -> str:
    """count/total as a percentage with 2 decimals that never hides a non-zero count.

    A count > 0 that would print as 0.00% prints '<0.01%'; likewise a count < total
    that would print as 100.00% prints '>99.99%'.
    """
    if total <= 0:
        return "-"
    text = f"{100 * count / total:.2f}%"
    if count > 0 and text == "0.00%":
        return "<0.01%"
    if count < total and text == "100.00%":
        return ">99.99%"
    return text


def format_parts_columns(parts: WindowParts, tick_hz: int) -> str:
    """The two columns a split window adds to its line: ' IRQ [min - max] Thr [min -
    max]' over its split samples ('IRQ [-] Thr [-]' when none could be split yet)."""
    def span(lo: int | None, hi: int | None) -> str:
        if lo is None or hi is None:
            return "[-]"
        return f"[{format_ticks(lo, tick_hz)} - {format_ticks(hi, tick_hz)}]"
    return (f" IRQ {span(parts.irq_min_tick, parts.irq_max_tick)} "
            f"Thr {span(parts.thread_min_tick, parts.thread_max_tick)}")


def format_window_line(window: WindowStats, tick_hz: int,
                       parts: WindowParts | None = None) -> str:
    """Build (and return) the live line of one window; with ``parts``, its IRQ and
    thread columns after the seed layout's fields (extended, never reordered)."""
    line = _seed_window_line(window, tick_hz)
    return line + format_parts_columns(parts, tick_hz) if parts is not None else line


def _seed_window_line(window: WindowStats, tick_hz: int) -> str:
    """The seed logs' (rt_eval) line of one window."""
    if window.global_min_tick is None or window.global_max_tick is None:
        global_part = "global [-]"
    else:
        global_part = (f"global [{format_ticks(window.global_min_tick, tick_hz)} "
                       f"{format_ticks(window.global_max_tick, tick_hz)}]")
    if window.samples == 0:
        return f"Mean: - (no samples) {global_part}"
    assert window.mean_tick is not None and window.stddev_tick is not None
    assert window.min_tick is not None and window.max_tick is not None
    mean = round_half_away(window.mean_tick)
    stddev = round_half_away(window.stddev_tick)
    return (f"Mean: {format_ticks(mean, tick_hz)} "
            f"stddev: {format_ticks(stddev, tick_hz)} "
            f"above thr: {window.above_threshold} "
            f"({format_percent(window.above_threshold, window.samples)}) "
            f"[{format_ticks(window.min_tick, tick_hz)} - "
            f"{format_ticks(window.max_tick, tick_hz)}] {global_part}")
