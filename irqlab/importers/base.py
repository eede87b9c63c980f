"""What every importer returns, its error type, and the line-level helpers they share.

An importer turns one file into one or more `ParsedRun`s at the resolution the source
had: raw samples, histogram buckets, window summaries, or only whole-run figures.
Nothing is estimated here; `irqlab.importers.summary` derives what can be derived and
leaves the rest None.
"""

from __future__ import annotations

import os
import re
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np

NS_PER_US = 1_000


class ImportFormatError(Exception):
    """A file does not hold what its format promises: names file, line and expectation."""

    def __init__(self, path: str, line: int | None, expected: str, got: str | None = None):
        self.path, self.line, self.expected, self.got = path, line, expected, got
        where = f"{path}:{line}" if line is not None else path
        detail = f"; got {got!r}" if got is not None else ""
        super().__init__(f"{where}: expected {expected}{detail}")


# A histogram bucket: [lower_ns, upper_ns) and its count; upper_ns None = overflow.
Bucket = tuple[int, int | None, int]


@dataclass
class Series:
    """One histogram series (a thread, a CPU, IRQ or thread context of a CPU)."""

    buckets: list[Bucket]
    resolution_ns: int          # smallest step the source could record
    # Figures the source printed beside the buckets (ns), kept as given.
    count: int | None = None
    min_ns: int | None = None
    max_ns: int | None = None
    mean_ns: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = None     # where the series starts in the file, when known


class SampleStream(ABC):
    """The raw samples of one run, read from its file batch by batch (bounded memory).

    `batches` reads the file once; what needs every line (the tick rate a log states at
    its end, where the samples started, malformed lines --skip-bad let through) is
    final only when it is exhausted, and `finish` then completes the run or raises
    ImportFormatError. The writer stores each batch as it comes, in one transaction, so
    a bad line anywhere still means nothing lands.
    """

    @abstractmethod
    def batches(self) -> Iterator[np.ndarray]:
        """Latencies in ticks (int64 arrays), in file order."""

    @abstractmethod
    def finish(self, run: ParsedRun) -> None:
        """Fill in what the whole file told (tick_hz, line, provenance, notes)."""


@dataclass
class ParsedRun:
    """One run read from a file, before it is stored."""

    source: str                          # import format name
    path: str
    line: int                            # first line the run came from
    name: str | None = None              # name the source gives (tbm row label ...)
    kind: str = "latency"
    tick_hz: int | None = None
    period_ns: int | None = None
    threshold_ns: int | None = None
    windows: list[dict[str, Any]] = field(default_factory=list)
    series: dict[str, Series] = field(default_factory=dict)
    latency_tick: np.ndarray | None = None   # raw samples, in ticks of tick_hz
    # Exact probe records (RECORD_DTYPE) when the source has them (irqlab's own console
    # frames): stored as they are instead of being rebuilt from latency_tick.
    records: np.ndarray | None = None
    # Raw samples still in the file (`irqlab import` streams them into the store); set
    # instead of latency_tick by the formats that stream (Format.stream).
    samples: SampleStream | None = None
    # Whole-run figures the source states (ns / counts); keys as in the run summary.
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    # Host facts the source recorded, under irqlab.runner.hostinfo's keys (hostname,
    # kernel ...): stored as the run's metadata.host, the provenance record's host.
    host: dict[str, Any] = field(default_factory=dict)
    # The probe's own facts when the source is irqlab's probe (its console frames):
    # stored as the run's metadata.probe, as a live run's (the reference counter that
    # maps its samples onto a Xen on Arm trace: irqlab.explain.xen).
    probe: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParseResult:
    """The runs of one file and the malformed lines --skip-bad let through."""

    runs: list[ParsedRun]
    skipped: list[ImportFormatError] = field(default_factory=list)


@dataclass
class ParseOptions:
    tick_hz: int | None = None
    skip_bad: bool = False
    window_samples: int | None = None


# Mail quoting ("> ", ">> ", "> >> "), kernel timestamps and Xen console prefixes: what a
# pasted log line may carry before the tool's own text.
_QUOTE = re.compile(r"^(?:\s*>)+ ?")


def strip_quote(text: str) -> str:
    """A line without mail quote marks."""
    return _QUOTE.sub("", text, count=1)


# The line a Lines iterator handed out last: where an unanticipated error is reported
# (irqlab.importers.parse_text). Imports run one at a time in a process.
_CURRENT_LINE: int | None = None


def current_line() -> int | None:
    return _CURRENT_LINE


def reset_line() -> None:
    global _CURRENT_LINE
    _CURRENT_LINE = None


# What a parser raises on a shape no rule anticipated.
PARSE_ERRORS = (ValueError, TypeError, KeyError, IndexError, OverflowError, ArithmeticError,
                AttributeError, RecursionError)


def located_error(fmt: str, path: str, exc: BaseException) -> ImportFormatError:
    """A parser's unanticipated error as a clean one, located at the line being read
    when it happened, never a traceback."""
    text_exc = str(exc)
    if len(text_exc) > 160:
        text_exc = text_exc[:160] + "…"
    return ImportFormatError(path, current_line(), f"{fmt} input ({type(exc).__name__}: "
                             f"{text_exc})")


def at_line(line: int) -> None:
    """Say which line is being read, for parsers that do not iterate with Lines."""
    global _CURRENT_LINE
    _CURRENT_LINE = line


class Lines:
    """Numbered lines of a file with the --skip-bad bookkeeping in one place."""

    def __init__(self, path: str, text: str, options: ParseOptions) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.options = options
        self.skipped: list[ImportFormatError] = []

    def __iter__(self) -> Iterator[tuple[int, str]]:
        global _CURRENT_LINE
        for i, line in enumerate(self.lines, start=1):
            _CURRENT_LINE = i
            yield i, line

    def bad(self, line: int, expected: str, got: str) -> None:
        """A malformed record: raise, or count it when --skip-bad was given."""
        err = ImportFormatError(self.path, line, expected, got.strip()[:120])
        if not self.options.skip_bad:
            raise err
        self.skipped.append(err)

    def error(self, line: int | None, expected: str, got: str | None = None) -> None:
        """A file-level problem --skip-bad cannot fix (nothing usable at all)."""
        raise ImportFormatError(self.path, line, expected, got)


# Parsed integers beyond this are refused where they are read (ValueError -> a located
# error): nothing an importer stores needs more, and huge digit runs stay cheap.
MAX_PARSED = 10**18


def _bounded(value: int, text: str) -> int:
    if not -MAX_PARSED <= value <= MAX_PARSED:
        shown = text if len(text) <= 30 else text[:30] + "…"
        raise ValueError(f"number {shown} is out of range (at most {MAX_PARSED:.0e})")
    return value


def to_int(text: str) -> int:
    t = text.strip()
    if len(t.lstrip("+-0")) > 19:
        return _bounded(10 * MAX_PARSED + 1, t)
    return _bounded(int(t), t)


def decimal_to_int(text: str, scale: int) -> int:
    """'61.443' * 1000 -> 61443 from the decimal digits (no float rounding); finer
    digits round half away from zero."""
    sign = -1 if text.startswith("-") else 1
    whole, _, frac = text.lstrip("+-").partition(".")
    if len(whole.lstrip("0")) > 19 or not (whole + frac).isascii():
        raise ValueError(f"number {text[:30]!r} is out of range")
    frac = frac[:30]            # finer digits than 30 change nothing but the time
    digits = len(str(scale)) - 1          # scale is a power of ten
    head, tail = (frac + "0" * digits)[:digits], frac[digits:]
    value = int(whole or "0") * scale + (int(head) if head else 0)
    if tail and int(tail[0]) >= 5:
        value += 1
    return _bounded(sign * value, text)


def us_to_ns(text: str) -> int:
    """'61.443' (us) -> 61443 ns."""
    return decimal_to_int(text, NS_PER_US)


Parser = Callable[[str, str, ParseOptions], ParseResult]
Sniffer = Callable[[str], int]


# stream(path, options) -> the file's runs, raw samples left in the file (SampleStream).
Streamer = Callable[[Path, ParseOptions], ParseResult]


@dataclass(frozen=True)
class Format:
    """A registered import format: parse(path, text, options) and sniff(text) -> score;
    formats of raw-sample logs also stream(path, options) big files in bounded memory."""

    name: str
    parse: Parser
    sniff: Sniffer
    description: str
    stream: Streamer | None = None


# A format that parses its whole text holds it in memory several times over (the text,
# its lines, the parsed values): past this it is refused with a line saying so rather
# than ending in MemoryError (issue 47). Raw-sample logs stream (tscdeadline): no limit.
MAX_TEXT_BYTES = 256 << 20
# What `import auto` reads to choose a format: every sniffer looks at the first 200 kB.
SNIFF_BYTES = 1 << 20


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file; ImportFormatError otherwise.
    Opened without blocking: a FIFO's open would wait for a writer, a device (/dev/zero)
    never ends."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ImportFormatError(str(path), None, f"a readable file ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ImportFormatError(str(path), None, "a regular file (not a FIFO, device or "
                                "directory): save the output to a file first")
    return os.fdopen(fd, "rb")


def read_text(path: Path, limit: int = MAX_TEXT_BYTES, cut: bool = False) -> str:
    """A regular file's text; undecodable bytes are replaced (a log is text, a stray byte
    is noise). Over ``limit`` bytes: ImportFormatError, or with ``cut`` its first
    ``limit`` bytes (enough to sniff)."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit and not cut:
            raise ImportFormatError(str(path), None, f"a file of at most {limit:,} bytes "
                                    f"for this format (it holds {size:,}: split it, or "
                                    f"import a raw-sample log, which streams)")
        try:
            # a regular file's size is known: read() sizes its buffer by it, where
            # read(limit) would reserve the whole limit first
            data = f.read() if size <= limit else f.read(limit)
        except OSError as exc:
            raise ImportFormatError(str(path), None,
                                    f"a readable file ({exc.strerror})") from None
    return data[:limit].decode("utf-8", errors="replace")
