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
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator, Union

from irqlab.stats.fields import PERCENTILE_FIELDS

if TYPE_CHECKING:
    import numpy as np

NS_PER_US = 1_000

# (summary key, quantile) of each percentile, as importers match a source's percentiles.
PCT_KEYS: tuple[tuple[str, float], ...] = tuple(
    (f.key, f.quantile) for f in PERCENTILE_FIELDS if f.quantile is not None)


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
    """Numbered lines of a file with the --skip-bad bookkeeping in one place. Over a
    TextSource, iterating reads the file line by line (memory bounded by a line);
    ``lines`` (the list, for parsers that look ahead) reads it whole, bounded."""

    def __init__(self, path: str, text: Text, options: ParseOptions) -> None:
        self.path = path
        self._text = text
        self._lines: list[str] | None = text.splitlines() if isinstance(text, str) else None
        self.options = options
        self.skipped: list[ImportFormatError] = []

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = whole_text(self._text).splitlines()
        return self._lines

    def __iter__(self) -> Iterator[tuple[int, str]]:
        global _CURRENT_LINE
        numbered = (enumerate(self._lines, start=1) if self._lines is not None
                    else self._text.numbered_lines())          # type: ignore[union-attr]
        for i, line in numbered:
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


Parser = Callable[[str, "Text", ParseOptions], ParseResult]
Sniffer = Callable[[str], int]


# stream(source, options) -> the file's runs, raw samples left in it (SampleStream): a
# path is opened when they are read, a TextSource read then.
Streamer = Callable[["Path | TextSource", ParseOptions], ParseResult]


@dataclass(frozen=True)
class Format:
    """A registered import format: parse(path, text, options) and sniff(text) -> score
    (``text`` a str, or a TextSource read line by line); formats of raw-sample logs also
    stream(source, options) big files in bounded memory."""

    name: str
    parse: Parser
    sniff: Sniffer
    description: str
    stream: Streamer | None = None


# A format that needs its whole text (JSON, look-ahead tables) holds it in memory several
# times over (the text, its lines, the parsed values): past this it is refused with a
# line saying so rather than ending in MemoryError (issue 47). Formats read line by line
# (Lines over a TextSource) and raw-sample logs (tscdeadline) have no such limit.
MAX_TEXT_BYTES = 256 << 20
# What `import auto` reads to choose a format: every sniffer looks at the first 200 kB.
SNIFF_BYTES = 1 << 20
# A longer line is an error naming it: reading line by line holds one line at a time,
# and no format's line is anywhere near this long (issue 47: a file of zero bytes was
# one 1 GB "line").
MAX_LINE_BYTES = 1 << 20
_CHUNK_BYTES = MAX_LINE_BYTES          # so that only a line begun in a chunk before is longer
STDIN = "-"


def line_too_long(path: str, line: int) -> ImportFormatError:
    """The error of a line over MAX_LINE_BYTES (the one wording, whichever reader)."""
    return ImportFormatError(path, line, f"lines of at most {MAX_LINE_BYTES:,} bytes "
                             f"(this one has no line end within them: not a text log?)")


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file; ImportFormatError otherwise.
    Opened without blocking: a FIFO's open would wait for a writer, a device (/dev/zero)
    never ends. Piped input is read as ``-`` (standard input)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ImportFormatError(str(path), None, f"a readable file ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ImportFormatError(str(path), None, "a regular file (not a FIFO, device or "
                                "directory): save the output to a file first, or pipe it "
                                "in as - (standard input)")
    f = os.fdopen(fd, "rb")
    os.set_blocking(fd, True)
    return f


class TextSource:
    """A file's text from a stream: its head (for sniffing), its numbered lines one by
    one (memory bounded by MAX_LINE_BYTES), its raw chunks (raw-sample logs), or all of
    it (bounded by MAX_TEXT_BYTES). ``-`` is standard input, read once: the head read
    for sniffing is replayed before the rest. Read once in all (a stream)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        self._stream = (sys.stdin.buffer if self.name == STDIN
                        else open_regular(path))
        self._head: bytes | None = None
        self._used = False

    def close(self) -> None:
        if self._stream is not sys.stdin.buffer:
            self._stream.close()

    def __enter__(self) -> "TextSource":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, n: int) -> bytes:
        try:
            return self._stream.read(n)
        except OSError as exc:
            raise ImportFormatError(self.name, None,
                                    f"a readable file ({exc.strerror})") from None

    def head(self, n: int = SNIFF_BYTES) -> str:
        """The first ``n`` bytes as text (what `import auto` sniffs), kept for reading."""
        if self._head is None:
            self._head = self._read(n)
        return self._head[:n].decode("utf-8", errors="replace")

    def chunks(self) -> Iterator[bytes]:
        """The file's bytes, the head first, in chunks of up to 1 MiB."""
        if self._used:
            raise ImportFormatError(self.name, None, "input read only once (a stream)")
        self._used = True
        if self._head:
            yield self._head
        self._head = b""
        while chunk := self._read(_CHUNK_BYTES):
            yield chunk

    def numbered_lines(self) -> Iterator[tuple[int, str]]:
        """(number, line) as ``str.splitlines`` numbers the decoded text: each
        newline-terminated piece decoded and split on its own (the same for UTF-8)."""
        lineno = 0
        rest = b""
        for chunk in self.chunks():
            buf = rest + chunk if rest else chunk
            end = buf.rfind(b"\n") + 1
            # Only the first line can be longer than a chunk (it began in ``rest``): the
            # others lie within one chunk, which is MAX_LINE_BYTES.
            if end and buf.find(b"\n") + 1 > MAX_LINE_BYTES:
                raise line_too_long(self.name, lineno + 1)
            for text in buf[:end].decode("utf-8", errors="replace").splitlines():
                lineno += 1
                yield lineno, text
            rest = buf[end:]
            if len(rest) > MAX_LINE_BYTES:
                raise line_too_long(self.name, lineno + 1)
        for text in rest.decode("utf-8", errors="replace").splitlines():
            lineno += 1
            yield lineno, text

    def whole(self, limit: int = MAX_TEXT_BYTES) -> str:
        """All of the text; over ``limit`` bytes an ImportFormatError saying so."""
        parts, size = [], 0
        for chunk in self.chunks():
            size += len(chunk)
            if size > limit:
                raise ImportFormatError(self.name, None, f"at most {limit:,} bytes for this "
                                        f"format (it reads its input whole: split it, or "
                                        f"import a log read line by line)")
            parts.append(chunk)
        return b"".join(parts).decode("utf-8", errors="replace")


# A parser's input: the text itself, or a TextSource (read line by line through Lines).
Text = Union[str, TextSource]


def whole_text(text: str | TextSource) -> str:
    """The whole text of a parser's input (bounded by MAX_TEXT_BYTES when a stream)."""
    return text if isinstance(text, str) else text.whole()


def head_text(text: str | TextSource, n: int) -> str:
    """The first ``n`` bytes of a parser's input as text, without consuming it."""
    return text[:n] if isinstance(text, str) else text.head(n)


def read_text(path: Path, limit: int = MAX_TEXT_BYTES, cut: bool = False) -> str:
    """A regular file's text; undecodable bytes are replaced (a log is text, a stray byte
    is noise). Over ``limit`` bytes: ImportFormatError, or with ``cut`` its first
    ``limit`` bytes (enough to sniff)."""
    with TextSource(path) as source:
        return source.head(limit) if cut else source.whole(limit)
