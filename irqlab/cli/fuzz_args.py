"""Arbitrary arguments to every command, in this process (issue 47): each vector is one
``irqlab`` command line made of the command's own options and hostile values (non-UTF-8
bytes as the shell passes them, control characters, other digits, huge numbers and
texts, paths that are devices, FIFOs or missing directories). Every outcome must be an
exit code with at most one error line: an "internal error", a traceback (an exception
out of ``main``) or a hang (a vector still running after ``HANG_S``) is a finding.

Commands that would do real work on a valid line (measure, serve, run a benchmark or a
matrix, push to a lab) get a guard: an unknown last option (their arguments are parsed
and converted, then refused), or ``--dry-run`` for matrix. Every other command works on
a scratch store in a scratch directory (outputs land there), with standard input empty.

``scripts/fuzz-args N`` runs N vectors and prints the counts; the test suite runs a few
hundred through hypothesis (tests/cli/test_fuzz_args.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import signal
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

HANG_S = 20.0
# Commands whose valid lines do real work for long: parse-stage only (see above).
GUARDED = {"run": ["--fuzz-guard"], "monitor": ["--fuzz-guard"], "serve": ["--fuzz-guard"],
           "bench": ["--fuzz-guard"], "push": ["--fuzz-guard"], "matrix": ["--dry-run"]}

HOSTILE = [
    "", " ", "-", "--", "=", "==", "0", "-1", "-0", "1e30", "1e-30", "nan", "inf", "-inf",
    "9" * 30, "9" * 5000, "1" + "0" * 100, "0x10", "1_000", "١٢", "²", "１", "1.5", "-5s",
    "5s", "1ms", "0ns", "1ns", "99999999999m", "1 ms", "\x00", "\x1b[2J", "\x07", "\u202e",
    "\udcff\udcfe", "\ud800", "a\udcffb", "é", "\t", "\n", "a\nb", "A" * 16_000,
    "A" * 100_000, "tag:", "tag:=", "tag:k=v", "suite:", "series:", "series:" + "A" * 64_000,
    "../../etc/passwd", "/dev/zero", "/dev/null", "/dev/full", "/nonexistent/dir/x",
    "/proc/self/mem", "{fifo}", "{tmp}", "{tmp}/missing.toml", "{tmp}/x.html",
    "' OR 1=1 --", "%s%n", "${HOME}", "*", "?", "[", "k\"=v", "k=v", "=v", "k=", "1,2",
    "1-0", "0-99999999999", "postgresql://u:pw@h/db", "postgresql://" + "a" * 5000,
    "<script>alert(1)</script>", "1", "2", "3", "latest", "all",
]


@dataclass
class Tally:
    """What the vectors gave: exit codes, and the findings with their command lines."""

    vectors: int = 0
    exits: Counter = field(default_factory=Counter)
    internal: list[list[str]] = field(default_factory=list)
    tracebacks: list[list[str]] = field(default_factory=list)
    hangs: list[list[str]] = field(default_factory=list)
    many_lines: list[list[str]] = field(default_factory=list)

    def findings(self) -> int:
        return len(self.internal) + len(self.tracebacks) + len(self.hangs) + \
            len(self.many_lines)

    def lines(self) -> list[str]:
        out = [f"{self.vectors:,} vectors: exit codes "
               + ", ".join(f"{k}: {v:,}" for k, v in sorted(self.exits.items())),
               f"internal errors {len(self.internal)}, tracebacks {len(self.tracebacks)}, "
               f"hangs {len(self.hangs)}, errors of more than one line "
               f"{len(self.many_lines)}"]
        for what, found in (("internal error", self.internal),
                            ("traceback", self.tracebacks), ("hang", self.hangs),
                            ("several lines", self.many_lines)):
            out += [f"  {what}: {ascii(argv)[:300]}" for argv in found[:5]]
        return out


def commands() -> dict[str, list[str]]:
    """Every command and its option strings (the real parsers)."""
    from irqlab.cli.main import COMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "run" in a.choices)
    out = {}
    for command in COMMANDS:
        p = sub.choices[command.name]
        out[command.name] = [o for a in p._actions for o in a.option_strings
                             if o not in ("-h", "--help")]
    return out


def vector(rng: random.Random, options: dict[str, list[str]]) -> list[str]:
    """One random command line (before the scratch paths are filled in)."""
    name = rng.choice(sorted(options))
    argv = [name]
    for _ in range(rng.randrange(0, 6)):
        roll = rng.random()
        if roll < 0.45 and options[name]:
            argv.append(rng.choice(options[name]))
            if rng.random() < 0.8:
                argv.append(_value(rng))
        elif roll < 0.6 and options[name]:
            argv.append(f"{rng.choice(options[name])}={_value(rng)}")
        else:
            argv.append(_value(rng))
    return argv


def _value(rng: random.Random) -> str:
    if rng.random() < 0.75:
        return rng.choice(HOSTILE)
    n = rng.choice([1, 2, 5, 20, 300])
    return "".join(chr(rng.choice([rng.randrange(0x20, 0x7f), rng.randrange(0, 0x20),
                                   rng.randrange(0xdc80, 0xdd00),
                                   rng.randrange(0x80, 0x3000)])) for _ in range(n))


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Hang()


class Sandbox:
    """A scratch directory with a store of two runs and a FIFO; vectors run inside it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "fuzz.duckdb"
        self.fifo = root / "fifo"
        if not self.fifo.exists():
            os.mkfifo(self.fifo)
        if not self.db.exists():
            from irqlab.store import Store
            from irqlab.store.interface import NewRun
            with Store(self.db) as st:
                for name in ("a", "b"):
                    rid = st.create_run(NewRun(name, "native", {}, {}, tags={"k": "v"}))
                    st.finish_run(rid, "ok", None)

    def fill(self, argv: list[str]) -> list[str]:
        out = [a.replace("{tmp}", str(self.root)).replace("{fifo}", str(self.fifo))
               for a in argv]
        out += GUARDED.get(out[0], [])
        if out[0] not in ("completion", "manpage", "doctor") and "--db" not in out:
            out += ["--db", str(self.db)]
        return out

    def run(self, argv: list[str], tally: Tally) -> None:
        """One vector: its exit code, or the finding it is."""
        from irqlab.cli.main import main

        argv = self.fill(argv)
        err = io.StringIO()
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, HANG_S)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 2
        except _Hang:
            tally.hangs.append(argv)
            return
        except BaseException:              # noqa: BLE001 - out of main: a traceback
            tally.tracebacks.append(argv)
            return
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        tally.vectors += 1
        tally.exits[code] += 1
        text = err.getvalue()
        if "internal error" in text:
            tally.internal.append(argv)
        elif "Traceback" in text:
            tally.tracebacks.append(argv)
        elif code == 2 and len(text.strip().splitlines()) > 1:
            tally.many_lines.append(argv)


@contextlib.contextmanager
def quiet_process(root: Path) -> Iterator[None]:
    """cwd in the sandbox, standard input empty, fd 1 and 2 to /dev/null (what a command
    writes past sys.stdout/sys.stderr), restored after."""
    cwd = os.getcwd()
    saved = [os.dup(0), os.dup(1), os.dup(2)]
    null_in = os.open(os.devnull, os.O_RDONLY)
    null_out = os.open(os.devnull, os.O_WRONLY)
    stdin = sys.stdin
    try:
        os.chdir(root)
        os.dup2(null_in, 0)
        os.dup2(null_out, 1)
        os.dup2(null_out, 2)
        sys.stdin = open(os.devnull)           # noqa: SIM115 - restored below
        yield
    finally:
        sys.stdin.close()
        sys.stdin = stdin
        for fd, orig in enumerate(saved):
            os.dup2(orig, fd)
            os.close(orig)
        os.close(null_in)
        os.close(null_out)
        os.chdir(cwd)


def fuzz(n: int, seed: int, root: Path) -> Tally:
    """``n`` random vectors (seed ``seed``) in a sandbox at ``root``."""
    rng = random.Random(seed)
    options = commands()
    box = Sandbox(root)
    tally = Tally()
    with quiet_process(root):
        for _ in range(n):
            box.run(vector(rng, options), tally)
    return tally
