"""tbm (github.com/edgarigl/tbm) IRQ-latency results: its live lines and the tables people
make from them (seed 002).

Live line, printed whenever max, warm max or min changes (a snapshot, not a window):
    latency (ns): max=8470 warm_max=2990 min=2830 avg=4842
`avg` is tbm's exponential moving average (weight 1/8), not the run mean: it is kept as
`source_avg_ns` and mean_ns stays absent. warm_max is 0 until tbm's third interrupt.

Table (one run per row, the row label is the run name; values in ns):
                            AVG     MIN     MAX     WARM MAX
    NODEBUG no WFI          1890    1800    3170    2070
"""

from __future__ import annotations

import re
from typing import Any

from irqlab.importers.base import (Lines, ParsedRun, ParseOptions, ParseResult, strip_quote,
                                   to_int)

_LIVE = re.compile(r"latency(?: \((ns)\))?: max=(\d+) warm_max=(\d+) min=(\d+)"
                   r"(?: avg=(-?\d+))?\s*$")
_LIVE_START = re.compile(r"\blatency(?: \(ns\))?: max=")
_FREQ = re.compile(r"(?:CNTFRQ=(\d+) Hz|Frequency: (\d+) \[Hz\])")
_HEADER = re.compile(r"^\s*(AVG|MIN|MAX|WARM MAX)(\s+(AVG|MIN|MAX|WARM MAX))+\s*$")
_ROW = re.compile(r"^(?P<label>\S.*?)\s+(?P<nums>\d+(?:\s+\d+)*)\s*$")
_COLUMN_KEYS = {"AVG": "source_avg_ns", "MIN": "min_ns", "MAX": "max_ns",
                "WARM MAX": "warm_max_ns"}
_AVG_NOTE = ("tbm's avg is an exponential moving average (weight 1/8), not the run "
             "mean: kept as source_avg_ns, mean absent")


def _columns(header: str) -> list[str]:
    return re.findall(r"WARM MAX|AVG|MIN|MAX", header)


def _unit_scale(context: list[str]) -> tuple[int, str]:
    text = " ".join(context).lower()
    if re.search(r"micro ?sec|\(us\)|in us\b", text):
        return 1000, "us (stated above the table)"
    if re.search(r"nano ?sec|\(ns\)|in ns\b", text):
        return 1, "ns (stated above the table)"
    return 1, "ns (tbm prints ns; not restated above the table)"


def _table(src: Lines, start: int, header: str, out: list[ParsedRun]) -> int:
    """Parse the table whose header is at line `start` (1-based); returns the next line."""
    cols = _columns(header)
    scale, unit = _unit_scale(src.lines[max(0, start - 4):start - 1])
    i = start
    while i < len(src.lines):
        raw = strip_quote(src.lines[i])
        lineno = i + 1
        if not raw.strip():
            i += 1
            # A blank line splits groups; the table ends at text that is not a row.
            continue
        m = _ROW.match(raw.strip())
        nums = m.group("nums").split() if m else []
        if not m or len(nums) < len(cols):
            if _HEADER.match(raw) or not re.search(r"\d", raw):
                break
            if m and len(nums) < len(cols):
                src.bad(lineno, f"a tbm table row: a label then {len(cols)} numbers "
                                f"({' '.join(cols)})", raw)
                i += 1
                continue
            break
        # Whitespace inside a label is layout, not name: it is normalised.
        label = " ".join((m.group("label") + " " + " ".join(nums[:-len(cols)])).split())
        values = [to_int(x) * scale for x in nums[-len(cols):]]
        run = ParsedRun(source="tbm", path=src.path, line=lineno, name=label)
        for col, val in zip(cols, values):
            run.figures[_COLUMN_KEYS[col]] = val
        run.figures["samples"] = None
        if "AVG" in cols:
            run.notes.append(_AVG_NOTE)
        run.provenance = {"shape": "table", "columns": cols, "unit": unit}
        out.append(run)
        i += 1
    return i + 1


def _live_run(src: Lines, snaps: list[tuple[int, list[int | None]]],
              tick_hz: int | None) -> ParsedRun:
    line, (mx, warm, mn, avg) = snaps[-1]
    run = ParsedRun(source="tbm", path=src.path, line=snaps[0][0], tick_hz=tick_hz)
    figures: dict[str, Any] = {"max_ns": mx, "min_ns": mn,
                               "warm_max_ns": warm if warm else None}
    if avg is not None:
        figures["source_avg_ns"] = avg
        run.notes.append(_AVG_NOTE)
    run.figures = figures
    run.notes.append("tbm prints a line only when an extreme changes: the sample count "
                     "is unknown and the last line holds the run's extremes")
    run.provenance = {"shape": "live lines", "last_line": line, "snapshots": len(snaps),
                      "history": [[ln, *vals] for ln, vals in snaps]}
    return run


def parse_tbm(path: str, text: str, options: ParseOptions) -> ParseResult:
    src = Lines(path, text, options)
    runs: list[ParsedRun] = []
    snaps: list[tuple[int, list[int | None]]] = []
    tick_hz: int | None = None
    i = 0
    while i < len(src.lines):
        raw = strip_quote(src.lines[i])
        lineno = i + 1
        if (f := _FREQ.search(raw)):
            if snaps:
                runs.append(_live_run(src, snaps, tick_hz))
                snaps = []
            tick_hz = to_int(f.group(1) or f.group(2))
        if _HEADER.match(raw):
            i = _table(src, lineno, raw, runs) - 1
            continue
        if _LIVE_START.search(raw):
            m = _LIVE.search(raw)
            if m is None:
                src.bad(lineno, "a tbm line 'latency (ns): max=N warm_max=N min=N [avg=N]'",
                        raw)
            else:
                snaps.append((lineno, [to_int(m.group(k)) if m.group(k) else None
                                       for k in (2, 3, 4, 5)]))
        i += 1
    if snaps:
        runs.append(_live_run(src, snaps, tick_hz))
    if not runs:
        src.error(None, "tbm output: 'latency (ns): max=… warm_max=… min=…' lines or an "
                        "'AVG MIN MAX WARM MAX' table")
    runs.sort(key=lambda r: r.line)
    return ParseResult(runs, src.skipped)


def sniff_tbm(text: str) -> int:
    head = text[:200_000]
    if _LIVE_START.search(head):
        return 80
    if any(_HEADER.match(strip_quote(x)) for x in head.splitlines()):
        return 70
    return 0
