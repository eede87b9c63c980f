"""A fake target for run-flow tests: no QEMU, no probe, a real ring in a memfd.

It is also the smallest complete example of a target (docs/design.md, "Adding a
target"): options, typed config, accelerator plans, spawn, open_source. Its process
writes samples into a SyntheticRing from a thread, at the period, and can be told to
misbehave: fail to boot under one accelerator, stop writing (a hang), or exit with an
error code part-way.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from irqlab.doctor import Check
from irqlab.runner.accel import AccelPlan
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.layout import HEADER_SIZE, RING_OFFSET, STATE_DONE, STATE_ERROR
from irqlab.samples.record import FLAG_AFTER_OVERRUN, FLAG_INJECTED
from irqlab.samples.ring import RingReader
from irqlab.samples.source import SampleSource
from irqlab.samples.synthetic import SyntheticRing
from irqlab.targets.base import Option, Target, TargetOptions, TargetUsageError

LATENCY_NS = 5_000          # every fake sample: deadline + 5 us (tick = 1 ns)
SPIKE_EVERY = 50            # ... except every 50th: + 80 us
SPIKE_NS = 80_000
EARLY_NS = 1_748_808        # entered before the deadline (issue 27's Xen cell)
SKIPPED_PERIODS = 2         # periods an overrun skips (skip_every)
INJECT_NS = 2_000_000       # an injected sample's latency (the self-check's irqoff)

BEHAVIOUR = Option("--fake-behaviour", "fake_behaviour", dict(
    choices=["ok", "hang", "crash", "probe-error"], help="how the fake probe ends"))


@dataclass
class FakeOptions(TargetOptions):
    behaviour: str = "ok"          # ok | hang | crash | probe-error
    after: int = 100               # samples before it hangs or crashes
    broken_accels: tuple[str, ...] = ()   # accelerators under which it never boots
    backlog: int = 0               # samples written at once on start (a buffered boot)
    early_every: int = 0           # every Nth sample entered before its deadline
    slowdown: int = 1              # host time per period: a guest clock this much slower
    skip_every: int = 0            # after every Nth sample, SKIPPED_PERIODS periods skipped
    inject_every: int = 0          # self-check: every Nth sample flagged injected, INJECT_NS
    inject_misses: int = 0         # ... of which the first this many show no delay
    lost_backlog: tuple[int, ...] = ()   # backlog samples lost (their slots left stale)


class FakeProcess(MeasuredProcess):
    """Writes samples into a SyntheticRing at the period from a thread."""

    def __init__(self, opts: FakeOptions, plan: AccelPlan, period_ns: int,
                 samples: int) -> None:
        super().__init__()
        self.opts, self.plan, self.period_ns, self.samples = opts, plan, period_ns, samples
        self.ring: SyntheticRing | None = None
        self.code: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._period_no = 0              # the last deadline's period number
        self._skip_next = False

    def _deadline(self, n: int) -> tuple[int, int]:
        """Sample ``n``'s deadline and flags: the next period, or past the skipped ones
        (counted in the header, the sample flagged), as the probe's rearm does."""
        assert self.ring is not None
        self._period_no += 1
        flags = 0
        if self._skip_next:
            self._period_no += SKIPPED_PERIODS
            self.ring.add_overruns(SKIPPED_PERIODS)
            flags = FLAG_AFTER_OVERRUN
        self._skip_next = bool(self.opts.skip_every and (n + 1) % self.opts.skip_every == 0)
        return self._period_no * self.period_ns, flags

    def start(self) -> None:
        self.argv = ["fake-probe", self.plan.accel]
        if self.plan.accel in self.opts.broken_accels:
            # Guest memory exists, the probe never writes its header, "QEMU" exits 1.
            self._create_memfd("fake-ram", RING_OFFSET + HEADER_SIZE)
            self.code = 1
            return
        self.ring = SyntheticRing(capacity=4096, tick_hz=1_000_000_000,
                                  period_tick=self.period_ns)
        self.mem_fd = self.ring.fd
        self._thread = threading.Thread(target=self._produce, daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        assert self.ring is not None
        n = 0
        if self.opts.backlog:
            # Samples the probe took while the host was still booting it: they wait in
            # the ring (a console's buffer) and are read at once.
            first, flags = (np.array(x, dtype=np.int64) for x in zip(
                *(self._deadline(i) for i in range(self.opts.backlog))))
            self.ring.write(first, first + LATENCY_NS, flags.astype(np.uint32))
            for i in self.opts.lost_backlog:
                self.ring.corrupt_seq(i, i + 1)      # the reader counts it lost
            n = self.opts.backlog
        while not self._stop.wait(self.opts.slowdown * self.period_ns / 1e9):
            if self.opts.behaviour != "ok" and n >= self.opts.after:
                if self.opts.behaviour == "crash":
                    self.code = 3
                elif self.opts.behaviour == "probe-error":
                    self.ring.set_state(STATE_ERROR, 7)
                return                   # "hang": nothing more, the process lives on
            at, flag = self._deadline(n)
            deadline = np.array([at], dtype=np.int64)
            lat = SPIKE_NS if (n + 1) % SPIKE_EVERY == 0 else LATENCY_NS
            if self.opts.early_every and (n + 1) % self.opts.early_every == 0:
                lat = -EARLY_NS          # a timer that fired early (a bad calibration)
            if self.opts.inject_every and (n + 1) % self.opts.inject_every == 0:
                flag |= FLAG_INJECTED    # a probe that failed to delay it: no latency
                missed = (n + 1) // self.opts.inject_every <= self.opts.inject_misses
                lat = LATENCY_NS if missed else INJECT_NS
            self.ring.write(deadline, deadline + lat, np.array([flag], dtype=np.uint32))
            n += 1
            if self.samples and n >= self.samples:
                self.ring.set_state(STATE_DONE)
                self.code = 0
                return

    def exit_code(self) -> int | None:
        return self.code

    def stop(self, timeout_s: float = 5.0) -> int | None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self.code is None:
            self.code = -15
        if self.ring is None:
            super().stop(timeout_s)      # closes the memfd of a failed boot
        self.mem_fd = -1                 # a ring owns its fd; FakeTarget.close() frees it
        return self.code


class FakeTarget(Target):
    name = "fake"
    help = "a thread writing a synthetic ring (tests only)"
    options = (BEHAVIOUR,)

    def __init__(self, broken_accels: tuple[str, ...] = (), after: int = 100,
                 backlog: int = 0, early_every: int = 0, slowdown: int = 1,
                 skip_every: int = 0, inject_every: int = 0,
                 inject_misses: int = 0, lost_backlog: tuple[int, ...] = ()) -> None:
        self.broken_accels, self.after, self.backlog = broken_accels, after, backlog
        self.lost_backlog = lost_backlog
        self.early_every, self.slowdown, self.skip_every = early_every, slowdown, skip_every
        self.inject_every, self.inject_misses = inject_every, inject_misses
        self.processes: list[FakeProcess] = []

    def doctor(self) -> list[Check]:
        return [Check("fake", True, "nothing to fetch: the fake probe is a thread")]

    def configure(self, given: dict[str, Any], period_ns: int) -> FakeOptions:
        if period_ns < 100_000:
            raise TargetUsageError("the fake probe needs --period 100us or more")
        return FakeOptions(behaviour=given.get("fake_behaviour", "ok"), after=self.after,
                           broken_accels=self.broken_accels, backlog=self.backlog,
                           early_every=self.early_every, slowdown=self.slowdown,
                           skip_every=self.skip_every, inject_every=self.inject_every,
                           inject_misses=self.inject_misses,
                           lost_backlog=self.lost_backlog)

    def accel_plans(self, cfg: Any) -> list[AccelPlan]:
        return [AccelPlan("kvm", "kvm", False), AccelPlan("tcg", "tcg", True)]

    def boot_timeout_s(self, cfg: Any, plan: AccelPlan) -> float:
        return 2.0

    def spawn(self, cfg: Any, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        proc = FakeProcess(cfg.options, plan, cfg.period_ns, cfg.target_samples() or 0)
        self.processes.append(proc)
        return proc

    def open_source(self, cfg: Any, process: MeasuredProcess) -> SampleSource:
        return RingReader(process.mem_path, RING_OFFSET)

    def close(self) -> None:
        for p in self.processes:
            if p.ring is not None:
                p.ring.close()
