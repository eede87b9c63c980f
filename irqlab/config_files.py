"""Reading configuration files a user hands irqlab (scenario TOML, labgrid environment
YAML) with bounds, so a hostile or mistaken file costs a one-line error, not a hang.

* Regular files only: a FIFO would block the read forever, /dev/zero never ends, a
  directory is a mistake. The file is opened non-blocking (a FIFO without a writer opens
  at once) and checked with fstat on the open descriptor, so what is checked is what is
  read.
* A size cap, then strict UTF-8.
* YAML: nesting depth and the size of the data once aliases are expanded are counted
  from the parser's event stream before anything is built. PyYAML shares an aliased node
  instead of copying it, so a "billion laughs" file loads quickly — but every consumer
  that walks the data (labgrid's template resolution) then walks the expansion, which
  never ends in practice and, being one long C-level loop, does not even return to
  Python to honour SIGTERM.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

MAX_CONFIG_BYTES = 1 << 20          # 1 MiB: a scenario or environment file is a page
MAX_NESTING = 64                    # levels of lists/tables; real files use fewer than 8
MAX_YAML_NODES = 100_000            # nodes after alias expansion


class ConfigFileError(ValueError):
    """A configuration file irqlab refuses to read; the message names the fix."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular_text(path: str | Path, what: str,
                      max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The text of ``path``, which must be a regular UTF-8 file of at most ``max_bytes``;
    ``what`` names the file in the fix ("the scenario file")."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigFileError(f"{path} is {_kind(mode)}, not a regular file: give "
                                  f"{what} itself")
        try:
            raw = os.read(fd, max_bytes + 1)
        except OSError as exc:
            raise ConfigFileError(f"{path}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        raise ConfigFileError(f"{path} is larger than {max_bytes // 1024} KiB: not {what} "
                              f"(give {what} itself)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"{path} is not UTF-8 text (byte {raw[exc.start]:#04x} at "
                              f"offset {exc.start}): save it as UTF-8") from None


def nesting_depth(value: Any, limit: int = MAX_NESTING) -> int:
    """Depth of nested lists/dicts in ``value``, counting stops just past ``limit``
    (iterative: the point is to survive a value nested thousands deep)."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (list, dict)):
            depth += 1
            if depth > limit:
                return depth
            deepest = max(deepest, depth)
            todo += [(v, depth) for v in (item.values() if isinstance(item, dict) else item)]
    return deepest


def load_yaml(text: str, path: str | Path, max_depth: int = MAX_NESTING,
              max_nodes: int = MAX_YAML_NODES) -> Any:
    """yaml.safe_load of ``text`` after checking, on the event stream, that it nests at
    most ``max_depth`` deep and expands (aliases counted at their full size) to at most
    ``max_nodes`` nodes."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    anchors: dict[str, int] = {}
    open_: list[list[Any]] = []         # [anchor, expanded size so far] per open collection

    def add(n: int) -> None:
        if open_:
            open_[-1][1] += n
            if open_[-1][1] > max_nodes:
                raise ConfigFileError(
                    f"{path}: expands to more than {max_nodes:,} nodes once its aliases "
                    f"are resolved (an alias bomb?): write the data out plainly")

    try:
        for ev in yaml.parse(text, Loader=loader):
            if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(open_) >= max_depth:
                    raise ConfigFileError(f"{path}: nested more than {max_depth} levels "
                                          f"deep (line {ev.start_mark.line + 1}): flatten it")
                open_.append([ev.anchor, 1])
            elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                anchor, size = open_.pop()
                if anchor:
                    anchors[anchor] = size
                add(size)
            elif isinstance(ev, yaml.ScalarEvent):
                if ev.anchor:
                    anchors[ev.anchor] = 1
                add(1)
            elif isinstance(ev, yaml.AliasEvent):
                add(anchors.get(ev.anchor, 1))
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise ConfigFileError(f"{path}: not valid YAML: {first}") from None
