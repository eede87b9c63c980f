"""``irqlab completion bash|zsh`` and ``irqlab manpage``: shell completion and the man
page, both generated from the parser itself, so they name exactly the commands and
options irqlab takes (and change with them).

Completion scripts come from shtab (it reads an argparse parser and writes bash and zsh
completion functions). The man page is our own small roff writer: argparse-manpage would
be one more dependency for ~80 lines, and ours lays out each command's option groups as
`--help` does (irqlab run's target, timing, statistics … groups and its examples).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from pathlib import Path
from typing import Iterator

from irqlab.cli.common import EXIT_OK, UsageError

SHELLS = ("bash", "zsh")


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("completion", help="print a shell completion script",
                       description="Print a completion script for SHELL, generated from "
                                   "irqlab's own parser.",
                       epilog="examples:\n"
                              "  irqlab completion bash > ~/.local/share/bash-completion/"
                              "completions/irqlab\n"
                              "  irqlab completion zsh > \"${fpath[1]}/_irqlab\"",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("shell", choices=SHELLS, nargs="?", default=None, help="the shell")
    # What the scripts call to complete RUN: the stored runs' names, one a line.
    c.add_argument("--run-names", action="store_true",
                   help="print the names of the default store's runs (what the "
                        "completion scripts offer for RUN), nothing when it has none")
    c.add_argument("--db", type=Path, default=None, help=argparse.SUPPRESS)


def register_manpage(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("manpage", help="print the man page (roff; ./setup.sh installs it)",
                   description="Print irqlab(1) in roff, generated from the parser: "
                               "irqlab manpage > irqlab.1; man ./irqlab.1")


def _parser(for_completion: bool = False) -> argparse.ArgumentParser:
    from irqlab.cli.main import build_parser

    parser = build_parser()
    if for_completion:
        # shtab sorts choices: `bench` lists [] among its choices (so that no name means
        # the default set), which does not sort with strings; completion offers words.
        for action in _walk(parser):
            if action.choices is not None and not isinstance(action.choices, dict):
                action.choices = [str(c) for c in action.choices
                                  if not isinstance(c, (list, tuple, dict))]
            extra = _value_completion(action)
            if extra is not None:
                action.complete = extra           # type: ignore[attr-defined]
    return parser


def _words(name: str, words: list[str]) -> dict[str, object]:
    """A shtab completion of fixed words (a bash function and a zsh list)."""
    listed = " ".join(words)
    return {"bash": f"_irqlab_{name}", "zsh": f"({listed})",
            "preamble": {"bash": f"_irqlab_{name}() {{\n  compgen -W '{listed}' -- \"$1\"\n}}\n"}}


# RUN: the stored runs' names. A TAB press reads them from a file beside the store
# (<db>.run-names) with the shell alone: it never waits for irqlab (tests/cli/
# test_startup.py). When the store changed since the file was written (the database or
# its WAL is newer), `irqlab completion --run-names` rewrites it in the background, for
# the next TAB: the first TAB after a new run may miss that run.
_RUN_NAMES_CHECK = """  local db="${IRQLAB_DB:-${XDG_DATA_HOME:-$HOME/.local/share}/irqlab/irqlab.duckdb}"
  local cache="$db.run-names"
  if [[ -f "$db" && ( ! -f "$cache" || "$db" -nt "$cache" || "$db.wal" -nt "$cache" ) ]]; then
    (irqlab completion --run-names >/dev/null 2>&1 &)
  fi
  [[ -r "$cache" ]] || return 0
"""
RUN_NAMES = {"bash": "_irqlab_run_names", "zsh": "_irqlab_run_names",
             "preamble": {
                 "bash": "_irqlab_run_names() {\n" + _RUN_NAMES_CHECK
                         + "  local IFS=$'\\n'\n  compgen -W \"$(<\"$cache\")\" -- \"$1\"\n}\n",
                 "zsh": "_irqlab_run_names() {\n" + _RUN_NAMES_CHECK
                        + "  compadd -- ${(f)\"$(<$cache)\"}\n}\n"}}


def _value_completion(action: argparse.Action) -> dict[str, object] | None:
    """What to offer for an option's value or a positional: --target's targets (and
    suites), --load's kinds, --knob's keys, a scenario's TOML files, RUN's run names."""
    if action.metavar == "RUN":
        return RUN_NAMES
    if "--target" in action.option_strings and action.choices is None:
        from irqlab.targets import SUITES, TARGETS
        return _words("targets", [*TARGETS, *SUITES])
    if "--load" in action.option_strings:
        from irqlab.loads import LOADS
        return _words("loads", [f"{kind}:" for kind in LOADS] + list(LOADS))
    if "--knob" in action.option_strings:
        from irqlab.knobs import KNOBS
        return _words("knobs", [f"{key}=" for key in KNOBS])
    if action.dest == "scenario" or (not action.option_strings and action.dest == "file"
                                     and action.metavar in (None, "FILE", "SCENARIO")):
        import shtab
        return shtab.FILE
    return None


def _walk(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _walk(sub)


def completion_script(shell: str) -> str:
    import shtab

    return shtab.complete(_parser(for_completion=True), shell=shell)


def run(args: argparse.Namespace) -> int:
    if args.run_names:
        sys.stdout.write("".join(f"{name}\n" for name in run_names(args.db)))
        return EXIT_OK
    if args.shell is None:
        raise UsageError("name the shell: irqlab completion bash (or zsh)")
    sys.stdout.write(completion_script(args.shell))
    return EXIT_OK


def run_names(db: Path | None = None) -> list[str]:
    """The distinct names of the store's runs, newest first, written to the file the
    completion scripts read (<db>.run-names, see RUN_NAMES) when the store is newer; []
    when there is no store or it cannot be read (completion never prints an error)."""
    from irqlab.store.location import default_db_path

    path = Path(db or default_db_path())
    if str(path).startswith("postgresql") or not path.exists():
        return []
    cache = names_cache(path)
    try:
        newest = max(p.stat().st_mtime_ns for p in (path, Path(f"{path}.wal"))
                     if p.exists())
        if cache.stat().st_mtime_ns > newest:
            return cache.read_text().splitlines()
    except OSError:
        pass
    names = _stored_names(path)
    try:
        # Whole or not at all: a TAB reading it meanwhile sees the old list.
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        tmp.write_text("".join(f"{n}\n" for n in names))
        os.replace(tmp, cache)
    except OSError:
        pass                  # a store in a read-only place: no file, names printed only
    return names


def names_cache(db: Path) -> Path:
    """The run-name file of one database, beside it (like <db>.samples, <db>.traces)."""
    return db.with_name(f"{db.name}.run-names")


def _stored_names(path: Path) -> list[str]:
    from irqlab.store import open_store
    try:
        with open_store(path, read_only=True) as store:
            rows = sorted(store.runs(), key=lambda r: r.run_id, reverse=True)
    except Exception:         # noqa: BLE001 - completion must stay silent
        return []
    # Printable one-line names only: a name with a newline cannot be one word.
    return [n for n in dict.fromkeys(r.name for r in rows) if n.isprintable()]


def run_manpage(args: argparse.Namespace) -> int:
    sys.stdout.write("".join(line + "\n" for line in man_lines(_parser())))
    return EXIT_OK


# --- the man page ---------------------------------------------------------------------

# Every IRQLAB_* variable irqlab reads or sets (tests/cli/test_help_matches.py greps
# the code for them: a new one must be added here).
ENVIRONMENT: list[tuple[str, str]] = [
    ("IRQLAB_DB", "database file or postgresql:// URL (default "
                  "~/.local/share/irqlab/irqlab.duckdb); --db overrides it"),
    ("IRQLAB_DB_WAIT_S", "seconds a writer waits for a database another process holds "
                         "and does not share (default 10)"),
    ("IRQLAB_SAMPLES_DIR", "where to look for a run's sample files when the recorded "
                           "path is gone (the directory mounted elsewhere)"),
    ("IRQLAB_STATE_DIR", "the restore journal of host settings (default "
                         "~/.local/state/irqlab)"),
    ("IRQLAB_SHARE_IDLE_S", "seconds an idle process borrowing the database's connection "
                            "stays connected (default 300)"),
    ("IRQLAB_SHARE_GRACE_S", "seconds the process holding the database lets borrowers "
                             "finish their writes when it stops (default 30)"),
    ("IRQLAB_SHARE_TRANSACTION_S", "seconds a borrower's transaction may stay open in the "
                                   "process holding the database; then it is rolled back "
                                   "(default 60)"),
    ("IRQLAB_XEN", "hypervisor image for --target xen (default --xen-binary)"),
    ("IRQLAB_LINUX_KERNEL", "guest kernel for --target linux-guest and net (default: the "
                            "cached Debian vmlinuz)"),
    ("IRQLAB_LINUX_NET_MODULES", "network driver modules for the net target's guest "
                                 "(default: those beside the cached kernel)"),
    ("IRQLAB_LINUX_KERNEL_ARM64", "guest kernel (an arm64 Image) for --target linux-guest "
                                  "and net with --arch arm64 (default: the cached Debian "
                                  "arm64 vmlinuz)"),
    ("IRQLAB_LINUX_NET_MODULES_ARM64", "network driver modules for the net target's arm64 "
                                       "guest (default: those beside its cached kernel)"),
    ("IRQLAB_NATIVE", "0: use the numpy code instead of the C fast paths"),
    ("IRQLAB_RUN_ID", "set by irqlab for --on-threshold shell:CMD: the run's id"),
    ("IRQLAB_SPIKE_SEQ", "set by irqlab for --on-threshold shell:CMD: the spike's sample"),
    ("IRQLAB_SPIKE_CPU", "set by irqlab for --on-threshold shell:CMD: the spike's CPU"),
    ("IRQLAB_SPIKE_LATENCY_NS", "set by irqlab for --on-threshold shell:CMD: the spike's "
                                "latency in ns"),
    ("IRQLAB_PROGRESS", "0: no progress bars (they are shown only on a terminal)"),
    ("IRQLAB_DEBUG", "1: show tracebacks of internal errors"),
    ("IRQLAB_BENCH_IN_MEMORY", "1: irqlab bench's report figures read every run whole "
                               "(set by irqlab bench for its comparison child)"),
    ("IRQLAB_LG_PLACE", "set, not read: the labgrid place a matrix pool worker's cell runs "
                        "on, in the environment of the processes it starts"),
]


def _positionals(parser: argparse.ArgumentParser) -> list[str]:
    """A command's positional arguments as its usage shows them: 'RUN [RUN ...]'."""
    fmt = parser._get_formatter()
    return [fmt._format_actions_usage([a], []).strip() for a in parser._actions
            if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
            and a.help is not argparse.SUPPRESS]

def _roff(text: str) -> str:
    """Text safe in roff: backslashes and hyphens escaped, no line starting with a
    control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + ln) if ln[:1] in (".", "'") else ln for ln in text.split("\n"))


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            out += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return out


def _option_lines(parser: argparse.ArgumentParser) -> list[str]:
    """Each group of a command as .SS, each option as a .TP entry."""
    lines: list[str] = []
    fmt = parser._get_formatter()
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help is not argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
                   and not isinstance(a, argparse._SubParsersAction)]
        if not actions and not group.description:
            continue
        lines.append(f".SS {_roff(group.title or '')}")
        if group.description:
            lines.append(_roff(group.description))
        for a in actions:
            invocation = fmt._format_action_invocation(a)
            lines += [".TP", f"\\fB{_roff(invocation)}\\fR"]
            help_text = fmt._expand_help(a) if a.help else ""
            lines.append(_roff(re.sub(r"\s+", " ", help_text)))
    return lines


def man_lines(parser: argparse.ArgumentParser) -> list[str]:
    """irqlab(1): name, synopsis, description, one section per command with its option
    groups and examples, files and environment."""
    from irqlab import __version__

    today = dt.date.today().isoformat()
    subs = _subcommands(parser)
    lines = [f'.TH IRQLAB 1 "{today}" "irqlab {__version__}" "User Commands"',
             ".SH NAME",
             "irqlab \\- " + _roff("interrupt latency lab: measure timer-interrupt latency "
                                   "in VMs and on hosts, store every sample, explain the "
                                   "spikes"),
             ".SH SYNOPSIS"]
    for name, _help, sub in subs:
        lines += [f".B irqlab {name}", ".RI [ options ]"]
        lines += [f".I {_roff(p)}" for p in _positionals(sub)] + [".br"]
    lines += [".SH DESCRIPTION", _roff(
        "irqlab tells how long it takes from a timer interrupt's deadline to its handler "
        "running, on the host, inside a QEMU/KVM virtual machine and inside Xen domains, "
        "window by window. It keeps every run and raw sample in an embedded database, "
        "compares and reports runs, imports other tools' logs and explains each spike "
        "from the host side. --json makes every command print versioned JSON lines."),
        ".SH COMMANDS"]
    for name, help_text, sub in subs:
        lines += [f".SS irqlab {name}", _roff(help_text or "")]
        usage = sub.format_usage().replace("usage: ", "").strip()
        lines += [".PP", _roff(re.sub(r"\s+", " ", usage))]
        lines += [line.replace(".SS ", f".SS {name}: ", 1) if line.startswith(".SS ")
                  else line for line in _option_lines(sub)]
        if sub.epilog:
            lines += [".PP", ".nf", _roff(sub.epilog.rstrip()), ".fi"]
    lines += [".SH FILES", ".TP", "\\fI~/.local/share/irqlab/irqlab.duckdb\\fR",
              _roff("the default database ($IRQLAB_DB or --db to change)"),
              ".TP", "\\fI~/.local/state/irqlab/journal\\fR",
              _roff("the restore journal of host settings ($IRQLAB_STATE_DIR)"),
              ".SH ENVIRONMENT"]
    for var, text in ENVIRONMENT:
        lines += [".TP", f"\\fB{_roff(var)}\\fR", _roff(text)]
    lines += [".SH EXIT STATUS", _roff("0 ok, 1 failed (or a check limit exceeded), 2 usage "
                                       "or data error, 130 interrupted."),
              ".SH SEE ALSO", "trace\\-cmd(1), cyclictest(8), rtla\\-timerlat(1)"]
    return lines
