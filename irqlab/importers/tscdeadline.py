"""kvm-unit-tests `x86/tscdeadline_latency` output: one raw latency per line, in TSC
cycles (the ISR's rdtsc minus the programmed deadline):

    latency: 1283
    hit max: 100000 < latency: 133245      (the sample that stopped a breakmax run)

The log does not state the TSC rate: pass --tick-hz, or keep a line such as
`tsc_hz=2400000000` / `TSC frequency: 2400000 kHz` in the log. The samples go to the
samples table unchanged (entry_tick - deadline_tick = the latency; the test does not
print deadlines, so deadline_tick is a constant origin, recorded as such).
"""

from __future__ import annotations

import re

import numpy as np

from irqlab.importers.base import Lines, ParsedRun, ParseOptions, ParseResult, to_int

_LAT = re.compile(r"^(?:hit max: (\d+) < )?latency: (-?\d+)\s*$")
_LAT_START = re.compile(r"\blatency:")
_HZ = re.compile(r"(?i)\b(?:tsc|tick)[ _-]?(?:(hz|khz|mhz)\s*[=:]\s*(\d+)|"
                 r"freq(?:uency)?\s*[=:]\s*(\d+)\s*(hz|khz|mhz))\b")
_SCALE = {"hz": 1, "khz": 1_000, "mhz": 1_000_000}
_BREAKMAX = re.compile(r"^breakmax=(\d+)")


def parse_tscdeadline(path: str, text: str, options: ParseOptions) -> ParseResult:
    src = Lines(path, text, options)
    values: list[int] = []
    first = 0
    log_hz: int | None = None
    breakmax = None
    hit = None
    for lineno, raw in src:
        line = raw.strip()
        if (h := _HZ.search(line)):
            unit = (h.group(1) or h.group(4)).lower()
            log_hz = to_int(h.group(2) or h.group(3)) * _SCALE[unit]
        if (b := _BREAKMAX.match(line)):
            breakmax = to_int(b.group(1))
        if not _LAT_START.search(line) or line.startswith("#"):
            continue
        m = _LAT.match(line)
        if m is None:
            src.bad(lineno, "'latency: N' (TSC cycles, an integer)", line)
            continue
        first = first or lineno
        if m.group(1):
            hit = lineno
        values.append(to_int(m.group(2)))
    if not values:
        src.error(None, "'latency: N' lines from tscdeadline_latency")
    tick_hz = options.tick_hz or log_hz
    if not tick_hz:
        src.error(None, "a TSC rate: the log does not state it, pass --tick-hz HZ")
    run = ParsedRun(source="tscdeadline", path=path, line=first, tick_hz=tick_hz)
    run.latency_tick = np.asarray(values, dtype=np.int64)
    run.provenance = {"tick_hz_from": "--tick-hz" if options.tick_hz else "the log",
                      "breakmax": breakmax, "hit_max_line": hit,
                      "deadline_tick": "not printed by the test: a constant origin"}
    if options.tick_hz and log_hz and log_hz != options.tick_hz:
        run.notes.append(f"--tick-hz {options.tick_hz} overrides the log's {log_hz} Hz")
    return ParseResult([run], src.skipped)


def sniff_tscdeadline(text: str) -> int:
    lines = text[:100_000].splitlines()
    hits = sum(1 for x in lines if _LAT.match(x.strip()))
    return 75 if hits >= 1 and hits * 2 >= sum(1 for x in lines if x.strip()) * 0.5 else 0
