"""Parse and print durations with units (ns, us, ms, s, m)."""

from __future__ import annotations

import re
from typing import Literal

_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
             "m": 60_000_000_000}
# Patterns, compiled at their first use (re's cache), not at import: every command's
# start imports this module (issue 28). (?a): ASCII digits and spaces only.
_RE = r"(?a)^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m)\s*$"
# The longest duration any option takes (a run, a window, a threshold ...): 366 days. Any
# longer is a typo, and in ticks (ns x tick rate up to ~100 GHz) it would overflow 64 bits.
MAX_DURATION_NS = 366 * 86_400 * 1_000_000_000
MAX_DURATION_TEXT = "366 days (527040m)"


def _shown(text: str, limit: int = 40) -> str:
    """An argument quoted for a message, cut short when long."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + f"… ({len(text)} characters)"


_BARE_RE = r"(?a)^\s*\d+(?:\.\d+)?\s*$"
# Only a run's length takes a bare number, as seconds (cyclictest -D 5, timeout 5): a
# bare latency or period is ambiguous (cyclictest's -i 1000 is us), so it needs a unit.
BARE_NUMBER_RULE = "only --duration (-D) takes a bare number, as seconds"


def parse_duration_ns(text: str, bare_unit: str | None = None) -> int:
    """'1ms' -> 1000000; a bare '0' is 0 (zero needs no unit). ``bare_unit`` (e.g. 's'
    for a run's length) is the unit of a bare number; without it a bare number is
    refused. Raises ValueError naming the accepted forms."""
    if text.strip() == "0":
        return 0
    shown = _shown(text)
    if re.match(_BARE_RE, text):
        if bare_unit is not None:
            return parse_duration_ns(text.strip() + bare_unit)
        raise ValueError(f"{shown} is not a duration: it has no unit; write one, e.g. "
                         f"{text.strip()}us or {text.strip()}ms (units: ns, us, ms, s, m; "
                         f"{BARE_NUMBER_RULE})")
    m = re.match(_RE, text)
    if not m:
        bare = (f", or a bare number of {'seconds' if bare_unit == 's' else bare_unit}"
                if bare_unit else "")
        raise ValueError(f"{shown} is not a duration: write a number with a unit{bare}, "
                         f"e.g. 500us, 1ms, 10s, 2m (units: ns, us, ms, s, m)")
    value, unit = m.groups()
    # Decimal arithmetic on the string keeps '0.1ms' exact (no float rounding).
    whole, _, frac = value.partition(".")
    scale = _UNITS_NS[unit]
    too_long = (f"{shown} is longer than {MAX_DURATION_TEXT}, the longest duration "
                f"irqlab takes: use a shorter one")
    # Digit strings are bounded before int(): every value below is then a small int, and
    # ticks computed from it (x tick rate) stay inside 64 bits.
    if len(whole.lstrip("0")) > 18 or len(frac) > 18:
        if len(whole.lstrip("0")) > 18:
            raise ValueError(too_long)
        raise ValueError(f"{shown} is finer than 1 ns: use a coarser value")
    ns = int(whole) * scale
    if frac:
        ns += int(frac) * scale // 10 ** len(frac)
        if int(frac) * scale % 10 ** len(frac):
            raise ValueError(f"{shown} is finer than 1 ns: use a coarser value")
    if ns > MAX_DURATION_NS:
        raise ValueError(too_long)
    return ns


# Styles of format_ns; each is what some output has always printed, and tests pin them.
NsStyle = Literal["fixed", "sig3", "exact"]
NS_STYLES: tuple[NsStyle, ...] = ("fixed", "sig3", "exact")


def format_ns(ns: int | float | None, style: NsStyle = "fixed") -> str:
    """Human form of a latency (or duration) in ns; None is '—'.

    * ``fixed`` (every latency figure, through ``format_latency``: run summaries,
      `irqlab list/show`, suites, checks): decimals fixed by the unit, '930 ns',
      '9999 ns', '12.3 us', '2.01 ms', '1.50 s';
    * ``sig3`` (compare tables, reports, plots): three significant digits, so columns
      line up: '29 ns', '5.00 us', '123 us', '2.01 ms';
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


# Latency figures (min, percentiles, max ...) print in this one style, so one value reads
# the same in the run's summary, show, list, suites and check (issue 27).
LATENCY_STYLE: NsStyle = "fixed"


def format_latency(ns: int | float | None) -> str:
    """A latency figure as the commands print it: '819.4 us', '2.36 ms', '—' for None."""
    return format_ns(ns, LATENCY_STYLE)
