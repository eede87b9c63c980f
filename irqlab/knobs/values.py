"""Value syntax shared by load specs and knobs: sizes, durations, integers, on/off.

CPU lists have their own module, irqlab.cpus, shared with the runner and the CLI.
"""

from __future__ import annotations

import re

# One duration syntax for the whole CLI (`--period 1ms`, `halt_poll=50us`, `delay=2s`).
from irqlab.durations import format_ns, parse_duration_ns

_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE_RE = re.compile(r"^(\d+)\s*([kmg]?)(?:i?b)?$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'512M', '2G', '1GiB', '4096' -> bytes."""
    m = _SIZE_RE.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a size: write e.g. 512M or 2G")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]


def parse_duration(text: str) -> int:
    """A duration with unit, or a bare integer of ns."""
    if text.strip().isdigit():
        return int(text)
    return parse_duration_ns(text)


def parse_int(text: str, lo: int, hi: int, what: str) -> int:
    try:
        val = int(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an integer") from None
    if not lo <= val <= hi:
        raise ValueError(f"{what} must be in {lo}..{hi}, not {val}")
    return val


def parse_duration_in(text: str, lo_ns: int, hi_ns: int, what: str,
                      unit_ns: int = 1) -> int:
    """A duration within lo_ns..hi_ns and a whole number of ``unit_ns`` (the unit the
    setting is written in, e.g. 1000 for a tool that takes µs); returns it in that unit."""
    ns = parse_duration(text)
    if not lo_ns <= ns <= hi_ns or ns % unit_ns:
        unit = format_ns(unit_ns, "exact").removeprefix("1 ")
        whole = f" in whole {unit}" if unit_ns > 1 else ""
        raise ValueError(f"{what} must be {format_ns(lo_ns, 'exact')}.."
                         f"{format_ns(hi_ns, 'exact')}{whole}, not {text}")
    return ns // unit_ns


def parse_onoff(text: str) -> bool:
    low = text.strip().lower()
    if low in ("on", "yes", "true", "1"):
        return True
    if low in ("off", "no", "false", "0"):
        return False
    raise ValueError(f"{text!r} is not on/off")
