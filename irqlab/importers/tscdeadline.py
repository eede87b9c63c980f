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
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from irqlab.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    # numpy on first use (irqlab/lazy.py): a refused input is refused before it loads.
    np = lazy_import("numpy")

from irqlab.importers.base import (ImportFormatError, ParsedRun, ParseOptions, ParseResult,
                                   SampleStream, Text, TextSource, at_line, to_int,
                                   whole_text)
from irqlab.importers.lines import DEFAULT_BATCH_SAMPLES, LineBatches

_LAT = re.compile(r"^(?:hit max: (\d+) < )?latency: (-?\d+)\s*$")
_LAT_START = re.compile(r"\blatency:")
_HZ = re.compile(r"(?i)\b(?:tsc|tick)[ _-]?(?:(hz|khz|mhz)\s*[=:]\s*(\d+)|"
                 r"freq(?:uency)?\s*[=:]\s*(\d+)\s*(hz|khz|mhz))\b")
_SCALE = {"hz": 1, "khz": 1_000, "mhz": 1_000_000}
_BREAKMAX = re.compile(r"^breakmax=(\d+)")
# The line almost every line of the log is, up to its number (what lines.c reads).
_SAMPLE_PREFIX = b"latency: "


class _Rules:
    """The line rules of the format, shared by the text parser and the file stream."""

    def __init__(self, path: str, options: ParseOptions) -> None:
        self.path = path
        self.options = options
        self.first = 0
        self.log_hz: int | None = None
        self.breakmax: int | None = None
        self.hit: int | None = None
        self.samples = 0
        self.skipped: list[ImportFormatError] = []

    def line(self, lineno: int, raw: str) -> int | None:
        """The latency a line holds, else None (other lines are read for the rate)."""
        at_line(lineno)
        line = raw.strip()
        if (h := _HZ.search(line)):
            unit = (h.group(1) or h.group(4)).lower()
            self.log_hz = to_int(h.group(2) or h.group(3)) * _SCALE[unit]
        if (b := _BREAKMAX.match(line)):
            self.breakmax = to_int(b.group(1))
        if not _LAT_START.search(line) or line.startswith("#"):
            return None
        m = _LAT.match(line)
        if m is None:
            err = ImportFormatError(self.path, lineno, "'latency: N' (TSC cycles, an integer)",
                                    line.strip()[:120])
            if not self.options.skip_bad:
                raise err
            self.skipped.append(err)
            return None
        self.first = self.first or lineno
        if m.group(1):
            self.hit = lineno
        self.samples += 1
        return to_int(m.group(2))

    def finish(self, run: ParsedRun) -> None:
        """The run's line, tick rate and provenance, once every line was read."""
        if not self.samples:
            raise ImportFormatError(self.path, None,
                                    "'latency: N' lines from tscdeadline_latency")
        tick_hz = self.options.tick_hz or self.log_hz
        if not tick_hz:
            raise ImportFormatError(self.path, None, "a TSC rate: the log does not state "
                                    "it, pass --tick-hz HZ")
        run.line, run.tick_hz = self.first, tick_hz
        run.provenance = {"tick_hz_from": "--tick-hz" if self.options.tick_hz else "the log",
                          "breakmax": self.breakmax, "hit_max_line": self.hit,
                          "deadline_tick": "not printed by the test: a constant origin"}
        if self.options.tick_hz and self.log_hz and self.log_hz != self.options.tick_hz:
            run.notes.append(f"--tick-hz {self.options.tick_hz} overrides the log's "
                             f"{self.log_hz} Hz")


def parse_tscdeadline(path: str, text: Text, options: ParseOptions) -> ParseResult:
    text = whole_text(text)      # `irqlab import` streams instead (stream_tscdeadline)
    rules = _Rules(path, options)
    values = [v for lineno, raw in enumerate(text.splitlines(), start=1)
              if (v := rules.line(lineno, raw)) is not None]
    run = ParsedRun(source="tscdeadline", path=path, line=0)
    rules.finish(run)
    run.latency_tick = np.asarray(values, dtype=np.int64)
    return ParseResult([run], rules.skipped)


class _FileSamples(SampleStream):
    """The samples of a tscdeadline log, batch by batch: the plain 'latency: N' lines
    through the C line reader when it is built (irqlab/native/lines.c), every other line
    (and every line without it) through `_Rules`."""

    def __init__(self, source: Path | TextSource, rules: _Rules,
                 batch_samples: int) -> None:
        self.source = source          # a path is opened when the samples are read
        self.rules = rules
        self.batch_samples = batch_samples

    def batches(self) -> Iterator[np.ndarray]:
        reader = LineBatches(self.batch_samples, _SAMPLE_PREFIX, self.rules.line,
                             str(self.rules.path))
        if isinstance(self.source, TextSource):
            for chunk in self.source.chunks():
                yield from reader.feed(chunk)
        else:
            with TextSource(self.source) as source:
                for chunk in source.chunks():
                    yield from reader.feed(chunk)
        yield from reader.close()
        # The first sample line, whichever reader took it.
        self.rules.first = min((x for x in (self.rules.first, reader.fast_first) if x),
                               default=0)
        self.rules.samples += reader.fast_samples

    def finish(self, run: ParsedRun) -> None:
        self.rules.finish(run)


def stream_tscdeadline(source: Path | TextSource, options: ParseOptions,
                       batch_samples: int = DEFAULT_BATCH_SAMPLES) -> ParseResult:
    """The run of a tscdeadline log with its samples left in the file (`SampleStream`:
    a path is opened, a TextSource read, when they are stored); the skipped lines are in
    the result once the samples were read."""
    path = source.path if isinstance(source, TextSource) else source
    rules = _Rules(str(path), options)
    run = ParsedRun(source="tscdeadline", path=str(path), line=0)
    run.samples = _FileSamples(source, rules, batch_samples)
    return ParseResult([run], rules.skipped)


def sniff_tscdeadline(text: str) -> int:
    lines = text[:100_000].splitlines()
    hits = sum(1 for x in lines if _LAT.match(x.strip()))
    return 75 if hits >= 1 and hits * 2 >= sum(1 for x in lines if x.strip()) * 0.5 else 0
