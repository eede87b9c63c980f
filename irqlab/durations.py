"""Parse and print durations with units (ns, us, ms, s, m)."""

from __future__ import annotations

import re
from typing import Literal

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


# Styles of format_ns; each is what some output has always printed, and tests pin them.
NsStyle = Literal["fixed", "sig3", "exact"]
NS_STYLES: tuple[NsStyle, ...] = ("fixed", "sig3", "exact")


def format_ns(ns: int | float | None, style: NsStyle = "fixed") -> str:
    """Human form of a latency (or duration) in ns; None is '—'.

    * ``fixed`` (run summaries, `irqlab list/show`, suites): decimals fixed by the unit,
      '930 ns', '9999 ns', '12.3 us', '2.01 ms', '1.50 s';
    * ``sig3`` (compare tables, reports, checks, plots): three significant digits, so
      columns line up: '29 ns', '5.00 us', '123 us', '2.01 ms';
    * ``exact`` (settings such as a period or threshold, in sentences): the shortest
      form, '30 us', '1 ms', '1.5 ms'; its number with the unit joined is a valid
      duration argument ('30us').
    """
    if ns is None:
        return "—"
    if style == "fixed":
        a = abs(ns)
        if a < 10_000:
            return f"{ns} ns"
        if a < 1_000_000:
            return f"{ns / 1e3:.1f} us"
        if a < 1_000_000_000:
            return f"{ns / 1e6:.2f} ms"
        return f"{ns / 1e9:.2f} s"
    if style == "sig3":
        a = abs(ns)
        for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
            if a >= scale:
                # '#' keeps trailing zeros (5.00 us lines up with 5.12 us); '100.' loses
                # its dot.
                return f"{ns / scale:#.3g}".rstrip(".") + f" {unit}"
        return f"{ns:.0f} ns"
    if style == "exact":
        return f"{ns / 1e6:g} ms" if ns >= 1_000_000 else f"{ns / 1e3:g} us"
    raise ValueError(f"unknown ns style {style!r}: choose from {', '.join(NS_STYLES)}")
