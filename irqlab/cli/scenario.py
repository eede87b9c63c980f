"""Scenario files (TOML): run defaults and a matrix of cells (docs/formats.md, "Scenario
files").

``[run]`` keys are ``irqlab run`` options (``period = "1ms"``, ``icount = true``), ``load``
(one spec or a list of specs) and knob names (``prio = 80``); ``[matrix]`` keys are the
same, each holding a list: the cells are the cross product, in file order. A paired key
names several keys joined by ``+`` and holds a list of value lists that go together
(``"rtds_period+rtds_budget" = [["10ms", "4ms"], ["100us", "40us"]]``): a sweep of pairs,
not their cross product. ``repeat = N`` in ``[run]`` runs every cell N times (a series
each, interleaved: irqlab.cli.matrix); ``[matrix]`` may not vary it. A scenario is
turned into ``irqlab run`` arguments and parsed by that command's own parser, so a key means
exactly what the option means. Every error names the file, the line and the key.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import functools
import hashlib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from irqlab.cli.cell_names import cell_id, value_text
from irqlab.config_files import MAX_NESTING, ConfigFileError, nesting_depth, read_regular_text

TOP_KEYS = ("name", "description", "run", "matrix", "tags")
# Options a scenario may not set: the matrix command owns the database and the output,
# and names each run after its cell.
FORBIDDEN = {"db": "pass --db to `irqlab matrix`", "json": "use `irqlab matrix --format json`",
             "name": "runs are named <scenario>/<cell> by the matrix",
             "knob": "write the knob's own name, e.g. prio = 80"}
# Options [run] may set but [matrix] may not vary.
MATRIX_FORBIDDEN = {"repeat": "put repeat = N in [run]: every cell is then run N times, "
                              "the cells' runs interleaved"}
# err()'s table name for a key given by `irqlab matrix --set` (its errors name the option).
SET_TABLE = "--set"
_KEY_RE = re.compile(r'^\s*"?([A-Za-z0-9_.+-]+)"?\s*=')
PAIR_SEP = "+"
_TABLE_RE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]")
# Cells a scenario may have unless `irqlab matrix --max-cells N` allows more: at a second
# a run, 100,000 cells is more than a day of runs, and a typo (one list too many) is far
# more likely than a wish for more.
MAX_CELLS = 100_000
# `--set KEY=VALUE`: a longer VALUE is refused before it is read (issue 47).
SET_VALUE_MAX = 1_000
# Up to this many cells, every whole cell is checked before the first run (some 5 ms a
# cell); a larger matrix checks each cell just before its run, so its first run starts
# at once instead of after minutes of checking.
CHECK_CELLS_FIRST = 1_000


class ScenarioError(ValueError):
    """A malformed scenario; the message starts with FILE:LINE and names the key."""


class _ArgError(Exception):
    pass


class _RaisingParser(argparse.ArgumentParser):
    """The run command's parser, but errors come back to us instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ArgError(message)


@functools.lru_cache(maxsize=1)
def _run_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.Action]]:
    """Built once (some 6 ms): parse_args does not change the parser, and a matrix builds
    the arguments of every cell with it."""
    from irqlab.cli import cmd_run

    parser = _RaisingParser(prog="irqlab", add_help=False)
    sub = parser.add_subparsers(dest="command", parser_class=_RaisingParser)
    cmd_run.register(sub)
    run_parser = sub.choices["run"]
    options = {}
    for action in run_parser._actions:
        for opt in action.option_strings:
            if opt.startswith("--") and opt != "--help":
                options[opt[2:].replace("-", "_")] = action
    return parser, options


@dataclass
class Scenario:
    name: str
    path: Path
    run: dict[str, Any]
    matrix: dict[str, list[Any]]
    description: str = ""
    lines: dict[tuple[str, str], int] = field(default_factory=dict)
    digest: str = ""
    # [tags]: labels every run of the scenario carries (as `irqlab run --tag`).
    tags: dict[str, str] = field(default_factory=dict)
    # `irqlab matrix --only PATTERN`: fnmatch patterns over cell_id(); a cell runs when
    # any matches. Not part of the digest: a picked cell resumes the whole matrix's runs.
    only: tuple[str, ...] = ()

    def cells(self) -> list[dict[str, Any]]:
        """The cross product of the matrix lists, first key varying slowest; a paired
        key's values are spread over its keys."""
        return list(self.iter_cells())

    def iter_cells(self) -> Iterator[dict[str, Any]]:
        """The cells of cells(), one at a time (a large matrix is never held whole);
        with ``only``, just the cells a pattern matches (PickedCells: in the same
        order, without trying the others)."""
        if self.only:
            return iter(PickedCells(self.matrix, self.only))
        return self._all_cells()

    def _all_cells(self) -> Iterator[dict[str, Any]]:
        keys = list(self.matrix)
        for combo in itertools.product(*self.matrix.values()):
            cell: dict[str, Any] = {}
            for key, val in zip(keys, combo):
                if PAIR_SEP in key:
                    cell.update(zip(key.split(PAIR_SEP), val))
                else:
                    cell[key] = val
            yield cell

    def cell_count(self) -> int:
        """len(cells()), computed from the lists' lengths (and, with ``only``, the
        patterns': count_picked), never by building the cells."""
        if self.only:
            return PickedCells(self.matrix, self.only).count()
        return cell_count(self.matrix)

    @property
    def auto(self) -> bool:
        """``repeat = "auto"``: rounds added until every cell against the first is
        decided (irqlab.reports.noise.auto_judge), at most ``max_repeat``."""
        return str(self.run.get("repeat", 1)).strip().lower() == "auto"

    @property
    def repeat(self) -> int:
        """Runs of each cell (``repeat = N`` in [run], checked by load_scenario); with
        ``repeat = "auto"`` the most it may make, ``max_repeat`` (default 10)."""
        if self.auto:
            return int(self.run.get("max_repeat", self.run.get("max-repeat", 10)))
        return int(self.run.get("repeat", 1))

    def argv(self, cell: dict[str, Any]) -> list[str]:
        """``irqlab run`` arguments for one cell (cell values override [run])."""
        _parser, options = _run_parser()
        return _argv({**self.run, **cell}, options)

    def where(self, table: str, key: str) -> str:
        line = self.lines.get((table, key))
        return f"{self.path}:{line}" if line else f"{self.path}"


def picked(cell: dict[str, Any], patterns: tuple[str, ...]) -> bool:
    """Does any ``--only`` pattern match the cell's name (case-sensitive fnmatch)?"""
    name = cell_id(cell)
    return any(fnmatch.fnmatchcase(name, pat) for pat in patterns)


class _Pattern:
    """An fnmatch pattern (fnmatch.fnmatchcase's syntax: * ? [seq] [!seq]) as a
    nondeterministic automaton over its tokens, so that a cell name built key by key can
    be matched key by key (count_picked)."""

    def __init__(self, pattern: str) -> None:
        self.tokens: list[re.Pattern[str] | None] = []     # None: "*"
        i, n = 0, len(pattern)
        while i < n:
            c = pattern[i]
            if c == "*":
                if not self.tokens or self.tokens[-1] is not None:
                    self.tokens.append(None)
                i += 1
                continue
            j = i + 1
            if c == "[":                    # fnmatch.translate's rule for a set's end
                j = i + 1
                if j < n and pattern[j] == "!":
                    j += 1
                if j < n and pattern[j] == "]":
                    j += 1
                while j < n and pattern[j] != "]":
                    j += 1
                j = j + 1 if j < n else i + 1       # no "]": a literal "["
            self.tokens.append(re.compile(fnmatch.translate(pattern[i:j])))
            i = j
        self.end = len(self.tokens)

    def closure(self, states: frozenset[int]) -> frozenset[int]:
        out = set(states)
        for s in sorted(states):
            while s < self.end and self.tokens[s] is None:
                s += 1
                out.add(s)
        return frozenset(out)

    def step(self, states: frozenset[int], text: str) -> frozenset[int]:
        for ch in text:
            nxt = set()
            for s in states:
                if s < self.end:
                    tok = self.tokens[s]
                    if tok is None:
                        nxt.add(s)
                    elif tok.match(ch):
                        nxt.add(s + 1)
            if not nxt:
                return frozenset()
            states = self.closure(frozenset(nxt))
        return states


class PickedCells:
    """The cells of ``matrix`` any of ``patterns`` picks (``--only``), counted and listed
    without trying every cell: a cell's name is its keys' texts joined by ",", so each
    pattern's automaton runs over one key's values at a time, and the number of names
    completing from an automaton state after key j is remembered per (j, state). A
    branch that can complete no name is never entered: 10^12 cells and ``--only zzz``
    are answered in milliseconds, and listing costs what is listed (issue 47)."""

    def __init__(self, matrix: dict[str, list[Any]], patterns: tuple[str, ...]) -> None:
        self.autos = [_Pattern(p) for p in patterns]
        self.keys = list(matrix)
        self.values = list(matrix.values())
        self.texts = [[_key_text(j, key, v) for v in vals]
                      for j, (key, vals) in enumerate(matrix.items())]
        self._memo: dict[tuple[int, tuple[frozenset[int], ...]], int] = {}
        self.start = tuple(a.closure(frozenset([0])) for a in self.autos)

    def _step(self, states: tuple[frozenset[int], ...], text: str
              ) -> tuple[frozenset[int], ...]:
        return tuple(a.step(s, text) for a, s in zip(self.autos, states))

    def _count(self, j: int, states: tuple[frozenset[int], ...]) -> int:
        """Names completing from ``states`` with keys j... (each counted once)."""
        if not any(states):
            return 0
        if j == len(self.keys):
            return int(any(a.end in s for a, s in zip(self.autos, states)))
        memo = self._memo.get((j, states))
        if memo is None:
            distinct = collections.Counter(self.texts[j])
            memo = sum(n * self._count(j + 1, self._step(states, text))
                       for text, n in distinct.items())
            self._memo[(j, states)] = memo
        return memo

    def count(self) -> int:
        return self._count(0, self.start)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        def walk(j: int, states: tuple[frozenset[int], ...],
                 cell: dict[str, Any]) -> Iterator[dict[str, Any]]:
            if j == len(self.keys):
                if self._count(j, states):      # accepted (checked before, but for {})
                    yield dict(cell)
                return
            key = self.keys[j]
            for val, text in zip(self.values[j], self.texts[j]):
                nxt = self._step(states, text)
                if not self._count(j + 1, nxt):
                    continue
                part = dict(zip(key.split(PAIR_SEP), val)) if PAIR_SEP in key \
                    else {key: val}
                yield from walk(j + 1, nxt, {**cell, **part})
        return walk(0, self.start, {})


def _key_text(j: int, key: str, val: Any) -> str:
    """Key j's part of a cell's name (cell_id), with the "," before it."""
    sep = "," if j else ""
    if PAIR_SEP in key:
        return sep + ",".join(f"{k}={value_text(x)}" for k, x in zip(key.split(PAIR_SEP),
                                                                      val))
    return sep + f"{key}={value_text(val)}"


def parse_set(text: str) -> tuple[str, Any]:
    """``--set KEY=VALUE`` as (key, value). VALUE is read as a TOML value when it is one
    (5, true, ["cpu", "io"]), else kept as text (5s, cpu:cpus=1): what the key would
    hold in [run]. Raises ValueError naming the fix."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not re.fullmatch(r"[A-Za-z0-9_-]+", key):
        raise ValueError(f"--set {text!r}: write KEY=VALUE with a scenario key, e.g. "
                         f"--set duration=5s")
    raw = raw.strip()
    if len(raw) > SET_VALUE_MAX:
        # No [run] value is near this long; TOML would read 100 k digits as one integer.
        raise ValueError(f"--set {key}=…: a value of {len(raw):,} characters: at most "
                         f"{SET_VALUE_MAX:,}, e.g. --set duration=5s")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except (tomllib.TOMLDecodeError, ValueError):
        value = raw
    return key, value


def _argv(values: dict[str, Any], options: dict[str, argparse.Action]) -> list[str]:
    out: list[str] = []
    for key, val in values.items():
        action = options[key.replace("-", "_")]
        opt = max(action.option_strings, key=len)
        if action.nargs == 0:           # store_true flags: icount = true
            if val is True:
                out.append(opt)
            continue
        for item in (val if isinstance(val, list) else [val]):
            text = value_text(item)
            # "--duration -5s" would read -5s as an option ("expected one argument"):
            # joined, the value reaches the option's own check and its message.
            out += [f"{opt}={text}"] if text.startswith("-") else [opt, text]
    return out


def _find_lines(text: str) -> dict[tuple[str, str], int]:
    lines: dict[tuple[str, str], int] = {}
    table = ""
    for no, line in enumerate(text.splitlines(), 1):
        m = _TABLE_RE.match(line)
        if m:
            table = m.group(1)
            lines.setdefault(("", table), no)
            continue
        m = _KEY_RE.match(line)
        if m:
            lines.setdefault((table, m.group(1)), no)
    return lines


def cell_count(matrix: dict[str, Any]) -> int:
    """Cells of a [matrix]: the product of its lists' lengths (nothing expanded)."""
    return math.prod(len(v) if isinstance(v, list) else 1 for v in matrix.values())


def _read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The text and data of a scenario file: a regular UTF-8 file of valid TOML that
    nests at most MAX_NESTING deep."""
    try:
        text = read_regular_text(path, "the scenario file (TOML)")
    except ConfigFileError as exc:
        raise ScenarioError(str(exc)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line N, column M)".
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively.
        raise ScenarioError(f"{path}: nested too deeply to parse (lists or tables inside "
                            f"each other hundreds of levels deep): flatten it") from None
    if nesting_depth(data) > MAX_NESTING:
        raise ScenarioError(f"{path}: nested more than {MAX_NESTING} levels deep: "
                            f"flatten it")
    return text, data


def load_scenario(path: str | Path, repeat: int | None = None,
                  max_cells: int = MAX_CELLS, overrides: dict[str, Any] | None = None,
                  only: tuple[str, ...] = ()) -> Scenario:
    """Read and check a scenario file; raises ScenarioError naming line and key.
    ``repeat`` (``irqlab matrix --repeat``) replaces the file's [run] repeat;
    ``overrides`` (``--set KEY=VALUE``) replace or add [run] keys, checked as [run]'s
    are (they change the definition, hence the digest: --resume continues only runs
    made with the same --set); ``only`` (``--only``) picks cells by name. A matrix of
    more than ``max_cells`` cells is refused before any cell is built."""
    path = Path(path)
    text, data = _read_toml(path)
    lines = _find_lines(text)

    overrides = dict(overrides or {})

    def err(table: str, key: str, msg: str) -> ScenarioError:
        if table == SET_TABLE:
            return ScenarioError(f"--set {key}={value_text(overrides.get(key))}: {msg}")
        line = lines.get((table, key))
        where = f"{path}:{line}" if line else str(path)
        label = f"[{table}] key {key!r}" if table else f"key {key!r}"
        return ScenarioError(f"{where}: {label}: {msg}")

    for key in data:
        if key not in TOP_KEYS:
            raise err("", key, f"unknown top-level key; allowed: {', '.join(TOP_KEYS)}")
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name or ""):
        raise err("", "name", "needs name = \"...\" (letters, digits, _ . -)")
    run = data.get("run", {})
    matrix = data.get("matrix", {})
    for table, val in (("run", run), ("matrix", matrix)):
        if not isinstance(val, dict):
            raise err("", table, f"must be a table: [{table}]")
    if repeat is not None:
        run = {**run, "repeat": repeat}
    for key in overrides:
        norm = key.replace("-", "_")
        varied = [k for k in matrix if norm in k.replace("-", "_").split(PAIR_SEP)]
        if varied:
            raise err(SET_TABLE, key, f"{key} varies in [matrix] ({varied[0]}): pick its "
                                      f"cells with --only instead, e.g. --only "
                                      f"'*{norm}={value_text(overrides[key])}*'")
        # The override replaces the key however [run] spells it (stall-timeout or _).
        run = {k: v for k, v in run.items() if k.replace("-", "_") != norm}
        run[key] = overrides[key]
    for key, vals in matrix.items():
        if not isinstance(vals, list) or not vals:
            raise err("matrix", key, "must be a non-empty list, e.g. [\"hlt\", \"poll\"]")
    # Counted before any value is checked, any cell built, even the run parser: 10^12
    # cells are refused in microseconds, not after filling the memory.
    total = cell_count(matrix)
    if total > max_cells:
        sizes = " x ".join(str(len(v)) for v in matrix.values())
        raise ScenarioError(f"{path}: [matrix] has {total:,} cells ({sizes}), more than "
                            f"the limit of {max_cells:,}: shorten its lists, or pass "
                            f"--max-cells {total} to run them all")
    parser, options = _run_parser()

    def check(table: str, key: str, val: Any, name: str | None = None) -> None:
        """``name``: the option a paired ``key``'s value is for (errors name ``key``)."""
        k = (name or key).replace("-", "_")
        if k in FORBIDDEN:
            raise err(table, key, f"not allowed in a scenario: {FORBIDDEN[k]}")
        if k not in options:
            raise err(table, key, "unknown key: use an `irqlab run` option name "
                                  "(see `irqlab run --help`), load, or a knob name")
        action = options[k]
        if action.nargs == 0 and not isinstance(val, bool):
            raise err(table, key, f"must be true or false, not {val!r}")
        if isinstance(val, (dict, float)) or (isinstance(val, list) and k != "load"):
            raise err(table, key, f"{val!r} is not a valid value (write a string, an "
                                  f"integer or a boolean)")
        try:
            args = parser.parse_args(["run", *_argv({k: val}, options)])
            from irqlab.cli.hook_options import hooks_from_args
            hooks_from_args(args)
        except (_ArgError, ValueError) as exc:
            raise err(table, key, str(exc)) from None

    for key, val in run.items():
        check(SET_TABLE if key in overrides else "run", key, val)
    for key, vals in matrix.items():
        for name_ in key.split(PAIR_SEP):
            if name_.replace("-", "_") in MATRIX_FORBIDDEN:
                raise err("matrix", key, MATRIX_FORBIDDEN[name_.replace("-", "_")])
        if PAIR_SEP not in key:
            for val in vals:
                check("matrix", key, val)
            continue
        names = key.split(PAIR_SEP)
        if len(set(names)) != len(names) or not all(names):
            raise err("matrix", key, "a paired key joins different keys with +, e.g. "
                                     "\"rtds_period+rtds_budget\"")
        for name_ in names:
            if name_ in matrix or any(name_ in k.split(PAIR_SEP) for k in matrix if k != key):
                raise err("matrix", key, f"{name_} is also in another matrix key")
        for val in vals:
            if not isinstance(val, list) or len(val) != len(names):
                raise err("matrix", key, f"each value must be a list of {len(names)} "
                                         f"values, one per key ({', '.join(names)}), not "
                                         f"{val!r}")
            for name_, item in zip(names, val):
                check("matrix", key, item, name_)
    scn = Scenario(name=name, path=path, run=run, matrix=matrix,
                   description=str(data.get("description", "")), lines=lines,
                   digest=_digest(run, matrix), tags=_tags(data.get("tags", {}), err),
                   only=tuple(only))
    if only and not PickedCells(matrix, tuple(only)).count():
        example = cell_id(next(scn._all_cells(), {}))
        names = f"cell names look like {example!r}" if example else \
            "its one cell has an empty name: --only '*' picks it"
        raise ScenarioError(f"--only {' '.join(only)}: matches none of the {total:,} "
                            f"cells of {path} ({names}; list them with --dry-run)")
    # Whole cells: options that are fine alone may clash together (run_config's checks).
    # A large matrix checks each cell before its run instead (irqlab.cli.matrix), and
    # its first cell now: a clash in [run] itself is every cell's.
    if total <= CHECK_CELLS_FIRST:
        for cell in scn.iter_cells():
            check_cell(scn, cell)
    elif not only:
        check_cell(scn, next(scn.iter_cells()))
    return scn


def _tags(val: Any, err: Any) -> dict[str, str]:
    """[tags] as text, e.g. kernel = "rt"; irqlab's own keys refused (cli.cmd_manage)."""
    from irqlab.store.manage import RESERVED_TAGS

    if not isinstance(val, dict):
        raise err("", "tags", "must be a table: [tags] then KEY = \"VALUE\" lines")
    for key, v in val.items():
        if key in RESERVED_TAGS:
            raise err("tags", key, "is irqlab's own (repeat and the matrix set it); pick "
                                   "another key")
        if not isinstance(v, (str, int, bool)):
            raise err("tags", key, f"{v!r} is not a valid tag value (write a string)")
    return {k: value_text(v) for k, v in val.items()}


def check_cell(scn: Scenario, cell: dict[str, Any]) -> None:
    """Raise ScenarioError if ``cell``'s options clash (run_config's checks)."""
    cell_config(scn, cell)


def cell_config(scn: Scenario, cell: dict[str, Any]) -> Any:
    """The RunConfig of ``cell``; ScenarioError naming the cell if its options clash."""
    from irqlab.cli import cmd_run
    from irqlab.cli.common import UsageError

    parser, _options = _run_parser()
    try:
        return cmd_run.run_config(parser.parse_args(["run", *scn.argv(cell)]))
    except (_ArgError, UsageError) as exc:
        first = next(iter(cell), None)
        where = scn.where("matrix", first) if first else str(scn.path)
        raise ScenarioError(f"{where}: cell {cell_id(cell) or '(single)'}: {exc}") \
            from None


def _digest(run: dict[str, Any], matrix: dict[str, Any]) -> str:
    """SHA-256 of the definition; repeat = 1 is the default, left out so a file that
    states it resumes the runs of one that does not (and older stores' digests hold)."""
    run = {k: v for k, v in run.items() if not (k == "repeat" and str(v).strip() == "1")}
    return hashlib.sha256(json.dumps([run, matrix], sort_keys=True,
                                     default=str).encode()).hexdigest()


def parse_cell_args(scn: Scenario, cell: dict[str, Any]) -> argparse.Namespace:
    parser, _options = _run_parser()
    return parser.parse_args(["run", *scn.argv(cell)])
