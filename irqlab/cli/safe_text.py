"""Foreign text (run names, file names, messages) made safe for a terminal.

A run name is data: one holding ``ESC ] 0; … BEL`` would retitle the terminal, ``ESC [2J``
clear it. Human output shows every control character escaped (``\\x1b``); JSON output keeps
the exact text (json escapes controls itself).
"""

from __future__ import annotations

import re

# C0 controls but newline, DEL, C1 controls, and the Unicode line/paragraph separators
# and bidi overrides some terminals act on.
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, keep_newlines: bool = True) -> str:
    """``text`` with control characters shown escaped (newlines kept unless told)."""
    out = _CONTROL.sub(_escape, str(text))
    return out if keep_newlines else out.replace("\n", "\\n")


class EscapeControls:
    """A rich render hook (``Console.push_render_hook``): every text segment a console
    prints has its control characters escaped, whatever renderable (table cell, Text,
    string) carried it; rich's own styling is not in the segments' text, so it stays."""

    def process_renderables(self, renderables: list) -> list:
        return [_Escaped(r) for r in renderables]


class _Escaped:
    def __init__(self, inner: object) -> None:
        self.inner = inner

    def __rich_console__(self, console, options):  # type: ignore[no-untyped-def]
        from rich.segment import Segment

        for seg in console.render(self.inner, options):
            if seg.control or not _CONTROL.search(seg.text):
                yield seg
            else:
                yield Segment(printable(seg.text), seg.style)
