"""The flight recorder's and ``--on-threshold``'s options (issue 44), shared by
``irqlab run`` and ``irqlab monitor``: their parsing and the hook they make
(irqlab.trace.recorder, irqlab.measure.stream.OnThreshold)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from irqlab.argtypes import count_in
from irqlab.cli.common import UsageError
from irqlab.durations import parse_duration_ns

_SIZE = re.compile(r"\s*(\d+)\s*([kKmMgG]?)(i?B)?\s*")
_SIZE_KB = {"": 1 / 1024, "k": 1, "m": 1024, "g": 1024 * 1024}
# A ring larger than this a CPU is more memory than a recorder needs (and the kernel may
# refuse it): 1 GiB.
MAX_RING_KB = 1 << 20


def ring_size_kb(text: str) -> int:
    """argparse type of --trace-ring: a size with a unit (512K, 8M, 1G; bytes without),
    in KiB a CPU."""
    m = _SIZE.fullmatch(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text.strip()[:30]!r} is not a size: write e.g. "
                                         f"8M or 512K (per CPU)")
    kb = int(int(m.group(1)) * _SIZE_KB[m.group(2).lower()])
    if not 64 <= kb <= MAX_RING_KB:
        raise argparse.ArgumentTypeError(f"--trace-ring {text.strip()}: give 64K to 1G a "
                                         f"CPU")
    return kb


def on_threshold_item(text: str) -> str:
    """argparse type of --on-threshold: a latency, ``stop``, ``signal:PID`` or
    ``shell:CMD`` (checked here, sorted out by on_threshold)."""
    word = text.strip()
    kind, sep, arg = word.partition(":")
    if word == "stop" or (sep and kind == "shell" and arg.strip()):
        return word
    if sep and kind == "signal":
        if arg.isdigit() and int(arg) > 0:
            return word
        raise argparse.ArgumentTypeError(f"{word[:40]!r}: signal takes a process id, "
                                         f"e.g. signal:1234")
    try:
        parse_duration_ns(word)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{word[:40]!r} is neither a latency (e.g. 500us) nor an action (stop, "
            f"signal:PID, shell:CMD)") from None
    return word


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--on-threshold", type=on_threshold_item, action="append",
                       default=[], metavar="LAT|ACTION",
                       help="every sample above LAT (e.g. 500us) is a spike; with --trace "
                            "the trace around it is kept (flight recorder: the capture "
                            "stays in an overwriting ring). Repeatable with actions: stop "
                            "(as --break-at), signal:PID (SIGUSR1), shell:CMD (sh -c CMD, "
                            "the spike in IRQLAB_SPIKE_SEQ, IRQLAB_SPIKE_CPU, "
                            "IRQLAB_SPIKE_LATENCY_NS)")
    group.add_argument("--trace-ring", type=ring_size_kb, default=None, metavar="SIZE",
                       help="the recorder's ring a CPU, e.g. 8M (default: a few seconds "
                            "of events at the period)")
    group.add_argument("--trace-around", type=_around, default=100_000_000, metavar="DUR",
                       help="keep the trace this long before a spike's deadline and after "
                            "its entry (default 100ms)")
    group.add_argument("--trace-keep", type=count_in(1, 100_000, "windows kept a day"),
                       default=100, metavar="N",
                       help="keep at most N spike windows a day, the worst (default 100)")


def _around(text: str) -> int:
    try:
        ns = parse_duration_ns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < ns <= 60_000_000_000:
        raise argparse.ArgumentTypeError(f"--trace-around {text.strip()}: give more than "
                                         f"0 and at most 60s")
    return ns


def on_threshold(args: argparse.Namespace) -> tuple[int | None, list[str], bool]:
    """(the spike latency in ns, the actions signal/shell, whether ``stop`` was given)
    of --on-threshold; UsageError when actions come without one latency."""
    items = getattr(args, "on_threshold", None) or []
    lats = [i for i in items if i != "stop" and not i.startswith(("signal:", "shell:"))]
    actions = [i for i in items if i.startswith(("signal:", "shell:"))]
    if len(lats) > 1:
        raise UsageError(f"--on-threshold takes one latency, got {', '.join(lats)}: keep one")
    if not lats:
        if items:
            raise UsageError("--on-threshold actions need a latency: add e.g. "
                             "--on-threshold 500us")
        return None, [], False
    limit = parse_duration_ns(lats[0])
    if limit <= 0:
        raise UsageError("--on-threshold must be more than 0, e.g. --on-threshold 500us")
    return limit, actions, "stop" in items


def recorder_hook(args: argparse.Namespace, hook: Any, period_ns: int,
                  limit_ns: int, target: str) -> Any:
    """The target's capture made a flight recorder, or UsageError where it cannot be
    (irqlab.trace.recorder says which captures can)."""
    from irqlab.trace.capture import TraceHook
    from irqlab.trace.recorder import RECORDER_KINDS, FlightRecorder, default_ring_kb

    kind = hook.metadata().get("kind")
    if type(hook) is not TraceHook or hook.clock != "mono" or kind not in RECORDER_KINDS:
        raise UsageError(f"--on-threshold with --trace keeps a ring of the host's tracefs "
                         f"on the samples' clock, which only --target native has today "
                         f"(--target {target}'s capture, kind {kind}, cannot be "
                         f"cut around a spike): drop --trace (the actions still run) or "
                         f"measure native")
    return FlightRecorder(hook.db_path, period_ns, threshold_ns=limit_ns,
                          ring_kb=args.trace_ring or default_ring_kb(period_ns),
                          around_ns=args.trace_around, keep_per_day=args.trace_keep,
                          clock=hook.clock, kind=hook.meta["kind"],
                          extra_events=hook.extra_events)
