"""stress-ng `--cyclic` reports (one run per cyclic worker, keyed by its pid):

    stress-ng: info:  [22858] cyclic: sched SCHED_DEADLINE: 100000 ns delay, 2000 samples
    stress-ng: info:  [22858] cyclic:   mean: 24570.82 ns, mode: 25157 ns
    stress-ng: info:  [22858] cyclic:   min: 16934 ns, max: 63504 ns, std.dev. 3294.09
    stress-ng: info:  [22858] cyclic:   50.00%:      24786 ns
    stress-ng: info:  [22858] cyclic: latency distribution (1000 ns intervals):
    stress-ng: info:  [22858] cyclic: (for the first 64 buckets of 64)
    stress-ng: info:  [22858] cyclic:        16000          1

stress-ng computes its percentiles from its raw samples: they are kept as the source's
(`percentile_source: "source"`), the others it prints (25 %, 95.4 % …) in
`source_percentiles`. The distribution goes to the histograms table; when it shows only
the first buckets, the rest of the samples form the overflow bucket.
"""

from __future__ import annotations

import re
from typing import Any

from irqlab.importers.base import (Lines, ParsedRun, ParseOptions, ParseResult, Series,
                                   decimal_to_int, to_int)
from irqlab.importers.base import PCT_KEYS

_PREFIX = re.compile(r"^stress-ng:\s*\w+:\s*\[(\d+)\]\s*cyclic:\s*(.*)$")
_SCHED = re.compile(r"^sched (\S+): (\d+) ns delay, (\d+) samples$")
_MEAN = re.compile(r"^mean: ([\d.]+) ns, mode: (\d+) ns$")
_MINMAX = re.compile(r"^min: (\d+) ns, max: (\d+) ns, std\.dev\. ([\d.]+)$")
_PCT = re.compile(r"^([\d.]+)%:\s+(\d+) ns$")
_DIST = re.compile(r"^latency distribution \((\d+) ns intervals\):$")
_FIRST = re.compile(r"^\(for the first (\d+) buckets of (\d+)\)$")
_BUCKET = re.compile(r"^(\d+)\s+(\d+)$")
_KNOWN = re.compile(r"^(latency percentiles:|latency \(ns\)\s+frequency)$")
_PCT_BY_Q = {f"{q * 100:.2f}": key for key, q in PCT_KEYS}


class _Worker:
    def __init__(self, line: int) -> None:
        self.line = line
        self.fields: dict[str, Any] = {}
        self.pcts: dict[str, int] = {}
        self.interval: int | None = None
        self.buckets: list[tuple[int, int]] = []
        self.shown: tuple[int, int] | None = None


def parse_stress_ng(path: str, text: str, options: ParseOptions) -> ParseResult:
    src = Lines(path, text, options)
    workers: dict[int, _Worker] = {}
    for lineno, raw in src:
        m = _PREFIX.match(raw.strip())
        if not m:
            continue
        pid, body = to_int(m.group(1)), m.group(2).strip()
        w = workers.setdefault(pid, _Worker(lineno))
        if (g := _SCHED.match(body)):
            w.fields.update(policy=g.group(1), delay_ns=to_int(g.group(2)),
                            samples=to_int(g.group(3)))
        elif (g := _MEAN.match(body)):
            w.fields.update(mean=g.group(1), mode_ns=to_int(g.group(2)))
        elif (g := _MINMAX.match(body)):
            w.fields.update(min_ns=to_int(g.group(1)), max_ns=to_int(g.group(2)),
                            stddev=g.group(3))
        elif (g := _PCT.match(body)):
            w.pcts[g.group(1)] = to_int(g.group(2))
        elif (g := _DIST.match(body)):
            w.interval = to_int(g.group(1))
        elif (g := _FIRST.match(body)):
            w.shown = (to_int(g.group(1)), to_int(g.group(2)))
        elif (g := _BUCKET.match(body)) and w.interval:
            w.buckets.append((to_int(g.group(1)), to_int(g.group(2))))
        elif not _KNOWN.match(body) and body:
            src.bad(lineno, "a stress-ng cyclic report line (sched/mean/min/percentile/"
                            "distribution)", body)
    runs = [_run(src, pid, w) for pid, w in workers.items() if w.fields]
    if not runs:
        src.error(None, "stress-ng --cyclic report lines ('stress-ng: info: [PID] cyclic: "
                        "sched …')")
    return ParseResult(runs, src.skipped)


def _run(src: Lines, pid: int, w: _Worker) -> ParsedRun:
    f = w.fields
    run = ParsedRun(source="stress-ng-cyclic", path=src.path, line=w.line)
    run.period_ns = f.get("delay_ns")
    figures: dict[str, Any] = {"samples": f.get("samples"), "min_ns": f.get("min_ns"),
                               "max_ns": f.get("max_ns")}
    if "mean" in f:
        figures["mean_ns"] = decimal_to_int(f["mean"], 1)
    if "stddev" in f:
        figures["stddev_ns"] = decimal_to_int(f["stddev"], 1)
    others = {}
    for pct, val in w.pcts.items():
        key = _PCT_BY_Q.get(f"{float(pct):.2f}")
        if key:
            figures[key] = val
        else:
            others[f"{pct}%"] = val
    if w.pcts:
        figures["percentile_source"] = "source"
    if others:
        figures["source_percentiles"] = others
    if w.buckets and w.interval:
        buckets: list[tuple[int, int | None, int]] = [
            (lo, lo + w.interval, n) for lo, n in w.buckets if n]
        samples = f.get("samples")
        counted = sum(n for _lo, n in w.buckets)
        if samples is not None and samples > counted:
            top = max(lo for lo, _n in w.buckets) + w.interval
            buckets.append((top, None, samples - counted))
        run.series["all"] = Series(buckets=buckets, resolution_ns=1, count=samples,
                                   min_ns=f.get("min_ns"), max_ns=f.get("max_ns"),
                                   mean_ns=None)
    run.figures = figures
    run.provenance = {"pid": pid, "policy": f.get("policy"), "mode_ns": f.get("mode_ns"),
                      "bucket_ns": w.interval, "buckets_shown": w.shown}
    return run


def sniff_stress_ng(text: str) -> int:
    return 90 if re.search(r"\] cyclic: sched \S+: \d+ ns delay", text[:200_000]) else 0
