"""Zephyr rt_eval windows and the Linux rt_eval_tmu driver's kernel-log lines (seeds 000/001).

Both print one line per 1024-sample window, raw counter ticks first, then ns:

    Mean: 600 (18000 ns) stddev: 3737 (112110 ns) above thr: 0% [265 (7950 ns) - 66955
    (2008650 ns)] global [265 (7950 ns) 66955 (2008650 ns)]          (newer Zephyr app)
    Mean: 31 (930 ns) stddev: 0 (0 ns)                                (older Zephyr app)
    [ 41.563904] rt_eval_tmu e6fc0000.tmu: Mean: 173 (5190 ns) stddev: 15 (450 ns)
    min: 125 (3750 ns) max: 276102 (8283060 ns)                       (Linux driver)

Facts from the app's source that the log does not restate, and how they are used:
* a window is HISTORY_SIZE = 1024 samples (overridable with --window-samples);
* "above thr" is `count * 100 / 1024` in integer arithmetic (truncated), so "0%" means
  0..10 samples: stored as a bound, never as a count;
* Mean and stddev are truncated to whole ticks and ns = ticks * (10^9 / freq truncated to
  an integer), so the printed ns are kept as printed and the ticks beside them.
The driver's min/max are since-boot extremes, not per-window ones: a 276102-tick sample
inside a window whose stddev is 8 ticks is arithmetically impossible.
"""

from __future__ import annotations

import math
import re
from typing import Any

from irqlab.importers.base import (Lines, ParsedRun, ParseOptions, ParseResult, at_line,
                                   strip_quote, to_int)

DEFAULT_WINDOW_SAMPLES = 1024
_MAX_JOIN = 8   # extra physical lines one record may be wrapped over (mail archives)

_TV = r"(\d+) \((\d+) ns\)"   # "265 (7950 ns)": ticks then ns
_RECORD = re.compile(
    rf"Mean: {_TV} stddev: {_TV}"
    rf"(?: min: {_TV} max: {_TV}"
    rf"| above thr: (\d+)% \[{_TV} - {_TV}\](?: global \[{_TV} {_TV}\])?)?")
_PREFIX = re.compile(
    r"^\s*(?:\[\s*(?P<ts>\d+\.\d+)\]\s*)?(?:\(d\d+\)\s*)?"
    r"(?:(?P<driver>[\w.-]+)\s+(?P<dev>[\w.:-]+):\s*)?$")
_MEAN_AT = re.compile(r"\bMean:\s")
_CONT = re.compile(r"^\s*(?:above thr:|min:|global \[)")
_FREQ = re.compile(r"Counter freq is (\d+) Hz\. Period is (\d+) ns")
_ALARM = re.compile(r"Set alarm in \d+ sec \((\d+) ticks\)")
_BANNER = re.compile(r"\*\*\* Booting Zephyr|^\s*RT Eval app\s*$")


def _norm(text: str) -> str:
    return " ".join(text.split())


def _above_bound(pct: int, n: int) -> tuple[int, int]:
    """Counts a truncated integer percentage of n can stand for: floor(100*a/n) == pct."""
    lo = math.ceil(pct * n / 100)
    hi = ((pct + 1) * n - 1) // 100
    return max(0, lo), min(n, hi)


class _Record:
    """One matched window line: its numbers and where it came from."""

    def __init__(self, m: re.Match[str], line: int, ts: float | None, driver: str | None,
                 dev: str | None) -> None:
        at_line(line)           # an out-of-range number is reported at this line
        g = [None if x is None else to_int(x) for x in m.groups()]
        self.line, self.ts, self.driver, self.dev = line, ts, driver, dev
        self.mean, self.stddev = (g[0], g[1]), (g[2], g[3])
        self.dmin = (g[4], g[5]) if g[4] is not None else None
        self.dmax = (g[6], g[7]) if g[6] is not None else None
        self.pct = g[8]
        self.wmin = (g[9], g[10]) if g[9] is not None else None
        self.wmax = (g[11], g[12]) if g[11] is not None else None
        self.gmin = (g[13], g[14]) if g[13] is not None else None
        self.gmax = (g[15], g[16]) if g[15] is not None else None


def _match_at(lines: list[str], i: int, start: str) -> tuple[re.Match[str] | None, int]:
    """Match the record starting at physical line i (0-based), joining wrapped lines.

    Returns the longest match over at most _MAX_JOIN extra lines and how many physical
    lines it used. A complete record only takes the next line when that line starts like
    one of its optional parts (older lines end after stddev, some omit "global").
    """
    text = _norm(start)
    best = _RECORD.fullmatch(text)
    best_used = 1 if best else 0
    used = 1
    while used <= _MAX_JOIN and i + used < len(lines):
        nxt = strip_quote(lines[i + used])
        if not nxt.strip() or _MEAN_AT.search(nxt):
            break
        if _RECORD.fullmatch(text) and not _CONT.match(nxt):
            break
        text = _norm(text + " " + nxt)
        used += 1
        m = _RECORD.fullmatch(text)
        if m:
            best, best_used = m, used
    return best, max(best_used, 1)


def _window(rec: _Record, index: int, n: int, assumed: bool, t0: float | None,
            window_s: float | None) -> dict[str, Any]:
    extra: dict[str, Any] = {"line": rec.line, "mean_tick": rec.mean[0],
                             "stddev_tick": rec.stddev[0]}
    if assumed:
        extra["samples_assumed"] = True
    w: dict[str, Any] = {"index": index, "samples": n, "mean_ns": rec.mean[1],
                         "stddev_ns": rec.stddev[1], "min_ns": None, "max_ns": None,
                         "global_min_ns": None, "global_max_ns": None}
    if rec.wmin and rec.wmax:
        w["min_ns"], w["max_ns"] = rec.wmin[1], rec.wmax[1]
        extra.update(min_tick=rec.wmin[0], max_tick=rec.wmax[0])
    gmin, gmax = rec.gmin or rec.dmin, rec.gmax or rec.dmax
    if gmin and gmax:
        w["global_min_ns"], w["global_max_ns"] = gmin[1], gmax[1]
        extra.update(global_min_tick=gmin[0], global_max_tick=gmax[0])
    # rt_eval prints a truncated percentage, not a count: the count is unknown (NULL) and
    # extra keeps the printed percentage and the [lo, hi] range of counts it allows.
    extra["above_threshold_exact"] = False
    w["above_threshold"] = None
    if rec.pct is not None:
        lo, hi = _above_bound(rec.pct, n)
        extra.update(above_threshold_pct=rec.pct, above_threshold_bound=[lo, hi])
    else:
        extra["above_threshold_bound"] = None
    if rec.ts is not None and t0 is not None:
        w["start_s"] = round(rec.ts - t0, 6)
        extra["printed_at_s"] = rec.ts
        extra["start_s_is"] = "log time of the line (window end), from the first line"
    elif window_s is not None:
        w["start_s"] = index * window_s
        extra["start_s_is"] = "index x samples x alarm period (derived)"
    else:
        w["start_s"] = math.nan
    w["extra"] = extra
    return w


class _RunBuilder:
    def __init__(self, fmt: str, path: str, options: ParseOptions) -> None:
        self.fmt, self.path, self.options = fmt, path, options
        self.records: list[_Record] = []
        self.freq: int | None = None
        self.period_printed_ns: int | None = None
        self.alarm_ticks: int | None = None
        self.devices: set[str] = set()

    def build(self) -> ParsedRun:
        n = self.options.window_samples or DEFAULT_WINDOW_SAMPLES
        assumed = self.options.window_samples is None
        tick_hz = self.freq or self.options.tick_hz
        window_s = None
        if self.alarm_ticks and tick_hz:
            window_s = n * self.alarm_ticks / tick_hz
        t0 = self.records[0].ts
        windows = [_window(r, i, n, assumed, t0, window_s) for i, r in enumerate(self.records)]
        run = ParsedRun(source=self.fmt, path=self.path, line=self.records[0].line,
                        tick_hz=tick_hz, windows=windows)
        if self.alarm_ticks and tick_hz:
            run.period_ns = round(self.alarm_ticks * 1_000_000_000 / tick_hz)
        run.provenance = {
            "window_samples": n,
            "window_samples_from": ("--window-samples" if not assumed else
                                    "rt_eval HISTORY_SIZE (1024); not stated in the log"),
            "ns_as_printed": True,
            "ns_per_tick_printed": self.period_printed_ns,
            "mean_stddev_rounding": "truncated to whole ticks by the source",
        }
        if self.devices:
            run.provenance["devices"] = sorted(self.devices)
        if self.fmt == "rt-eval-tmu":
            run.notes.append("rt_eval_tmu min/max are since-boot extremes: stored as "
                             "global min/max, per-window min/max are absent")
        if any(r.pct is not None for r in self.records):
            run.notes.append("above threshold: the source prints an integer (truncated) "
                             "percentage of the window, kept as a bound on the count")
        return run


def _restarted(prev: _Record, rec: _Record) -> bool:
    """Since-boot extremes can only widen: if they narrow, the target restarted; a line
    of another generation (with/without above thr, min/max) is another build's run."""
    if (prev.pct is None) != (rec.pct is None) or (prev.dmin is None) != (rec.dmin is None):
        return True
    pmax, rmax = prev.gmax or prev.dmax, rec.gmax or rec.dmax
    pmin, rmin = prev.gmin or prev.dmin, rec.gmin or rec.dmin
    return bool(pmax and rmax and rmax[0] < pmax[0] or pmin and rmin and rmin[0] > pmin[0])


def _parse(fmt: str, path: str, text: str, options: ParseOptions) -> ParseResult:
    src = Lines(path, text, options)
    raw = [strip_quote(x) for x in src.lines]
    runs: list[ParsedRun] = []
    cur = _RunBuilder(fmt, path, options)

    def close() -> None:
        nonlocal cur
        if cur.records:
            runs.append(cur.build())
        freq, per = cur.freq, cur.period_printed_ns
        cur = _RunBuilder(fmt, path, options)
        cur.freq, cur.period_printed_ns = freq, per

    i = 0
    while i < len(raw):
        line = raw[i]
        if _BANNER.search(line) and fmt == "rt-eval":
            close()
        if (m := _FREQ.search(line)):
            if cur.records:
                close()
            cur.freq, cur.period_printed_ns = to_int(m.group(1)), to_int(m.group(2))
        if (m := _ALARM.search(line)):
            cur.alarm_ticks = to_int(m.group(1))
        at = _MEAN_AT.search(line)
        pre = _PREFIX.match(line[:at.start()]) if at else None
        if not at or not pre:
            i += 1
            continue
        is_driver = pre.group("driver") is not None
        if is_driver != (fmt == "rt-eval-tmu"):
            i += 1   # the other generation's line (a mail thread quotes both)
            continue
        m, used = _match_at(raw, i, line[at.start():])
        if m is None:
            src.bad(i + 1, "an rt_eval window line 'Mean: T (N ns) stddev: T (N ns) "
                           "[above thr: P% [T (N ns) - T (N ns)] [global [...]]]'", line)
            i += 1
            continue
        ts = float(pre.group("ts")) if pre.group("ts") else None
        if ts is not None and cur.records and cur.records[-1].ts is not None \
                and ts < cur.records[-1].ts:
            close()   # kernel time went backwards: the board rebooted, a new run
        rec = _Record(m, i + 1, ts, pre.group("driver"), pre.group("dev"))
        if cur.records and _restarted(cur.records[-1], rec):
            close()
        if rec.dev:
            cur.devices.add(f"{rec.driver} {rec.dev}")
        cur.records.append(rec)
        i += used
    close()
    if not runs:
        src.error(None, f"at least one {fmt} window line ('Mean: T (N ns) stddev: ...'"
                        + (" after 'rt_eval_tmu DEVICE:'" if fmt == "rt-eval-tmu" else "")
                        + ")")
    return ParseResult(runs, src.skipped)


def parse_rt_eval(path: str, text: str, options: ParseOptions) -> ParseResult:
    return _parse("rt-eval", path, text, options)


def parse_rt_eval_tmu(path: str, text: str, options: ParseOptions) -> ParseResult:
    return _parse("rt-eval-tmu", path, text, options)


def _score(text: str, driver: bool) -> int:
    hits = 0
    for line in text.splitlines()[:2000]:
        line = strip_quote(line)
        at = _MEAN_AT.search(line)
        pre = _PREFIX.match(line[:at.start()]) if at else None
        if pre and (pre.group("driver") is not None) == driver and "stddev:" in line:
            hits += 1
    return min(100, 50 + hits) if hits else 0


def sniff_rt_eval(text: str) -> int:
    return _score(text, driver=False)


def sniff_rt_eval_tmu(text: str) -> int:
    # Ties go to the driver format only when its lines are there at all.
    score = _score(text, driver=True)
    return score + 1 if score else 0
