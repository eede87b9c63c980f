"""The measuring loop: poll the samples, feed statistics and store, decide when to stop."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from irqlab.durations import format_latency, format_ns
from irqlab.measure.boot import StopFlag
from irqlab.measure.config import Observer, RunConfig
from irqlab.measure.summary import window_dict
from irqlab.runconfig import SpikeListener
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.layout import RingHeader
from irqlab.samples.record import FLAG_INJECTED
from irqlab.samples.source import SampleSource
from irqlab.stats import RunStats, WindowStats, format_window_line, ticks_to_ns
from irqlab.stats.percpu import PerCpuStats
from irqlab.store import Store, StoreWriteError

if TYPE_CHECKING:      # imported by the run that makes one (traced runs only)
    from irqlab.explain.live import LiveSplit

_POLL_S = 0.02
_FLUSH_RECORDS = 200_000
# Invalid samples (entry before deadline) kept as evidence in the run's metadata.
INVALID_KEPT = 100


class DurationBound:
    """``--duration D`` as one rule for every target: a run holds the samples whose
    deadline lies within D of the first sample's deadline, ``[first, first + D)`` in the
    probe's own ticks, so D at period P gives D / P samples (fewer only for skipped
    periods) whatever the target's own stop does.

    Wall time cannot be that rule: a target's first samples may wait in its buffer while
    the host boots it, and a source hands samples over in bursts (console frames,
    dom0's copy), so the samples read by a wall-clock instant are not those of D (Xen:
    895-897 samples for 8 s at 10 ms, issue 27). Sources deliver deadlines in order
    (docs/design.md step 10), so the first sample at or past the end proves every sample
    within D has been read: the run can stop then."""

    def __init__(self, duration_ns: int, tick_hz: int, period_tick: int = 0) -> None:
        self.span_tick = max(1, duration_ns * tick_hz // 1_000_000_000)
        self.first_tick: int | None = None
        self.last_tick: int | None = None      # newest deadline kept
        self.reached = False                   # a sample at or past the end was read
        self.after_end = 0                     # samples read past the end, not counted
        self.ended_by = "deadline"
        # Skipped periods (overruns) within the bound, per CPU stream; 0: not counted.
        self.period_tick = period_tick
        self.skipped_by_cpu: dict[int, int] = {}
        self._prev: dict[int, tuple[int, int]] = {}    # cpu -> (seq, deadline) last read
        self._first: dict[int, tuple[int, int]] = {}   # cpu -> (seq, deadline) first read
        self._closed: set[int] = set()                  # cpus with a sample past the end

    @classmethod
    def for_run(cls, cfg: RunConfig, tick_hz: int, period_tick: int = 0
                ) -> DurationBound | None:
        """The bound of a run given a duration (None for a run by sample count);
        ``period_tick`` (the probe's, from its header) lets it count the overruns."""
        if cfg.duration_ns is None or cfg.samples is not None:
            return None
        return cls(cfg.duration_ns, tick_hz, period_tick)

    @property
    def counts_overruns(self) -> bool:
        """True if ``overruns`` is this bound's count (the probe's period is known)."""
        return self.period_tick > 0

    @property
    def overruns(self) -> int:
        """Periods skipped within the bound, the run's ``overruns`` (formats.md §4)."""
        return sum(self.skipped_by_cpu.values())

    def metadata(self) -> dict[str, Any]:
        """The run's metadata ``duration_bound`` (docs/formats.md section 4)."""
        return {"first_deadline_tick": self.first_tick, "span_tick": self.span_tick,
                "samples_after_end": self.after_end,
                "ended_by": self.ended_by if self.reached or self.ended_by != "deadline"
                else None,
                "overruns": self.overruns if self.counts_overruns else None}

    def count_skipped(self, recs: np.ndarray) -> None:
        """Count the periods skipped within the bound, from the records just read (all
        of them, before ``keep`` drops those past the end).

        A record's ``seq`` counts every period that fired, lost records included, so
        per CPU the skipped periods are the periods spanned minus the ``seq`` span,
        taken from that CPU's first record (not summed pair by pair):
        - once a record past the end was read, the periods of ``[first, end)`` (the
          end is D after the run's first deadline) minus the records up to the last
          one within it; records lost just before the end are taken for skipped
          periods (an upper bound, as a lost record's deadline is unknown);
        - before that, the periods from the first record's deadline to the last's.
        The guest probes and native.c advance a deadline by whole periods (probe.c
        ``probe_timer_rearm``), so both are exact for them. The net sender's
        ``deadline_tick`` is its send time, late by up to a period behind its schedule
        (netsend.c): summing ``floor(gap / period)`` pair by pair lost up to one
        period per late send (a 10 s run at 1 ms counted 129 overruns where 140
        periods were skipped, so sent + overruns fell short of D / period). From the
        first record the count is exact once the end is reached (D / period periods,
        the first at the first send) and, before, as long as the last send is no
        earlier in its period than the first (a late send that is followed by skipped
        periods counts them already).
        Linear in the records read: a few numpy operations per poll."""
        if not self.counts_overruns or not len(recs) or self.first_tick is None:
            return
        end = self.first_tick + self.span_tick
        period = self.period_tick
        cpus = recs["cpu"].astype(np.int64)
        for cpu in np.unique(cpus).tolist():
            if cpu in self._closed:
                continue
            mine = recs[cpus == cpu]
            seq = mine["seq"].astype(np.int64)
            dl = mine["deadline_tick"].astype(np.int64)
            if cpu not in self._first:
                self._first[cpu] = (int(seq[0]), int(dl[0]))
            if cpu in self._prev:
                seq = np.concatenate(([self._prev[cpu][0]], seq))
                dl = np.concatenate(([self._prev[cpu][1]], dl))
            self._prev[cpu] = (int(seq[-1]), int(dl[-1]))
            seq_first, dl_first = self._first[cpu]
            past = np.flatnonzero(dl >= end)
            if past.size:
                self._closed.add(cpu)
                if past[0] == 0:          # this CPU's first record is past the end
                    continue
                last = int(past[0]) - 1
                periods = -(-(end - dl_first) // period)       # ceil: [first, end)
                fired = int(seq[last]) - seq_first + 1
            else:
                last = len(dl) - 1
                periods = (int(dl[last]) - dl_first) // period + 1
                fired = int(seq[last]) - seq_first + 1
            self.skipped_by_cpu[cpu] = max(0, periods - fired)

    def keep(self, deadline_tick: np.ndarray) -> np.ndarray | None:
        """Mask of the deadlines within the bound (None: all of them)."""
        if not deadline_tick.size:
            return None
        deadlines = deadline_tick.astype(np.int64)
        if self.first_tick is None:
            self.first_tick = int(deadlines[0])
        inside = (deadlines - self.first_tick) < self.span_tick
        if inside.any():
            self.last_tick = max(self.last_tick or self.first_tick,
                                 int(deadlines[inside].max()))
        if inside.all():
            return None
        self.reached = True
        self.after_end += int(inside.size - np.count_nonzero(inside))
        return inside

    def fraction(self) -> float:
        """How much of D the kept deadlines cover (progress)."""
        if self.first_tick is None or self.last_tick is None:
            return 0.0
        return min(1.0, (self.last_tick - self.first_tick + 1) / self.span_tick)


class BreakAt:
    """``--break-at LATENCY`` (cyclictest ``-b``, rtla ``-T``): the run stops at the first
    sample whose latency is above LATENCY, on every target. That sample is the run's
    last: samples after it in the same batch are dropped, and samples read later are
    kept only when their deadline is not after its deadline (a multi-ring source hands
    other CPUs' earlier deadlines over later; docs/design.md step 12).

    It is armed once measuring starts: the samples already waiting at the first read
    were taken while the run's hooks started, and a trace capture enabling its events
    costs the probe milliseconds (2.75 ms at sample 7 of a native run here) before it
    records anything, so such a break would stop every traced run with nothing to
    explain. Those samples are kept and counted as usual; ``armed_after`` (metadata) is
    their count."""

    def __init__(self, limit_ns: int, tick_hz: int) -> None:
        self.limit_ns, self.tick_hz = limit_ns, tick_hz
        self.armed = False
        self.armed_after = 0          # samples read before it was armed
        # latency_tick > floor(limit_ns * tick_hz / 1e9)  <=>  latency_ns > limit_ns,
        # exactly, in integers (a latency in ticks is a whole number).
        self.limit_tick = limit_ns * tick_hz // 1_000_000_000
        self.sample: dict[str, int] | None = None     # the break sample, once seen

    @classmethod
    def for_run(cls, cfg: RunConfig, tick_hz: int) -> BreakAt | None:
        return None if cfg.break_at_ns is None else cls(cfg.break_at_ns, tick_hz)

    def keep(self, recs: np.ndarray, latencies: np.ndarray) -> np.ndarray | None:
        """Mask of the records the run keeps (None: all of them); the first record above
        the limit becomes ``sample``."""
        if not self.armed:
            self.armed_after += len(recs)
            return None
        deadlines = recs["deadline_tick"].astype(np.int64)
        if self.sample is not None:
            inside = deadlines <= self.sample["deadline_tick"]
            return None if inside.all() else inside
        above = np.flatnonzero(latencies > self.limit_tick)
        if not above.size:
            return None
        i = int(above[0])
        r = recs[i]
        self.sample = {"seq": int(r["seq"]), "cpu": int(r["cpu"]),
                       "deadline_tick": int(deadlines[i]), "entry_tick": int(r["entry_tick"]),
                       "latency_ns": ticks_to_ns(int(latencies[i]), self.tick_hz)}
        mask = np.zeros(len(recs), dtype=bool)
        mask[:i + 1] = True
        return mask

    def metadata(self) -> dict[str, Any]:
        """The run's metadata ``break_at`` and the summary's ``break_sample`` source
        (docs/formats.md section 4)."""
        return {"limit_ns": self.limit_ns, "sample": self.sample,
                "armed_after": self.armed_after}

    def message(self) -> str:
        assert self.sample is not None
        s = self.sample
        return (f"stopped at the first sample above --break-at "
                f"{format_ns(self.limit_ns, 'exact')}: {format_latency(s['latency_ns'])} "
                f"(seq {s['seq']}, cpu {s['cpu']}); data kept")


def emit_window(state: MeasureState, w: WindowStats,
                samples: np.ndarray | None = None) -> None:
    """Store a finished window together with its raw samples not stored yet, in one
    transaction (a crash or a full disk never leaves a window without its samples), then
    show it; a run split live (``state.live_split``) shows and stores the IRQ and thread
    parts of those samples with it."""
    assert state.hdr is not None
    store = state.store
    parts = state.live_split.window(samples) \
        if state.live_split is not None and samples is not None and len(samples) else None
    wd = window_dict(w, state.hdr.tick_hz, parts)
    with store.transaction():
        if samples is not None and len(samples):
            store.add_samples(state.run_id, samples)
        store.add_windows(state.run_id, [wd])
    store.release_memory()      # a long run's memory must not grow with its samples
    state.windows.append(wd)
    state.observer.on_window(wd, format_window_line(w, state.hdr.tick_hz, parts))


def missing_after(recs: np.ndarray, keep_n: int) -> int:
    """Records missing from the sequence after the first ``keep_n`` of ``recs``: per CPU,
    the ``seq`` span from its last kept record to its last record, less the records in
    it (a CPU with none kept: from its first record)."""
    kept, rest = recs[:keep_n], recs[keep_n:]
    n = 0
    for cpu in np.unique(rest["cpu"]).tolist():
        mine = rest["seq"][rest["cpu"] == cpu].astype(np.int64)
        before = kept["seq"][kept["cpu"] == cpu].astype(np.int64)
        start = int(before[-1]) + 1 if len(before) else int(mine[0])
        n += int(mine[-1]) - start + 1 - len(mine)
    return n


class OnThreshold:
    """``--on-threshold LATENCY``: every sample above it is a spike (armed as BreakAt is,
    after the first read). Each is told to the run's SpikeListener hooks (the flight
    recorder) and runs the actions: ``signal:PID`` sends PID SIGUSR1 (rtla timerlat's
    ``--on-threshold signal``), ``shell:CMD`` runs ``sh -c CMD`` with the spike in its
    environment (IRQLAB_SPIKE_SEQ, _CPU, _LATENCY_NS, IRQLAB_RUN_ID), without waiting.
    ``stop`` is ``--break-at`` (BreakAt). At most SPIKES_PER_READ spikes of one read are
    told: a storm of them must not stall the reading of samples."""

    SPIKES_PER_READ = 16
    SHELLS_AT_ONCE = 4

    def __init__(self, limit_ns: int, tick_hz: int, listeners: list[Any],
                 actions: list[str], run_id: int) -> None:
        self.limit_ns, self.tick_hz = limit_ns, tick_hz
        self.limit_tick = limit_ns * tick_hz // 1_000_000_000    # as BreakAt's
        self.listeners, self.actions, self.run_id = listeners, actions, run_id
        self.armed = False
        self.spikes = 0
        self.untold = 0
        self.errors: list[str] = []
        self._shells: list[subprocess.Popen] = []

    @classmethod
    def for_run(cls, cfg: RunConfig, tick_hz: int, run_id: int,
                others: list[SpikeListener] = ()) -> OnThreshold | None:
        """``others``: listeners beside the hooks (a monitor's metrics)."""
        if cfg.on_threshold_ns is None:
            return None
        listeners = [h for h in cfg.hooks if isinstance(h, SpikeListener)]
        return cls(cfg.on_threshold_ns, tick_hz, listeners + list(others),
                   cfg.on_threshold_actions, run_id)

    @property
    def recorded(self) -> bool:
        """Whether a hook keeps a trace window around each spike (a flight recorder)."""
        return any(h.keeps_trace for h in self.listeners)

    def check(self, recs: np.ndarray, latencies: np.ndarray) -> list[dict[str, Any]]:
        """The spikes of a batch (told and acted on); [] before it is armed."""
        if not self.armed:
            return []
        above = np.flatnonzero(latencies > self.limit_tick)
        self.spikes += int(above.size)
        self.untold += max(0, int(above.size) - self.SPIKES_PER_READ)
        out = []
        for i in above[:self.SPIKES_PER_READ].tolist():
            r = recs[i]
            spike: dict[str, Any] = {"seq": int(r["seq"]), "cpu": int(r["cpu"]),
                     "deadline_tick": int(r["deadline_tick"]),
                     "entry_tick": int(r["entry_tick"]),
                     "latency_ns": ticks_to_ns(int(latencies[i]), self.tick_hz)}
            spike["explain"] = self.explain_command(spike)
            for hook in self.listeners:
                hook.on_spike(spike)
            for action in self.actions:
                self._act(action, spike)
            out.append(spike)
        return out

    def _act(self, action: str, spike: dict[str, Any]) -> None:
        kind, _, arg = action.partition(":")
        try:
            if kind == "signal":
                os.kill(int(arg), signal.SIGUSR1)
            elif kind == "shell":
                self._shells = [p for p in self._shells if p.poll() is None]
                if len(self._shells) >= self.SHELLS_AT_ONCE:
                    self.errors.append(f"shell: {self.SHELLS_AT_ONCE} still running, "
                                       f"spike {spike['seq']} skipped")
                    return
                env = {**os.environ, "IRQLAB_RUN_ID": str(self.run_id),
                       "IRQLAB_SPIKE_SEQ": str(spike["seq"]),
                       "IRQLAB_SPIKE_CPU": str(spike["cpu"]),
                       "IRQLAB_SPIKE_LATENCY_NS": str(spike["latency_ns"])}
                self._shells.append(subprocess.Popen(["sh", "-c", arg], env=env,
                                                     stdin=subprocess.DEVNULL))
        except (OSError, ValueError) as exc:
            if len(self.errors) < 10:
                self.errors.append(f"{kind}: {exc}")

    def notice(self, spike: dict[str, Any]) -> str:
        """The line a spike prints; with a flight recorder, how to explain its window."""
        text = (f"spike: {format_latency(spike['latency_ns'])} above "
                f"{format_ns(self.limit_ns, 'exact')} (seq {spike['seq']}, cpu "
                f"{spike['cpu']})")
        if spike["explain"]:
            text += f"; its trace window: {spike['explain']}"
        return text

    def explain_command(self, spike: dict[str, int]) -> str:
        """How to explain a spike's kept window ("" without a flight recorder)."""
        return f"irqlab explain {self.run_id} --spike {spike['seq']}" if self.recorded \
            else ""

    def finish(self) -> None:
        """Reap the shells that ended; those still running are left to end."""
        self._shells = [p for p in self._shells if p.poll() is None]

    def metadata(self) -> dict[str, Any]:
        return {"limit_ns": self.limit_ns, "spikes": self.spikes, "untold": self.untold,
                "actions": self.actions, "errors": self.errors}


@dataclass(eq=False)
class MeasureState:
    """What one run's measuring works on, handed whole to stream() and its helpers as
    rtla hands its osnoise_tool to each phase: the run's configuration, store and front
    end, what the start set up (process, source, header, statistics, limits), and what
    the stream leaves (status, windows, self-check counts, losses). measure.Run is one,
    so nothing is copied in or out."""

    cfg: RunConfig
    store: Store
    observer: Observer
    run_id: int = 0
    process: MeasuredProcess | None = None
    source: SampleSource | None = None
    hdr: RingHeader | None = None
    stats: RunStats | None = None
    per_cpu: PerCpuStats | None = None
    bound: DurationBound | None = None        # --duration (DurationBound.for_run)
    break_at: BreakAt | None = None
    on_threshold: OnThreshold | None = None   # --on-threshold (OnThreshold.for_run)
    live_split: LiveSplit | None = None   # the windows' IRQ/thread columns
    windows: list[dict[str, Any]] = field(default_factory=list)
    # entries before their deadline: the first INVALID_KEPT, as evidence
    invalid_kept: list[dict[str, int]] = field(default_factory=list)
    status: str = "failed"
    message: str | None = None
    injected: int = 0               # injected samples read
    injected_found: int = 0         # injected samples above the threshold (self-check)
    lost_in_run: int | None = None  # records lost before the run's end, when it ended


def stream(state: MeasureState, stop: StopFlag, stall_s: float) -> None:
    """Poll the samples until the run ends; its end goes into ``state`` (status, message,
    injected, injected_found, lost_in_run).
    ``stall_s``: the watchdog, no sample for this long fails the run. A failed store
    write (disk full) stops the run: ``failed``, what was stored before kept.

    A run given a duration has its :class:`DurationBound` in ``state.bound``: the
    samples kept are its, and the run ends when it is reached; the wall clock (the
    duration plus ``stall_s``) and a target's own count stay as backstops.

    A sample whose ISR entry precedes its deadline is no latency: the statistics count
    it ``invalid`` (irqlab.stats), and it is not stored among the samples, so every
    reader of the stored samples sees the figures' samples; its first ``INVALID_KEPT``
    records go to ``state.invalid_kept`` (the run's metadata) as evidence.

    ``lost``: a run by sample count (``--samples N``) counts the records lost before its
    N-th sample. A batch reports its losses without their place: when the count is
    reached inside a batch, those after the N-th sample are found by ``seq``
    (missing_after); later batches' losses are not the run's (the probe runs on while
    the run stops; its ring or a slow console falls behind). So every lost record is a
    gap in the stored sequence. A run by duration counts every loss, those after its
    end included (docs/formats.md: samples + lost + samples_after_end = sent)."""
    assert state.process and state.source and state.stats and state.hdr
    cfg, guest, reader, stats = state.cfg, state.process, state.source, state.stats
    store, run_id, observer = state.store, state.run_id, state.observer
    per_cpu, bound, break_at = state.per_cpu, state.bound, state.break_at
    on_threshold = state.on_threshold
    target = cfg.target_samples()
    wall_end = None
    if bound is not None and target is None:
        # Under --icount the guest's own count ends the run (guest time is virtual).
        wall_end = time.monotonic() + cfg.duration_ns / 1e9 + stall_s
    last_sample_at = time.monotonic()
    pending: list[np.ndarray] = []      # read, not stored yet, in window order
    pending_n = 0
    # Samples of the open window already stored by a size flush (bounded memory): a
    # closing window takes only the rest from ``pending``.
    stored_ahead = 0
    done = 0
    injected = found = lost = 0
    status, message = "ok", None

    def drain() -> int:
        nonlocal pending_n, done, injected, found, lost
        batch = reader.poll()
        recs = batch.records
        if target is None or done < target:
            lost += batch.lost
            if target is not None and done + len(recs) > target:
                lost -= min(batch.lost, missing_after(recs, target - done))
        if not len(batch):
            return 0
        if target is not None and done + len(recs) > target:
            recs = recs[:target - done]
        inside = bound.keep(recs["deadline_tick"]) if bound is not None else None
        if bound is not None:
            bound.count_skipped(recs)
        if inside is not None:
            recs = recs[inside]     # past first deadline + duration: not counted
        if not len(recs):
            return len(batch)
        deadlines = recs["deadline_tick"].astype(np.int64)
        # Two's complement difference of the u64 counters (docs/formats.md §2).
        latencies = recs["entry_tick"].astype(np.int64) - deadlines
        cut = break_at.keep(recs, latencies) if break_at is not None else None
        if cut is not None:
            recs, deadlines, latencies = recs[cut], deadlines[cut], latencies[cut]
            if not len(recs):
                return len(batch)
        if on_threshold is not None:
            for spike in on_threshold.check(recs, latencies):
                observer.on_notice(on_threshold.notice(spike))
        closed = stats.add(deadlines, latencies)
        if per_cpu is not None:
            per_cpu.add(recs["cpu"], deadlines, latencies)
        done += len(recs)           # the probe's count (--samples) includes invalid
        valid = latencies >= 0
        marked = (recs["flags"] & FLAG_INJECTED) != 0
        found += int(np.count_nonzero(marked & (latencies > stats.threshold_tick)))
        if not valid.all():
            keep_invalid(recs[~valid])
            recs = recs[valid]      # counted invalid by the statistics, not stored
        pending.append(recs)
        pending_n += len(recs)
        injected += int(np.count_nonzero(recs["flags"] & FLAG_INJECTED))
        for w in closed:
            emit_window(state, w, samples=take_window_samples(w.samples))
        if pending_n >= _FLUSH_RECORDS:
            flush()
        return len(batch)

    def keep_invalid(bad: np.ndarray) -> None:
        invalid_kept = state.invalid_kept
        for r in bad[:max(0, INVALID_KEPT - len(invalid_kept))]:
            invalid_kept.append({k: int(r[k]) for k in
                                 ("seq", "deadline_tick", "entry_tick", "flags", "cpu")})

    def take_window_samples(n: int) -> np.ndarray | None:
        """The first samples of ``pending`` that make up a closing window of ``n``."""
        nonlocal pending_n, stored_ahead
        need = max(0, n - stored_ahead)
        stored_ahead = max(0, stored_ahead - n)
        parts = []
        while need and pending:
            head = pending[0]
            if len(head) <= need:
                parts.append(pending.pop(0))
                need -= len(head)
            else:
                parts.append(head[:need])
                pending[0] = head[need:]
                need = 0
        taken = sum(len(p) for p in parts)
        pending_n -= taken
        if not parts:
            return None
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def flush() -> None:
        """Store the open window's samples early (memory stays bounded)."""
        nonlocal pending_n, stored_ahead
        if pending:
            store.add_samples(run_id, np.concatenate(pending) if len(pending) > 1
                              else pending[0])
            stored_ahead += pending_n
            pending.clear()
            pending_n = 0

    try:
        while True:
            got = drain()
            if break_at is not None:
                break_at.armed = True   # after the first read: see BreakAt
            if on_threshold is not None:
                on_threshold.armed = True
            now = time.monotonic()
            if got:
                last_sample_at = now
            if break_at is not None and break_at.sample is not None:
                status, message = "stopped-at-break", break_at.message()
                break
            if bound is not None:
                observer.on_progress(bound.fraction(), f"{done} samples")
                if bound.reached:
                    break
                if wall_end is not None and now >= wall_end:
                    bound.ended_by = "wall clock"
                    observer.on_notice(
                        f"stopped by the wall clock: the duration and {stall_s:.0f} s "
                        f"more passed while the samples' deadlines covered only "
                        f"{bound.fraction():.0%} of it (a guest clock slower than the "
                        f"host's?)")
                    break
            if target is not None:
                if bound is None:
                    observer.on_progress(done / target, f"{done}/{target} samples")
                if done >= target:
                    break
            if stop.signum is not None:
                status = "interrupted"
                message = f"stopped by {signal.Signals(stop.signum).name}; data kept"
                break
            code = guest.exit_code()
            if code is not None:
                drain()
                if (guest.exited_done(code) or reader.state() == "done"
                        or (target is not None and done >= target)):
                    break
                hdr = reader.header()
                status = "failed"
                # arm64 powers off (exit 0) on errors too: the ring state says which.
                detail = (f"probe error {hdr.error}: {hdr.message}"
                          if guest.exited_error(code) or hdr.state == "error"
                          else guest.exit_description(code))
                message = (f"{detail} after {done} samples; stderr: "
                           f"{guest.stderr().strip()[-300:] or '(empty)'}")
                break
            if reader.state() == "error":
                hdr = reader.header()
                status, message = "failed", f"probe error {hdr.error}: {hdr.message}"
                break
            if now - last_sample_at > stall_s:
                status = "failed"
                message = (f"watchdog: no sample for {now - last_sample_at:.1f} s (guest hang "
                           f"or QEMU stuck) after {done} samples; data kept")
                break
            time.sleep(_POLL_S)
        reader.finish()     # e.g. multi-ring: release what the merge watermark held back
        drain()
        flush()             # the last window's samples: it is stored by Run.finish
        if break_at is not None and break_at.sample is not None and status == "ok":
            # The break came with the process's own end (read by the last drains).
            status, message = "stopped-at-break", break_at.message()
    except StoreWriteError as exc:
        # Nothing more is written (Run.finish only sets the status): every window
        # stored so far has its samples.
        status = "failed"
        message = (f"{exc}; measuring stopped after {done} samples read; the "
                   f"{sum(w['samples'] or 0 for w in state.windows)} samples of the "
                   f"{len(state.windows)} windows stored before are kept")
    except BaseException:
        # Keep what was read (RingError, a bug, ...): Run.finish stores its window.
        try:
            flush()
        except StoreWriteError:
            pass
        raise
    state.status, state.message = status, message
    state.injected, state.injected_found, state.lost_in_run = injected, found, lost
