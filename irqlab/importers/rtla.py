"""`rtla timerlat hist` output: per-CPU histograms of IRQ and thread (and user) latency.

    # RTLA timerlat histogram
    # Time unit is microseconds (us)
    # Duration:   0 00:01:00
    Index   IRQ-000   Thr-000   IRQ-001   Thr-001
    0         58572         0     59373         0
    ...
    over:         0         0         0         0
    count:    60001     60001     60001     60001
    min:          0         1         0         1
    avg:          0         1         0         1
    max:          3         5         1         6

IRQ and thread latencies measure different things (timer IRQ handler vs the woken
thread), so they are kept apart: one run per context (`…/irq`, `…/thread`, `…/user`),
each with one histogram series per CPU. The Index is a bucket's lower edge; the bucket
width is the `--bucket-size`, inferred as the gcd of the listed indexes (rows with only
zeros are omitted by default). A newer "ALL:" block repeats per-CPU data and is ignored.
"""

from __future__ import annotations

import math
import re

from irqlab.importers.base import (Lines, ParsedRun, ParseOptions, ParseResult, Series,
                                   to_int)

_UNIT = re.compile(r"^# Time unit is (microseconds|nanoseconds) \((us|ns)\)")
_DURATION = re.compile(r"^# Duration:\s*(.+?)\s*$")
_COL = re.compile(r"^(IRQ|Thr|Usr)-(\d+)$")
_CONTEXT = {"IRQ": "irq", "Thr": "thread", "Usr": "user"}
_STAT_ROWS = ("over:", "count:", "min:", "avg:", "max:")


def _num(src: Lines, lineno: int, tok: str, what: str) -> int | None:
    if tok == "-":
        return None
    try:
        return to_int(tok)
    except ValueError:
        src.bad(lineno, what, tok)
        return None


def parse_rtla(path: str, text: str, options: ParseOptions) -> ParseResult:
    src = Lines(path, text, options)
    unit = 1000
    unit_seen = False
    duration = None
    cols: list[tuple[str, int]] = []
    header_line = 0
    rows: list[tuple[int, list[int]]] = []
    stats: dict[str, list[int | None]] = {}
    for lineno, raw in src:
        line = raw.strip()
        if (m := _UNIT.match(line)):
            unit, unit_seen = (1000 if m.group(2) == "us" else 1), True
            continue
        if (m := _DURATION.match(line)):
            duration = m.group(1)
            continue
        if line.startswith("ALL:"):
            break
        toks = line.split()
        if toks and toks[0] == "Index":
            parsed = [_COL.match(t) for t in toks[1:]]
            if not parsed or not all(parsed):
                src.error(lineno, "an 'Index IRQ-NNN Thr-NNN …' header", line)
            cols = [(p.group(1), to_int(p.group(2))) for p in parsed if p]
            header_line = lineno
            continue
        if not cols or not toks:
            continue
        if toks[0] in _STAT_ROWS:
            vals = [_num(src, lineno, t, f"{len(cols)} integers after {toks[0]}")
                    for t in toks[1:]]
            if len(vals) != len(cols):
                src.bad(lineno, f"{toks[0]} followed by {len(cols)} values", line)
                continue
            stats[toks[0].rstrip(":")] = vals
            continue
        if toks[0].isdigit():
            vals = [to_int(t) for t in toks[1:] if t.isdigit()]
            if len(vals) != len(cols) or len(toks) != len(cols) + 1:
                src.bad(lineno, f"a histogram row: index then {len(cols)} counts", line)
                continue
            rows.append((to_int(toks[0]), vals))
            continue
        if not line.startswith("#"):
            src.bad(lineno, "a histogram row, or over:/count:/min:/avg:/max:", line)
    if not cols:
        src.error(None, "an rtla timerlat hist table ('Index IRQ-000 Thr-000 …')")
    width = 0
    for idx, _v in rows:
        width = math.gcd(width, idx)
    width = width or 1
    runs: list[ParsedRun] = []
    contexts = sorted({c for c, _cpu in cols}, key=list(_CONTEXT).index)
    for ctx in contexts:
        run = ParsedRun(source="rtla-timerlat", path=path, line=header_line,
                        name=_CONTEXT[ctx])
        for j, (c, cpu) in enumerate(cols):
            if c != ctx:
                continue
            buckets: list[tuple[int, int | None, int]] = [
                (idx * unit, (idx + width) * unit, v[j]) for idx, v in rows if v[j]]
            over = (stats.get("over") or [0] * len(cols))[j] or 0
            if over:
                top = max((idx for idx, _v in rows), default=-width) + width
                buckets.append((top * unit, None, over))

            def pick(key: str) -> int | None:
                v = (stats.get(key) or [None] * len(cols))[j]
                return None if v is None else v * unit
            count = (stats.get("count") or [None] * len(cols))[j]
            run.series[f"cpu{cpu}"] = Series(buckets=buckets, resolution_ns=unit,
                                             count=count, min_ns=pick("min"),
                                             max_ns=pick("max"), mean_ns=pick("avg"))
        run.provenance = {"context": _CONTEXT[ctx], "duration": duration,
                          "unit": "us" if unit == 1000 else "ns",
                          "unit_stated": unit_seen, "bucket_width": width,
                          "bucket_width_from": "gcd of the listed indexes"}
        run.notes.append("rtla avg is printed as an integer by the tool")
        runs.append(run)
    return ParseResult(runs, src.skipped)


def sniff_rtla(text: str) -> int:
    head = text[:50_000]
    if "# RTLA timerlat histogram" in head:
        return 95
    if re.search(r"^Index\s+IRQ-\d+", head, re.M):
        return 80
    return 0
