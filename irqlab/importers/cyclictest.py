"""cyclictest (rt-tests) results: `-q` summary lines, `-h` histograms and `--json` files.

* `-q`: per thread `T: 0 (22465) P: 0 I:1000 C: 2987 Min: 17 Act: 65 Avg: 76 Max: 3768`
  (us): whole-run figures per thread, no distribution, so no percentile.
* `-h N`: one row per us bucket and a column per thread, then `# Total` (samples inside
  the histogram: the overflows come on top), `# Min/Avg/Max
  Latencies`, `# Histogram Overflows` and the overflow cycle numbers per thread; buckets
  go to the histograms table (series `thread<N>`), overflows as the overflow bucket.
* `--json`: per thread `cycles/min/max/avg` and (with `-h`) the non-empty buckets.
Latencies are us unless the command line shows `-N`/`--nsecs`. Avg in `-q`/`-h` output is
truncated to whole us by cyclictest and kept as printed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from irqlab.importers.base import (ImportFormatError, Lines, ParsedRun, ParseOptions,
                                   ParseResult, Series, Text, head_text, to_int,
                                   whole_text)
from irqlab.importers.jsonpos import member_lines

_T_LINE = re.compile(r"^T:\s*(\d+)\s*\(\s*(\d+)\)\s*P:\s*(\d+)\s*I:\s*(\d+)\s*C:\s*(\d+)\s*"
                     r"Min:\s*(-?\d+)\s*Act:\s*(-?\d+)\s*Avg:\s*(-?\d+)\s*Max:\s*(-?\d+)")
_T_START = re.compile(r"^T:\s*\d")
_HIST_ROW = re.compile(r"^(\d+)((?:\s+\d+)+)\s*$")
_HDR = re.compile(r"^# (Total|Min Latencies|Avg Latencies|Max Latencies|"
                  r"Histogram Overflows):((?:\s+-?\d+)*)\s*$")
_OVF_THREAD = re.compile(r"^# Thread (\d+):((?:\s+\d+)*)\s*(?:# \d+ others)?\s*$")
_HIST_SIZE = re.compile(r"(?:^|\s)(?:-h\s*|--histogram[= ]|-H\s*|--histofall[= ])(\d+)")


def _unit(cmdline: str | None) -> int:
    if cmdline and re.search(r"(?:^|\s)(?:-N|--nsecs)(?:\s|$)", cmdline):
        return 1
    return 1000


def _parse_json(src: Lines, text: str) -> ParseResult:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(src.path, exc.lineno, f"cyclictest --json output ({exc.msg})")
    threads = doc.get("thread") if isinstance(doc, dict) else None
    if not isinstance(threads, dict) or not threads:
        raise ImportFormatError(src.path, None, "a cyclictest --json object with a "
                                                "non-empty 'thread' map")
    cmdline = doc.get("cmdline:") or doc.get("cmdline")
    unit = _unit(cmdline if isinstance(cmdline, str) else None)
    m = _HIST_SIZE.search(cmdline) if isinstance(cmdline, str) else None
    run = ParsedRun(source="cyclictest", path=src.path, line=1)
    at = member_lines(text, "thread")
    for tid, th in sorted(threads.items(), key=lambda kv: _int_key(src, kv[0])):
        line = at.get(tid)
        try:
            hist = {int(k): int(v) for k, v in (th.get("histogram") or {}).items()}
            cycles, vmin, vmax = int(th["cycles"]), int(th["min"]), int(th["max"])
            avg = float(th["avg"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ImportFormatError(src.path, line, f"thread {tid}: cycles, min, max, avg "
                                    f"and an optional histogram of integers ({exc})")
        buckets: list[tuple[int, int | None, int]] = [
            (k * unit, (k + 1) * unit, n) for k, n in sorted(hist.items()) if n]
        extra: dict[str, Any] = {"cpu": th.get("cpu")}
        if hist:
            over = cycles - sum(hist.values())
            if over < 0:
                raise ImportFormatError(src.path, line, f"thread {tid}: histogram counts "
                                        f"<= cycles ({sum(hist.values())} > {cycles})")
            if over:
                lower = to_int(m.group(1)) if m else max(hist) + 1
                buckets.append((lower * unit, None, over))
        series = Series(buckets=buckets, resolution_ns=unit, count=cycles,
                        min_ns=vmin * unit, max_ns=vmax * unit, mean_ns=avg * unit,
                        extra=extra, line=line)
        run.series[f"thread{tid}"] = series
    run.provenance = {"shape": "json", "cmdline": cmdline,
                      "rt_test_version": doc.get("rt_test_version:"),
                      "start_time": doc.get("start_time"), "end_time": doc.get("end_time"),
                      "sysinfo": doc.get("sysinfo"), "unit_ns": unit}
    run.host = host_facts(doc.get("sysinfo"))
    return ParseResult([run], src.skipped)


# cyclictest --json's sysinfo is uname(2) plus "realtime" (rt-tests src/lib/rt-utils.c,
# rt_write_json: 1 when /sys/kernel/realtime says so); named as irqlab's own host facts
# (irqlab.runner.hostinfo.host_info) so show, compare and the API read them alike.
_UNAME_FACTS = (("nodename", "hostname"), ("release", "kernel"),
                ("version", "kernel_version"), ("machine", "machine"))


def host_facts(sysinfo: Any) -> dict[str, Any]:
    """The host facts a cyclictest --json sysinfo object carries; absent ones stay out
    (shown "unknown"), never guessed."""
    if not isinstance(sysinfo, dict):
        return {}
    out: dict[str, Any] = {key: sysinfo[src] for src, key in _UNAME_FACTS
                           if isinstance(sysinfo.get(src), str) and sysinfo[src]}
    model = _preempt_model(sysinfo.get("realtime"), out.get("kernel_version"))
    if model:
        out["preempt_model"] = model
    return out


def _preempt_model(realtime: Any, version: str | None) -> str | None:
    # As hostinfo.preempt_model reads a live host, minus what only the host itself can
    # tell (debugfs's PREEMPT_DYNAMIC mode, /boot/config): the tag the kernel build puts
    # in `uname -v` (scripts/mkcompile_h), or the RT flag.
    tags = (version or "").split()
    if realtime == 1 or "PREEMPT_RT" in tags:
        return "rt"
    if "PREEMPT_DYNAMIC" in tags:
        return "dynamic (mode unknown: not in cyclictest's sysinfo)"
    if "PREEMPT" in tags:
        return "full"
    return None


def _int_key(src: Lines, key: str) -> int:
    try:
        return int(key)
    except ValueError:
        raise ImportFormatError(src.path, None, f"numeric thread ids, got {key!r}") from None


def _parse_text(src: Lines) -> ParseResult:
    unit = 1000
    rows: dict[int, list[int]] = {}
    hdr: dict[str, list[int]] = {}
    ovf_cycles: dict[int, list[int]] = {}
    tlines: dict[int, tuple[int, list[int]]] = {}
    in_hist = False
    for lineno, raw in src:
        line = raw.strip()
        if line == "# Histogram":
            in_hist = True
            continue
        if in_hist and (m := _HIST_ROW.match(line)):
            rows[to_int(m.group(1))] = [to_int(x) for x in m.group(2).split()]
            continue
        if (m := _HDR.match(line)):
            hdr[m.group(1)] = [to_int(x) for x in m.group(2).split()]
            continue
        if (m := _OVF_THREAD.match(line)):
            ovf_cycles[to_int(m.group(1))] = [to_int(x) for x in m.group(2).split()]
            continue
        if _T_START.match(line):
            m = _T_LINE.match(line)
            if m is None:
                src.bad(lineno, "a cyclictest line 'T: N (TID) P: N I: N C: N Min: N "
                                "Act: N Avg: N Max: N'", line)
                continue
            vals = [to_int(x) for x in m.groups()]
            tlines[vals[0]] = (lineno, vals)   # the last refresh of a thread wins
            continue
        if in_hist and line and not line.startswith("#"):
            src.bad(lineno, "a histogram row: bucket then one count per thread", line)
    if rows:
        return ParseResult([_hist_run(src, rows, hdr, ovf_cycles, unit)], src.skipped)
    if tlines:
        run = ParsedRun(source="cyclictest", path=src.path, line=min(v[0] for v in tlines.values()))
        for tid, (_ln, v) in sorted(tlines.items()):
            _t, pid, prio, interval, cycles, vmin, _act, avg, vmax = v
            run.series[f"thread{tid}"] = Series(
                buckets=[], resolution_ns=unit, count=cycles, min_ns=vmin * unit,
                max_ns=vmax * unit, mean_ns=avg * unit,
                extra={"tid": pid, "priority": prio, "interval_us": interval})
        intervals = {v[1][3] for v in tlines.values()}
        if len(intervals) == 1:
            run.period_ns = intervals.pop() * 1000
        run.notes.append("cyclictest -q gives per-thread min/avg/max only: no percentile")
        run.provenance = {"shape": "summary lines", "unit_ns": unit,
                          "avg_rounding": "truncated to whole us by cyclictest"}
        return ParseResult([run], src.skipped)
    src.error(None, "cyclictest output: 'T: …' summary lines, a '# Histogram' block or a "
                    "--json object")
    raise AssertionError("unreachable")


def _hist_run(src: Lines, rows: dict[int, list[int]], hdr: dict[str, list[int]],
              ovf_cycles: dict[int, list[int]], unit: int) -> ParsedRun:
    width = {len(v) for v in rows.values()}
    if len(width) != 1:
        src.error(None, "every histogram row to have the same number of threads, got "
                        f"{sorted(width)}")
    nthreads = width.pop()
    for key, vals in hdr.items():
        if len(vals) != nthreads:
            src.error(None, f"'# {key}:' to list {nthreads} threads", " ".join(map(str, vals)))
    size = max(rows) + 1
    run = ParsedRun(source="cyclictest", path=src.path, line=1)
    for t in range(nthreads):
        buckets: list[tuple[int, int | None, int]] = [
            (k * unit, (k + 1) * unit, v[t]) for k, v in sorted(rows.items()) if v[t]]
        over = hdr.get("Histogram Overflows", [0] * nthreads)[t]
        if over:
            buckets.append((size * unit, None, over))
        # "# Total" counts the samples inside the histogram; overflows come on top.
        total = hdr["Total"][t] + over if "Total" in hdr else None

        def pick(key: str) -> int | None:
            return hdr[key][t] * unit if key in hdr else None
        extra: dict[str, Any] = {}
        if t in ovf_cycles:
            extra["overflow_cycles"] = ovf_cycles[t]
        counted = sum(n for _l, _h, n in buckets)
        if total is not None and counted != total:
            extra["count_mismatch"] = {"total_plus_overflows": total, "in_buckets": counted}
        run.series[f"thread{t}"] = Series(
            buckets=buckets, resolution_ns=unit, count=total, min_ns=pick("Min Latencies"),
            max_ns=pick("Max Latencies"),
            mean_ns=hdr["Avg Latencies"][t] * unit if "Avg Latencies" in hdr else None,
            extra=extra)
    run.provenance = {"shape": "histogram", "buckets": size, "unit_ns": unit,
                      "avg_rounding": "truncated to whole us by cyclictest"}
    return run


def parse_cyclictest(path: str, text: Text, options: ParseOptions) -> ParseResult:
    if head_text(text, 4096).lstrip().startswith("{"):
        text = whole_text(text)                   # one JSON document
        return _parse_json(Lines(path, text, options), text)
    return _parse_text(Lines(path, text, options))   # line by line


def sniff_cyclictest(text: str) -> int:
    head = text[:100_000]
    if head.lstrip().startswith("{"):
        return 90 if '"thread"' in head else 0
    if "# Histogram" in head and "# Total:" in text:
        return 90
    if any(_T_LINE.match(x.strip()) for x in head.splitlines()[:200]):
        return 85
    return 0
