"""How counts, ratios and times read for people, in every human output (the terminal,
the HTML report, the dashboard); latencies and durations read through
irqlab.durations. A module of its own, without numpy: `irqlab list` and `show` start
without the numeric stack (docs/design.md, "Start-up")."""

from __future__ import annotations

import datetime as dt


def format_count(count: int | None) -> str:
    """A count of samples, runs, events with thousands separators: '1,234,567'."""
    return "—" if count is None else f"{int(count):,}"


def format_ratio(ratio: float | None) -> str:
    """A ratio (a figure over the baseline's, a change point's after/before) to three
    significant digits, as compare's table prints it: '1.19', '0.759'."""
    return "—" if ratio is None else f"{ratio:.3g}"


def format_when(when: dt.datetime | str | None) -> str:
    """A stored time (UTC) to the second, as `irqlab list` prints it: '2026-11-28
    16:58:43' (the JSON keeps ISO 8601 with microseconds)."""
    if when is None:
        return "—"
    text = when.isoformat() if isinstance(when, dt.datetime) else str(when)
    return text[:19].replace("T", " ")
