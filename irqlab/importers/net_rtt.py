"""Network round-trip summaries (seed 003), one run of kind "network" per line:

    Total: 60000 packets ( ~= 1min)
      latency min/avg/max/stddev (usec): 61.443/81.581/487.319/11.859

and ping's `rtt min/avg/max/mdev = 0.043/0.057/0.075/0.011 ms`. The count comes from
the nearest "Total: N packets" (or ping's "M received") above the line, if any; the text
of the nearest non-empty line above is kept as the run's context.
"""

from __future__ import annotations

import re

from irqlab.importers.base import (Lines, ParsedRun, ParseOptions, ParseResult,
                                   decimal_to_int, to_int)

_UNITS = {"usec": 1_000, "us": 1_000, "msec": 1_000_000, "ms": 1_000_000, "nsec": 1,
          "ns": 1, "sec": 1_000_000_000, "s": 1_000_000_000}
_NUM = r"(?<![\d.])(\d+(?:\.\d+)?)"
_LINE = re.compile(
    rf"\b(?:latency|rtt|round-trip)\s+min/avg/max/(?:stddev|mdev)\s*"
    rf"(?:\((\w+)\))?\s*[:=]\s*{_NUM}/{_NUM}/{_NUM}/{_NUM}(?:\s*(\w+))?")
_START = re.compile(r"\b(?:latency|rtt|round-trip)\s+min/avg/max/")
# (?<!\d): a match may only start where a digit run starts; without it every position of
# a long digit run is tried and backtracked over (quadratic: 28 s on a 50 kB line).
_TOTAL = re.compile(r"Total:\s*(\d+)\s+packets|(?<!\d)(\d+) packets transmitted, "
                    r"(\d+) received", re.ASCII)


def parse_net_rtt(path: str, text: str, options: ParseOptions) -> ParseResult:
    src = Lines(path, text, options)
    runs: list[ParsedRun] = []
    count: int | None = None
    context: str | None = None
    for lineno, raw in src:
        line = raw.strip()
        if (t := _TOTAL.search(line)):
            count = to_int(t.group(1) or t.group(3))
        if not _START.search(line):
            if line:
                context = line[:100]
            continue
        m = _LINE.search(line)
        unit = (m.group(1) or m.group(6) or "").lower() if m else ""
        if m is None or unit not in _UNITS:
            src.bad(lineno, "'latency min/avg/max/stddev (usec): A/B/C/D' (a unit: usec, "
                            "msec, ns …)", line)
            continue
        scale = _UNITS[unit]
        vmin, avg, vmax, sd = (decimal_to_int(m.group(k), scale) for k in (2, 3, 4, 5))
        run = ParsedRun(source="net-rtt", path=path, line=lineno, kind="network")
        run.figures = {"samples": count, "min_ns": vmin, "mean_ns": avg, "max_ns": vmax,
                       "stddev_ns": sd}
        run.notes.append("round-trip summary line: min/avg/max/stddev only, no percentile")
        run.provenance = {"unit": unit, "context": context,
                          "samples_from": "the 'Total: N packets' line above" if count
                          else None}
        runs.append(run)
    if not runs:
        src.error(None, "a 'latency min/avg/max/stddev (usec): A/B/C/D' line")
    return ParseResult(runs, src.skipped)


def sniff_net_rtt(text: str) -> int:
    return 85 if _LINE.search(text[:200_000]) else 0
