"""What a target is: the interface every module in irqlab/targets/ implements.

A target answers, for one kind of measured system (the probe in QEMU, this host, a Linux
guest, a Xen domain, ...), every question the run flow asks: which ``irqlab run`` options
it takes and what they mean for it, which accelerators to try, how long a boot and a stall
may take, which process hosts the probe, how its samples come back and what to record
about it. irqlab.measure only calls these methods and never names a target, so a new
target is one module here plus one line in the registry (irqlab/targets/__init__.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from irqlab.doctor import Check
from irqlab.runner.accel import AccelPlan
from irqlab.runner.process import MeasuredProcess
from irqlab.samples.source import SampleSource
# The run config holds a target's options; both live below the targets.
from irqlab.runconfig import RunConfig, RunEnd, TargetOptions

# Shortest period the probes accept (probes/guest/lib/probe.c PERIOD_NS_MIN,
# probes/native/native.c --period-ns): the CLI refuses what the probe would refuse.
PROBE_MIN_PERIOD_NS = 1_000


class TargetUsageError(ValueError):
    """An option value a target cannot take; the message names the fix (exit 2)."""


@dataclass(frozen=True)
class Option:
    """One ``irqlab run`` option a target takes: argparse's flags and keywords.

    Options shared by several targets are one object (irqlab.targets.options), so the
    CLI adds each once; its default is always None, so "not given" can be told from
    "given", and the target applies its own default in :meth:`Target.configure`."""

    flag: str
    dest: str
    kwargs: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


class Target(ABC):
    """One kind of measured system (see the module docstring)."""

    name: ClassVar[str]
    help: ClassVar[str]                       # one line for ``--target``'s help
    options: ClassVar[tuple[Option, ...]] = ()
    # Why an option this target does not take makes no sense for it (dest -> reason),
    # for the error a user gets; options not named here get a generic one.
    why_not: ClassVar[dict[str, str]] = {}
    min_period_ns: ClassVar[int] = PROBE_MIN_PERIOD_NS
    # ``--threshold`` when not given: the latency counted per window (the noise target:
    # the shortest gap its probe records).
    default_threshold_ns: ClassVar[int] = 30_000
    # Its runs take a place from a labgrid coordinator (``matrix --lg-places`` hands each
    # cell a free place in the option ``lg_place``).
    runs_on_lg_places: ClassVar[bool] = False
    # Seconds from start to the first sample, a rough planning guess (not measured on
    # this host): `irqlab matrix --dry-run`'s estimate of a cell (docs/matrix.md).
    boot_estimate_s: ClassVar[float] = 10.0
    # Its runs need nothing but this host and are cheap enough for the hundreds a
    # `irqlab bench noise` measures (its --target choices).
    noise_bench: ClassVar[bool] = False

    @abstractmethod
    def configure(self, given: dict[str, Any], period_ns: int) -> TargetOptions:
        """Typed options from the values given on the command line (dest -> value, only
        the options of this target that were given); TargetUsageError on bad ones."""

    @abstractmethod
    def accel_plans(self, cfg: RunConfig) -> list[AccelPlan]:
        """Accelerators to try, in order (the first that boots is used)."""

    def boot_timeout_s(self, cfg: RunConfig, plan: AccelPlan) -> float:
        """Longest wait for the probe to run under ``plan``."""
        return cfg.boot_timeout_s

    def stall_timeout_s(self, cfg: RunConfig) -> float:
        """Watchdog when --stall-timeout is not given: no sample for this long fails."""
        return max(3.0, 20 * cfg.period_ns / 1e9)

    @abstractmethod
    def spawn(self, cfg: RunConfig, plan: AccelPlan, name: str,
              process_args: list[str]) -> MeasuredProcess:
        """The (not yet started) process that hosts the probe; ``name`` names it and its
        threads; ``process_args`` are extra options for that process from the run hooks
        (RunHook.qemu_args: knobs and loads of QEMU-hosted targets; others ignore them)."""

    @abstractmethod
    def open_source(self, cfg: RunConfig, process: MeasuredProcess) -> SampleSource:
        """The reader of the probe's samples, once ``process`` has started."""

    def run_metadata(self, cfg: RunConfig) -> dict[str, Any]:
        """Facts recorded in the run's metadata before anything starts."""
        return {}

    def process_metadata(self, process: MeasuredProcess) -> dict[str, Any]:
        """Facts about the process recorded in the run's metadata (also after a failed
        boot): e.g. the hypervisor's version and command line."""
        return {}

    def trace_capture(self, options: TargetOptions, db_path: Path, period_ns: int) -> Any:
        """The run hook ``--trace`` adds: what records the events `irqlab explain` needs
        and keeps them beside the database. Default: host kernel events around the
        target's process (irqlab.trace.capture.TraceHook)."""
        from irqlab.trace.capture import TraceHook
        return TraceHook(db_path, period_ns)

    def summary_extra(self, end: RunEnd) -> dict[str, Any]:
        """Keys this target adds to the run's summary once the run has ended, its
        samples are stored and its hooks left (e.g. the noise target's ``noise``
        object); {} for a target whose samples say everything."""
        return {}

    def doctor(self) -> list[Check]:
        """What ``irqlab doctor`` checks for this target beyond the host-wide checks
        (QEMU, KVM, the probes): its images, its programs, each with its fix. Cheap and
        read-only; a target that needs nothing more returns []."""
        return []

    def boot_failure_detail(self, process: MeasuredProcess) -> str:
        """What the console said, for a probe that did not start in time."""
        return f"serial: {process.serial().strip()[-300:]!r}"
