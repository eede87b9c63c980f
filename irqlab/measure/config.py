"""What a run is asked to do (RunConfig), what it can be given (RunHook), whom it tells
(Observer) and what it returns (RunResult)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class RunConfig:
    """Parameters of ``irqlab run`` after parsing (all durations in ns)."""

    target: str = "guest"
    arch: str = "x86_64"
    accel: str = "auto"
    icount: bool = False
    period_ns: int = 1_000_000
    duration_ns: int | None = 30_000_000_000
    samples: int | None = None
    window_ns: int = 10_000_000_000
    threshold_ns: int = 30_000
    warmup: int = 1
    idle: str = "hlt"
    inject_irqoff_ns: int = 0
    inject_every: int = 0
    name: str | None = None
    timer: str = "auto"
    memory_mib: int = 64
    boot_timeout_s: float = 30.0
    stall_timeout_s: float | None = None
    probe: Path | None = None
    hooks: list[Any] = field(default_factory=list)   # RunHook objects, not serialised
    suite: str | None = None
    cell: dict[str, Any] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    cpus: list[int] | None = None        # native/linux-guest: CPUs measured (None: default)
    priority: int = 90                   # native/linux-guest: SCHED_FIFO priority
    rt_fallback: bool = False            # native/linux-guest: SCHED_OTHER if RT is refused
    gic: int | None = None               # arm64 guest: GIC version (None: machine default)
    sink: str = "ring"                   # guest: samples via the RAM ring or the console
    xen_domain: str = "domU"             # xen: the probe as dom0 or a dom0less domU
    xen_sched: str = "credit2"           # xen: sched= (credit, credit2, rtds, null)
    xen_opts: dict[str, str] = field(default_factory=dict)   # xen: extra Xen options
    xen_binary: Path | None = None       # xen: hypervisor image (None: the cached one)
    neighbour: str = "none"              # xen: second domU on the pCPU (cpu/console/idle)

    def target_samples(self) -> int | None:
        """Samples the guest stops after, when the run is bounded by count."""
        if self.samples is not None:
            return self.samples
        if self.icount and self.duration_ns is not None:
            # Under icount guest time is virtual: bound the run by guest periods.
            return max(1, self.duration_ns // self.period_ns)
        return None

    def stall_s(self) -> float:
        """Watchdog: no sample for this long means the guest or QEMU is stuck."""
        if self.stall_timeout_s is not None:
            return self.stall_timeout_s
        return max(3.0, 20 * self.period_ns / 1e9)


class RunHook(Protocol):
    """Something started or applied around a run: a load, a host knob (irqlab.loads,
    irqlab.knobs). Hooks are entered in order and always left in reverse order, also after
    a failure or Ctrl-C, so every touched host setting is restored."""

    name: str

    def qemu_args(self) -> list[str]: ...          # extra QEMU options, [] if none
    def before_start(self) -> None: ...            # e.g. start a load, write a sysfs knob
    def after_start(self, target: Any) -> None: ...  # e.g. pin vCPU threads (QEMU runs)
    def metadata(self) -> dict[str, Any]: ...      # what was applied, or why not
    def stop(self) -> None: ...                    # stop / restore; must not raise


class Observer(Protocol):
    """What a front end receives while a run goes on (see irqlab.cli.render)."""

    def on_started(self, info: dict[str, Any]) -> None: ...
    def on_window(self, window: dict[str, Any], line: str) -> None: ...
    def on_progress(self, fraction: float, detail: str) -> None: ...
    def on_notice(self, text: str) -> None: ...


@dataclass
class RunResult:
    run_id: int
    status: str
    summary: dict[str, Any]
    windows: list[dict[str, Any]] = field(default_factory=list)
