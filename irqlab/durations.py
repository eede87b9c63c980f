"""Parse and print durations with units (ns, us, ms, s, m)."""

from __future__ import annotations

import re

_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
             "m": 60_000_000_000}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m)\s*$")


def parse_duration_ns(text: str) -> int:
    """'1ms' -> 1000000; a bare '0' is 0 (zero needs no unit). Raises ValueError naming
    the accepted forms."""
    if text.strip() == "0":
        return 0
    m = _RE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration: write a number with a unit, "
                         f"e.g. 500us, 1ms, 10s, 2m (units: ns, us, ms, s, m)")
    value, unit = m.groups()
    # Decimal arithmetic on the string keeps '0.1ms' exact (no float rounding).
    whole, _, frac = value.partition(".")
    scale = _UNITS_NS[unit]
    ns = int(whole) * scale
    if frac:
        ns += int(frac) * scale // 10 ** len(frac)
        if int(frac) * scale % 10 ** len(frac):
            raise ValueError(f"{text!r} is finer than 1 ns: use a coarser value")
    return ns


def format_ns(ns: int | None) -> str:
    """Human form of a latency in ns: '930 ns', '12.3 us', '2.01 ms'."""
    if ns is None:
        return "—"
    a = abs(ns)
    if a < 10_000:
        return f"{ns} ns"
    if a < 1_000_000:
        return f"{ns / 1e3:.1f} us"
    if a < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"
