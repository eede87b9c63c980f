"""``irqlab`` entry point: one module per command, registered here.

Start-up (docs/design.md, "Start-up"): this module and the parser it builds import no
command module but the one the command line names. Every command is listed below with
its one-line help, so `irqlab --help` and `irqlab --version` import no command at all;
`irqlab list` imports cmd_runs only, and cmd_runs imports the store only inside run().
The full parser (completion, man page, tests) registers every command.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import sys
from typing import Callable, NamedTuple, Sequence

from irqlab import __version__
from irqlab.cli.common import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_USAGE, Parser, UsageError
from irqlab.cli.safe_text import printable
from irqlab.store.errors import StoreError, StoreWriteError
from irqlab.store.location import redact   # no message shows a password (light module)


class Command(NamedTuple):
    name: str
    # (module under irqlab.cli, its register(subparsers) function, its run(args) -> exit
    # code function): imported only when this command is the one run or all are built.
    entry: tuple[str, str, str]
    # The line `irqlab --help` shows; the same text as the module's add_parser(help=...)
    # (tests/cli/test_startup.py holds them equal).
    help: str


COMMANDS: list[Command] = [
    Command("run", ("cmd_run", "register", "run"), "measure timer-interrupt latency"),
    Command("list", ("cmd_runs", "register_list", "run_list"), "list stored runs"),
    Command("show", ("cmd_runs", "register_show", "run_show"), "show one stored run"),
    Command("tag", ("cmd_manage", "register_tag", "run_tag"),
            "add or change tags of stored runs"),
    Command("rm", ("cmd_manage", "register_rm", "run_rm"),
            "remove stored runs with their samples and captures"),
    Command("bench", ("cmd_bench", "register", "run"),
            "print performance figures (a benchmark, not a test)"),
    Command("monitor", ("cmd_monitor", "register", "run"),
            "measure one target without end, in windows, with bounded storage and "
            "Prometheus metrics"),
    Command("matrix", ("cmd_matrix", "register", "run"),
            "run every cell of a scenario file (TOML) and tabulate the results"),
    Command("compare", ("cmd_compare", "register", "run"), "compare stored runs in one table"),
    Command("report", ("cmd_report", "register", "run"),
            "write an HTML report (and/or plot files) of runs"),
    Command("check", ("cmd_check", "register", "run"),
            "pass/fail a run against latency limits (CI gate)"),
    Command("explain", ("cmd_explain", "register", "run"),
            "attribute latency spikes to their causes from the run's capture (needs a "
            "run recorded with --trace)"),
    Command("trend", ("cmd_trend", "register", "run"),
            "find the runs at which a metric of a series changed (change points)"),
    Command("tail", ("cmd_tail", "register", "run"),
            "how often a latency beyond the data would occur: an extreme-value fit of the "
            "tail with its checks (pWCET)"),
    Command("import", ("cmd_import", "register", "run"), "import other tools' results as runs"),
    Command("model", ("cmd_model", "register", "run"),
            "analytic latency bounds (e.g. Xen RTDS: 2(P-B))"),
    Command("xentrace", ("cmd_xentrace", "register", "run"),
            "per-vCPU runstates and hypercalls of a xentrace file (as xenalyze --summary "
            "counts them)"),
    Command("push", ("cmd_push", "register", "run"), "copy runs to a lab store on PostgreSQL"),
    Command("export", ("cmd_export", "register", "run"),
            "export runs' samples (ns) as a Parquet dataset"),
    Command("serve", ("cmd_serve", "register", "run"),
            "a read-only web dashboard over the store (runs, compare, trends, live)"),
    Command("doctor", ("cmd_doctor", "register", "run"),
            "what works on this host, and the fix for what does not"),
    Command("completion", ("cmd_completion", "register", "run"),
            "print a shell completion script"),
    Command("manpage", ("cmd_completion", "register_manpage", "run_manpage"),
            "print the man page (roff; ./setup.sh installs it)"),
]
_BY_NAME = {c.name: c for c in COMMANDS}


def _entry(command: Command, which: int) -> Callable:
    """Command's register (which=1) or run (which=2) function, its module imported."""
    return getattr(importlib.import_module(f"irqlab.cli.{command.entry[0]}"),
                   command.entry[which])


def build_parser(only: str | None = None, every: bool = True,
                 others: bool = True) -> argparse.ArgumentParser:
    """The parser. With ``every`` (the default) each command registers its options; else
    only the command ``only`` (if any) does and the others are listed by name and help,
    which is all `irqlab --help` and argparse's "invalid choice" message show; without
    ``others`` not even that (a line that starts with ``only`` reaches neither)."""
    parser = Parser(prog="irqlab", description="Interrupt latency lab.")
    parser.add_argument("--version", action="version", version=f"irqlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        if every or command.name == only:
            _entry(command, 1)(sub)
        elif others or only is None:
            # Not the command named (``only``), so it parses no line: a name and help for
            # the list, without the -h option whose help formatter costs most of a
            # parser's making (~0.3 ms each, 21 of them on every start).
            sub.add_parser(command.name, help=command.help, add_help=False)
    return parser


def command_named(argv: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option (the
    top-level options, -h and --version, take no value)."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in _BY_NAME else None
    return None


# A value echoed in an error message is shown up to this long: a 64 k-character selector
# or --set value is the user's own input, and a wall of it hides the message (issue 47).
ECHO_MAX = 200
_LONG_WORD = re.compile(r"\S{%d,}" % (ECHO_MAX + 1))


def error_text(text: str) -> str:
    """One printable line for stderr: passwords redacted first, then every run of more
    than ECHO_MAX non-blank characters cut in its middle (saying how much was cut)."""
    def cut(m: re.Match[str]) -> str:
        word = m.group(0)
        return f"{word[:ECHO_MAX - 40]}…({len(word) - ECHO_MAX + 20:,} characters)…{word[-20:]}"
    return printable(_LONG_WORD.sub(cut, redact(text)), False)


def _print_store_notice(text: str) -> None:
    print(error_text(f"irqlab: {text}"), file=sys.stderr)


# A full disk or quota, a file over the size limit: the host's state, not a bug.
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# A path the user gave that the system refuses (a name too long, a missing or read-only
# directory, a file where a directory is wanted): the input's fault, exit 2 naming it
# (issue 47: `report --svg=<300 digits>` ended "internal error: OSError").
_BAD_PATH = {errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES,
             errno.EPERM, errno.EROFS, errno.ELOOP, errno.ENXIO, errno.EEXIST}


def _no_space(command: str, exc: OSError) -> int:
    """One line for output that did not fit where it went; exit 2."""
    where = f"to {exc.filename}" if exc.filename else "(to stdout or an output file)"
    print(printable(f"irqlab {command}: error: cannot write {where}: {exc.strerror}: "
                    f"free some space, or send the output elsewhere", False),
          file=sys.stderr)
    try:
        sys.stdout.flush()
    except OSError:
        # stdout is what is full: point it at /dev/null so the interpreter's final
        # flush cannot fail again (as for BrokenPipeError below).
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):    # no real descriptor (stdout replaced in-process)
            pass
    return EXIT_USAGE


def not_utf8(argv: Sequence[str]) -> str | None:
    """The error line for the first argument that is not UTF-8 text (Python hands such
    bytes over as lone surrogates, which the store, JSON and the terminal cannot take), or
    None when all are."""
    for i, word in enumerate(argv, start=1):
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            # surrogateescape gives back the bytes the OS passed; a lone surrogate no
            # OS argv holds (main called in process: \ud800) shows as its escape.
            shown = word.encode("utf-8", "surrogateescape" if all(
                ord(c) < 0xd800 or 0xdc80 <= ord(c) <= 0xdcff or ord(c) > 0xdfff
                for c in word) else "backslashreplace")[:40]
            return (f"irqlab: error: argument {i} ({shown!r}) is not UTF-8 text: names, "
                    f"tags, selectors and file names are taken as UTF-8; give it in UTF-8 "
                    f"(or rename the file)")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    bad = not_utf8(argv)
    if bad is None and any("\0" in word for word in argv):
        # No process's argv holds one; main called in process may (os calls refuse it).
        bad = "irqlab: error: an argument holds a NUL character: remove it"
    if bad is None:
        # argparse takes "--" as the end of options even in "--opt=--", and hands the
        # option an empty list instead of a value (a crash further on).
        joined = next((w for w in argv if w.startswith("-") and w.endswith("=--")), None)
        if joined is not None:
            bad = (f"irqlab: error: {joined[:40]}: -- is the end of options, not a value: "
                   f"give the option another value")
    if bad is not None:
        print(printable(bad, False), file=sys.stderr)
        return EXIT_USAGE
    name = command_named(argv)
    # A line that starts with its command (`irqlab list ...`) is parsed by that command's
    # parser alone: the others' 21 placeholders cost ~3.5 ms of every start (issue 28).
    # After a top-level option (`irqlab --help list`) the full list is shown.
    alone = name is not None and argv[0] == name
    args = build_parser(only=name, every=False, others=not alone).parse_args(argv)
    # Undo host changes and kill loads a crashed irqlab left behind (irqlab.journal).
    from irqlab.journal import replay_stale
    try:
        undone = replay_stale()
    except OSError as exc:          # an unreadable state directory must not stop irqlab
        undone = [f"restore journal not readable ({exc}); nothing undone"]
    for line in undone:
        print(printable(f"irqlab: previous run died: {line}", False), file=sys.stderr)
    # Runs a dead irqlab left `running` are closed when a command opens the store.
    from irqlab.store import location
    location.notice = _print_store_notice
    run = _entry(_BY_NAME[args.command], 2)
    try:
        code = run(args)
        # Output still buffered is written here, where a full disk (or > /dev/full) is
        # reported like any error, not at the interpreter's exit (exit 120, a message
        # of its own).
        sys.stdout.flush()
        return code
    except StoreWriteError as exc:
        print(error_text(f"irqlab {args.command}: error: {exc}"), file=sys.stderr)
        return EXIT_FAIL
    except (UsageError, StoreError) as exc:
        print(error_text(f"irqlab {args.command}: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `irqlab compare … | head`: the reader left; exit quietly like other Unix tools.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAIL
    except KeyboardInterrupt:
        print(f"irqlab {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
            return _no_space(args.command, exc)
        if isinstance(exc, OSError) and exc.errno in _BAD_PATH and exc.filename:
            print(error_text(f"irqlab {args.command}: error: cannot use {exc.filename}: "
                             f"{exc.strerror}: give another path"), file=sys.stderr)
            return EXIT_USAGE
        # No traceback reaches a user: one line, and how to get the details.
        if os.environ.get("IRQLAB_DEBUG"):
            raise
        print(error_text(f"irqlab {args.command}: internal error: "
                         f"{type(exc).__name__}: {exc} (IRQLAB_DEBUG=1 shows the "
                         f"traceback; please report it)"), file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
