"""argparse value types shared by the CLI and the targets' own options.

Each turns one command-line word into a value or raises argparse.ArgumentTypeError with
the reason, which argparse prints as one line and exit 2.
"""

from __future__ import annotations

import argparse
from typing import Callable

from irqlab.cpus import parse_cpu_list
from irqlab.durations import parse_duration_ns


def duration(text: str) -> int:
    """A duration with unit (1ms, 30us), in ns."""
    try:
        return parse_duration_ns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_length(text: str) -> int:
    """A run's length (--duration): a duration with unit, or a bare number of seconds
    as cyclictest's -D takes it ('5' is 5 s), in ns."""
    try:
        return parse_duration_ns(text, bare_unit="s")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def period(text: str) -> int:
    """A timer period (--period, -i): a duration with a unit, in ns. A bare number is
    refused, naming cyclictest's unit: its -i 1000 is 1000us, and a period read in
    the wrong unit would measure something else without a word."""
    bare = text.strip()
    if bare.isascii() and bare.isdigit() and int(bare) > 0:
        raise argparse.ArgumentTypeError(
            f"{bare[:20]!r} is not a duration: a period needs a unit, e.g. {bare[:20]}us "
            f"(cyclictest's -i {bare[:20]}) or 1ms; only --duration (-D) takes a bare "
            f"number, as seconds")
    try:
        return parse_duration_ns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def count(text: str) -> int:
    """An integer >= 0."""
    try:
        val = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if val < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return val


def count_in(lo: int, hi: int, why: str) -> Callable[[str], int]:
    """A type: an integer lo..hi; ``why`` says what the upper bound protects."""
    def parse(text: str) -> int:
        val = count(text)
        if not lo <= val <= hi:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is out of range: use "
                                             f"{lo:,}-{hi:,} ({why})")
        return val
    parse.__name__ = "count"             # argparse names the type in its messages
    return parse


def cpu_list(text: str) -> list[int]:
    """A CPU list like 0,2-3 (irqlab.cpus)."""
    try:
        return parse_cpu_list(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
