"""Stop signals: a thread stopped while it waited for its CPU.

A SIGSTOP (or SIGTSTP, SIGTTIN, SIGTTOU) stops every thread of the process, but each
thread stops itself, the next time it runs (kernel/signal.c, do_signal_stop()): its
``sched_switch`` with prev_state T comes only then. A thread that was runnable behind
another task when the signal came (e.g. a vCPU thread preempted by a busy neighbour)
first waits its turn, runs a few microseconds and stops; from the switches alone that
wait looks like preemption. Seen here: 6.4 ms of a 50 ms stop "preempted" by a CFS
spinner on the thread's CPU. With ``signal:signal_generate`` in the capture the wait is
put where it belongs: from the signal on, the thread's runnable time until it next runs
is stopped time. The event is written on the sender's CPU, so only a sender on a traced
CPU is seen (the capture's tracing_cpumask); without it, nothing changes.
"""

from __future__ import annotations

import numpy as np

from irqlab.explain.load import Trace
from irqlab.explain.timeline import RUNNABLE, RUNNING, STOPPED, ThreadTimeline, state_code

# Signal numbers of x86 and arm64 (include/uapi/asm-generic/signal.h): SIGSTOP, SIGTSTP,
# SIGTTIN, SIGTTOU stop; SIGCONT continues (a stop then undone before the thread ran).
STOP_SIGNALS = (19, 20, 21, 22)
SIGCONT = 18
_RUNNABLE, _RUNNING, _STOPPED = (state_code(s) for s in (RUNNABLE, RUNNING, STOPPED))


def stop_signal_times(trace: Trace, group: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted times of the stop signals and of the SIGCONTs sent (and not ignored:
    result 0) to a thread of ``group`` (one process: they stop or continue all of it)."""
    sg = trace.t("signal_generate")
    empty = np.empty(0, np.int64)
    if not len(sg) or not group:
        return empty, empty
    ours = np.isin(sg["pid"], np.array(sorted(group), np.int64)) & (sg["result"] == 0)
    ts = sg["ts"].astype(np.int64)
    return (np.sort(ts[ours & np.isin(sg["sig"], STOP_SIGNALS)]),
            np.sort(ts[ours & (sg["sig"] == SIGCONT)]))


def mark_stop_signals(timelines: dict[int, ThreadTimeline], stops: np.ndarray,
                      conts: np.ndarray) -> None:
    """In place: each timeline's runnable time after a stop signal, until the thread next
    runs (or stops, or a SIGCONT comes), becomes stopped; split where it began."""
    if not len(stops):
        return
    for tl in timelines.values():
        pending = _pending(tl, stops, conts)
        if pending:
            _split(tl, pending)


def _pending(tl: ThreadTimeline, stops: np.ndarray,
             conts: np.ndarray) -> list[tuple[int, int]]:
    """[signal, the thread's next run or stop or SIGCONT) for each stop signal that found
    the thread not running (runnable or asleep: the signal wakes it)."""
    n = len(tl)
    out: list[tuple[int, int]] = []
    for t in stops.tolist():
        i = int(tl.starts.searchsorted(t, "right")) - 1
        if i < 0 or t >= tl.ends[i]:
            i += 1                                   # in a gap: the next segment
        if i >= n or tl.states[i] in (_RUNNING, _STOPPED):
            continue                 # running: it stops at once; stopped: nothing new
        j = i
        while j < n and tl.states[j] not in (_RUNNING, _STOPPED):
            j += 1
        end = int(tl.starts[j]) if j < n else int(tl.ends[-1])
        k = int(conts.searchsorted(t, "right"))
        if k < len(conts):
            end = min(end, int(conts[k]))
        if end > t and (not out or t >= out[-1][1]):
            out.append((int(t), end))
    return out


def _split(tl: ThreadTimeline, pending: list[tuple[int, int]]) -> None:
    """Runnable pieces of ``tl`` inside ``pending`` become stopped."""
    rows = []
    for i in range(len(tl)):
        start, end, state = int(tl.starts[i]), int(tl.ends[i]), int(tl.states[i])
        rest = (int(tl.cpus[i]), int(tl.wakers[i]))
        if state != _RUNNABLE:
            rows.append((start, end, state, *rest, int(tl.ends_max[i])))
            continue
        cut = start
        for a, b in pending:
            lo, hi = max(a, start), min(b, end)
            if hi <= lo:
                continue
            if lo > cut:
                rows.append((cut, lo, _RUNNABLE, *rest, lo))
            rows.append((lo, hi, _STOPPED, *rest, hi))
            cut = hi
        if cut < end:
            rows.append((cut, end, _RUNNABLE, *rest, int(tl.ends_max[i])))
        elif rows and rows[-1][1] == end:           # the last piece keeps the latest end
            rows[-1] = (*rows[-1][:5], int(tl.ends_max[i]))
    cols = list(zip(*rows))
    tl.starts, tl.ends = np.array(cols[0], np.int64), np.array(cols[1], np.int64)
    tl.states = np.array(cols[2], np.int8)
    tl.cpus, tl.wakers = np.array(cols[3], np.int64), np.array(cols[4], np.int64)
    tl.ends_max = np.array(cols[5], np.int64)
