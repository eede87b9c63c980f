"""What a run is asked to do (RunConfig, with the target's TargetOptions) and what it can
be given (RunHook, with a RunContext once the probe runs).

These sit below irqlab/targets/ (docs/design.md, layers): a target's methods take the run
config, hooks (knobs, loads, trace) take the context, and the run flow (irqlab.measure)
builds both, so every one of them imports this module and it imports none of them.
A config for a target by name, with its options checked by that target, is
irqlab.measure.config_for_target (the target registry is above this module).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from irqlab.runner.accel import AccelPlan
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.source import SampleSource


@dataclass
class TargetOptions:
    """The typed options of one run's target (each target extends it).

    ``arch`` is what the probe runs on (summary key ``arch`` before the probe reports
    it); ``icount`` says guest time is virtual, so a --duration becomes a sample count."""

    arch: str = "x86_64"
    icount: bool = False

    def capabilities(self) -> frozenset[str]:
        """What run hooks may require of this target (RunHook.requires): e.g. "xen-dom0",
        a Linux dom0 that runs loads and xl for the run. Most targets offer none."""
        return frozenset()

    def self_check(self) -> bool:
        """True when the run injects known delays (``--inject-every N``, with
        ``--inject-irqoff`` or ``--inject-delay``): its summary then carries the
        self-check's verdict. A target with a self-check has an ``inject_every`` field."""
        return bool(getattr(self, "inject_every", 0))


# Parameters stored only when given, as runs (and monitors' configuration digests) from
# before them have none.
_ABSENT_UNLESS_GIVEN = ("break_at_ns", "on_threshold_ns", "on_threshold_actions")


@dataclass
class RunConfig:
    """Parameters of ``irqlab run`` after parsing (all durations in ns).

    ``options`` are the target's own, typed by the target (irqlab.targets); everything
    else here means the same for every target."""

    target: str = "guest"
    options: TargetOptions = field(default_factory=TargetOptions)
    period_ns: int = 1_000_000
    duration_ns: int | None = 30_000_000_000
    samples: int | None = None
    window_ns: int = 10_000_000_000
    threshold_ns: int = 30_000
    warmup: int = 1
    name: str | None = None
    boot_timeout_s: float = 30.0
    stall_timeout_s: float | None = None   # None: the target's default
    # --break-at: the run stops at the first sample above this latency (measure.stream).
    break_at_ns: int | None = None
    # --on-threshold: every sample above this latency is a spike: SpikeListener hooks
    # (the flight recorder) are told, and the actions run (measure.stream.OnThreshold).
    on_threshold_ns: int | None = None
    on_threshold_actions: list[str] = field(default_factory=list)  # signal:PID, shell:CMD
    hooks: list[Any] = field(default_factory=list)   # RunHook objects, not serialised
    suite: str | None = None
    cell: dict[str, Any] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # Keys the caller adds to the run's stored metadata from its first row on (e.g.
    # "series" of `irqlab run --repeat`); not parameters, so not in params().
    metadata: dict[str, Any] = field(default_factory=dict)

    def target_samples(self) -> int | None:
        """Samples the guest stops after, when the run is bounded by count."""
        if self.samples is not None:
            return self.samples
        if self.options.icount and self.duration_ns is not None:
            # Under icount guest time is virtual: bound the run by guest periods.
            return max(1, self.duration_ns // self.period_ns)
        return None

    def params(self) -> dict[str, Any]:
        """The run's parameters as stored (JSON): the common ones and the target's."""
        out: dict[str, Any] = {}
        for obj in (self, self.options):
            for f in fields(obj):
                if f.name in ("hooks", "options", "metadata"):
                    continue
                val = getattr(obj, f.name)
                if f.name in _ABSENT_UNLESS_GIVEN and not val:
                    continue    # absent unless given: like the runs stored before them
                out[f.name] = str(val) if isinstance(val, Path) else val
        return out


@dataclass
class RunContext:
    """What a run hook is given once the probe runs (RunHook.after_start)."""

    run_id: int
    process: MeasuredProcess       # the started process (its pid: proc.pid)
    source: SampleSource         # the run's samples (a hook may only peek())
    plan: AccelPlan              # the accelerator it really runs under


class RunHook(Protocol):
    """Something started or applied around a run: a load, a host knob (irqlab.loads,
    irqlab.knobs). Hooks are entered in order and always left in reverse order, also after
    a failure or Ctrl-C, so every touched host setting is restored."""

    name: str
    # A target capability the hook needs (TargetOptions.capabilities, e.g. "xen-dom0" for
    # loads dom0 runs), or None; a target without it refuses the hook before the run.
    requires: str | None

    def qemu_args(self) -> list[str]: ...          # extra QEMU options, [] if none
    def before_start(self) -> None: ...            # e.g. start a load, write a sysfs knob
    def after_start(self, ctx: RunContext) -> None: ...  # e.g. pin vCPU threads
    def metadata(self) -> dict[str, Any]: ...      # what was applied, or why not
    def stop(self) -> None: ...                    # stop / restore; must not raise


@dataclass
class RunEnd:
    """What a target is given once its run has ended (Target.summary_extra): the store
    holding the run's samples, its metadata (hooks' included), per ring the source's
    counters (SampleSource.per_ring), the samples' tick rate, and where to say what
    went wrong without failing the run."""

    run_id: int
    store: Any                   # irqlab.store.Store (above this module)
    metadata: dict[str, Any]
    per_ring: list[dict[str, Any]]
    tick_hz: int
    threshold_ns: int
    notice: Any                  # Callable[[str], None]


@runtime_checkable
class SpikeListener(Protocol):
    """Told of every sample above ``--on-threshold`` (the flight recorder,
    irqlab.trace.recorder, a run hook; a monitor's metrics), on the run flow's thread:
    it must return at once. ``spike``: seq, cpu, deadline_tick, entry_tick, latency_ns,
    and explain (the command explaining its kept trace window, "" when none is kept).
    ``keeps_trace``: whether it keeps that window."""

    keeps_trace: bool

    def on_spike(self, spike: dict[str, Any]) -> None: ...


@runtime_checkable
class LiveCapture(Protocol):
    """A capture hook a run reads while it records (the window lines' IRQ and thread
    columns, irqlab.explain.live). ``capture_kind()``: its kind (irqlab.explain.registry's
    keys), which says whether it has a capture on the samples' clock;
    ``keep_live()``: from now on keep the pages it reads of that capture, until asked
    (False: it reads none while it records, e.g. the flight recorder);
    ``live_pages()``: (the header they decode with, the (cpu, page) read since the last
    call), None while it has nothing to give. Called on the run flow's thread at each
    window: it must return at once."""

    def capture_kind(self) -> str: ...
    def keep_live(self) -> bool: ...
    def live_pages(self) -> tuple[dict[str, Any], list[tuple[int, bytes]]] | None: ...
