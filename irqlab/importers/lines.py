"""Raw-sample log lines to batches of int64 latencies, in bounded memory.

A raw-sample log is millions of lines of one shape (b"latency: 1283\\n") among a few
others. `LineBatches` takes the file's bytes chunk by chunk and hands every line, with
its number, to the format's own rules (`slow_line`), except runs of lines of exactly
that shape, which the C line reader (irqlab/native/lines.c) turns into integers
directly when it is built. Both give the same values and line numbers: lines are cut
where ``str.splitlines`` cuts the decoded text (each newline-terminated piece is decoded
on its own, which is the same for UTF-8), so numbering matches a parser reading
``text.splitlines()``.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Callable, Iterator

from irqlab.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    # numpy on first use (irqlab/lazy.py): a refused input is refused before it loads.
    np = lazy_import("numpy")

from irqlab import native
from irqlab.importers.base import MAX_LINE_BYTES, line_too_long

DEFAULT_BATCH_SAMPLES = 1 << 20

# slow_line(lineno, text) -> the sample the line holds, or None.
SlowLine = Callable[[int, str], "int | None"]


class LineBatches:
    """Feed bytes, get full batches; `close` gives the rest. Counts lines as it goes."""

    def __init__(self, batch_samples: int, prefix: bytes, slow_line: SlowLine,
                 path: str = "") -> None:
        if batch_samples < 1:
            raise ValueError("batch_samples must be >= 1")
        self.path = path              # named by a line over MAX_LINE_BYTES
        self.prefix = prefix
        self.slow_line = slow_line
        self.lineno = 0               # lines read so far
        self.fast_samples = 0         # samples the C reader took
        self.fast_first = 0           # line of its first sample (0: none)
        self._out = np.empty(batch_samples, dtype=np.int64)
        self._filled = 0
        self._rest = b""              # an unterminated line carried to the next chunk
        self._consumed = ctypes.c_int64(0)

    def feed(self, chunk: bytes) -> Iterator[np.ndarray]:
        """Read the complete lines of `chunk` (after what earlier chunks left)."""
        buf = self._rest + chunk if self._rest else chunk
        end = buf.rfind(b"\n") + 1
        self._rest = buf[end:]
        if end and buf.find(b"\n") + 1 > MAX_LINE_BYTES:
            raise line_too_long(self.path, self.lineno + 1)
        yield from self._lines(buf, end)
        if len(self._rest) > MAX_LINE_BYTES:
            raise line_too_long(self.path, self.lineno + 1)

    def close(self) -> Iterator[np.ndarray]:
        """The last (unterminated) line and the last partial batch."""
        if self._rest:
            yield from self._slow(self._rest)
            self._rest = b""
        if self._filled:
            yield self._take()

    # ---- internals ------------------------------------------------------------

    def _lines(self, buf: bytes, end: int) -> Iterator[np.ndarray]:
        """Every line of buf[:end] (which ends with a newline)."""
        pos = 0
        handle = native.lib()
        # c_char_p points into the bytes object itself (no copy); buf outlives the calls.
        base = ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value or 0
        while pos < end:
            if handle is not None:
                got = handle.irq_parse_prefixed_ints(
                    base + pos, end - pos, self.prefix, len(self.prefix),
                    native.ptr(self._out) + 8 * self._filled, self._out.size - self._filled,
                    ctypes.addressof(self._consumed))
                if got > 0:
                    self.fast_first = self.fast_first or self.lineno + 1
                    self.lineno += got
                    self.fast_samples += got
                    self._filled += got
                    pos += self._consumed.value
                    if self._filled == self._out.size:
                        yield self._take()
                    continue
            nl = buf.find(b"\n", pos, end)
            yield from self._slow(buf[pos:nl + 1])
            pos = nl + 1

    def _slow(self, piece: bytes) -> Iterator[np.ndarray]:
        """Lines of one newline-terminated piece (or the unterminated last one)."""
        for text in piece.decode("utf-8", errors="replace").splitlines():
            self.lineno += 1
            value = self.slow_line(self.lineno, text)
            if value is not None:
                self._out[self._filled] = value
                self._filled += 1
                if self._filled == self._out.size:
                    yield self._take()

    def _take(self) -> np.ndarray:
        batch = self._out[:self._filled].copy()
        self._filled = 0
        return batch
