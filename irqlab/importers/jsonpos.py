"""Where the members of a JSON object start, by line: so an error in a JSON import names
the line of the thread or CPU it is about instead of line 1 (json.loads keeps no
positions).

One linear pass over the text (strings and escapes skipped character by character, no
regex backtracking), so hostile input costs what its length costs.
"""

from __future__ import annotations

import json


def member_lines(text: str, container: str) -> dict[str, int]:
    """Line (1-based) of each key of the object that is the value of the top-level key
    `container` (``{"thread": {"0": {...}, "1": {...}}}`` -> {"0": 3, "1": 9}); {} when
    the text has no such object. Keys are returned as json.loads decodes them."""
    lines: dict[str, int] = {}
    depth = 0
    line = 1
    i = 0
    n = len(text)
    last_key: str | None = None       # the last string read, while it may be a key
    key_line = 1
    inside = False                   # in the container object (its keys are at depth 2)
    opens_next = False               # the container's key was just read: its '{' comes
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == '"':
            start, key_line = i, line
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\":
                    i += 1
                elif text[i] == "\n":
                    line += 1
                i += 1
            try:
                last_key = json.loads(text[start:i + 1])
            except ValueError:
                last_key = None
        elif c == ":":
            if last_key is not None:
                if depth == 1 and last_key == container:
                    opens_next = True
                elif inside and depth == 2:
                    lines.setdefault(last_key, key_line)
            last_key = None
        elif c in "{[":
            depth += 1
            if opens_next and c == "{" and depth == 2:
                inside = True
            opens_next = False
            last_key = None
        elif c in "}]":
            if inside and depth == 2:
                return lines
            depth -= 1
            last_key = None
        elif c == ",":
            last_key = None
        i += 1
    return lines
