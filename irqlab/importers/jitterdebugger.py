"""jitterdebugger `results.json` (written to the `-o DIR` directory).

    {"version": 3, "sysinfo": {…, "resolution_in_ns": 1000},
     "cpu": {"0": {"histogram": {"13": 2, …}, "count": 2993, "min": 13, "max": 748,
                   "avg": 27.51}, …}}

Values are in units of `resolution_in_ns` (1000 = us, 1 with `-N`). The histogram only
holds values below its size: samples counted but absent from it form the overflow
bucket, whose lower edge is the highest listed bucket + 1 (all that is known).
"""

from __future__ import annotations

import json

from irqlab.importers.base import (ImportFormatError, Lines, ParsedRun, ParseOptions,
                                   ParseResult, Series, Text, whole_text)
from irqlab.importers.jsonpos import member_lines


def parse_jitterdebugger(path: str, text: Text, options: ParseOptions) -> ParseResult:
    text = whole_text(text)                     # one JSON document
    src = Lines(path, text, options)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(path, exc.lineno, f"jitterdebugger results.json ({exc.msg})")
    cpus = doc.get("cpu") if isinstance(doc, dict) else None
    if not isinstance(cpus, dict) or not cpus:
        raise ImportFormatError(path, None, "a jitterdebugger object with a non-empty 'cpu' map")
    sysinfo = doc.get("sysinfo") if isinstance(doc.get("sysinfo"), dict) else {}
    res = sysinfo.get("resolution_in_ns", 1000)
    if not isinstance(res, int) or res <= 0:
        raise ImportFormatError(path, None, "sysinfo.resolution_in_ns: a positive integer",
                                repr(res))
    run = ParsedRun(source="jitterdebugger", path=path, line=1)
    at = member_lines(text, "cpu")
    for key, cpu in cpus.items():
        line = at.get(key)
        try:
            cid = int(key)
            hist = {int(k): int(v) for k, v in (cpu.get("histogram") or {}).items()}
            count, vmin, vmax = int(cpu["count"]), int(cpu["min"]), int(cpu["max"])
            avg = float(cpu["avg"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ImportFormatError(path, line, f"cpu {key!r}: count, min, max, avg and a "
                                    f"histogram of integers ({exc})") from None
        if any(n < 0 for n in hist.values()) or sum(hist.values()) > count:
            raise ImportFormatError(path, line, f"cpu {key}: histogram counts >= 0 adding "
                                    f"up to at most count ({count})")
        buckets: list[tuple[int, int | None, int]] = [
            (k * res, (k + 1) * res, n) for k, n in sorted(hist.items()) if n]
        over = count - sum(hist.values())
        if over:
            buckets.append(((max(hist, default=-1) + 1) * res, None, over))
        run.series[f"cpu{cid}"] = Series(buckets=buckets, resolution_ns=res, count=count,
                                         min_ns=vmin * res, max_ns=vmax * res,
                                         mean_ns=avg * res, line=line)
    run.provenance = {"results_version": doc.get("version"), "sysinfo": sysinfo,
                      "resolution_ns": res}
    return ParseResult([run], src.skipped)


def sniff_jitterdebugger(text: str) -> int:
    head = text[:50_000].lstrip()
    return 90 if head.startswith("{") and '"cpu"' in head and '"thread"' not in head else 0
