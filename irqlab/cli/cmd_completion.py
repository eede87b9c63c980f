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
import re
import sys
from typing import Iterator

from irqlab.cli.common import EXIT_OK

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
    c.add_argument("shell", choices=SHELLS, help="the shell")


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
    return parser


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
    sys.stdout.write(completion_script(args.shell))
    return EXIT_OK


def run_manpage(args: argparse.Namespace) -> int:
    sys.stdout.write("".join(line + "\n" for line in man_lines(_parser())))
    return EXIT_OK


# --- the man page ---------------------------------------------------------------------

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
    for name, _help, _sub in subs:
        lines += [f".B irqlab {name}", ".RI [ options ]", ".br"]
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
              ".SH ENVIRONMENT", ".TP", "\\fBIRQLAB_DB\\fR", _roff("database file or URL"),
              ".TP", "\\fBIRQLAB_NATIVE\\fR", _roff("0: use the numpy code instead of the C "
                                                    "fast paths"),
              ".TP", "\\fBIRQLAB_DEBUG\\fR", _roff("1: show tracebacks of internal errors"),
              ".SH EXIT STATUS", _roff("0 ok, 1 failed (or a check limit exceeded), 2 usage "
                                       "or data error, 130 interrupted."),
              ".SH SEE ALSO", "trace\\-cmd(1), cyclictest(8), rtla\\-timerlat(1)"]
    return lines
