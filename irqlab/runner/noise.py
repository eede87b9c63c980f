"""The noise probe on this host (``--target noise``): irqlab-noise, a busy loop per CPU
recording every gap of at least the threshold into one ring per CPU in a memfd, as the
native probe's rings (docs/formats.md sections 2 and 6)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from irqlab.cpus import format_cpu_list
from irqlab.runner.native import NATIVE_BUILD, NativeProbe

NOISE_PROBE = NATIVE_BUILD / "irqlab-noise"
# The name noise.c gives its busy-loop threads (PR_SET_NAME): how a trace tells the
# loop's own time from every other task's (irqlab.explain.noise).
NOISE_COMM = "irqlab-noise"


def noise_args(cpus: list[int], threshold_ns: int, capacity: int, duration_ns: int,
               fifo_priority: int | None, rt_fallback: bool) -> list[str]:
    """irqlab-noise's options (probes/native/noise.c): SCHED_OTHER (``--other``) unless
    a SCHED_FIFO priority is given."""
    args = ["--cpus", format_cpu_list(cpus), "--threshold-ns", str(threshold_ns),
            "--capacity", str(capacity)]
    if duration_ns:
        args += ["--duration-ns", str(duration_ns)]
    if fifo_priority is None:
        return args + ["--other"]
    return args + ["--priority", str(fifo_priority)] + (["--rt-fallback"] if rt_fallback
                                                        else [])


@dataclass
class NoiseProbe(NativeProbe):
    """A running irqlab-noise process and its shared ring memory. ``fifo_priority`` None:
    SCHED_OTHER (``--other``), as rtla osnoise runs its threads unless given -P."""

    program = "irqlab-noise"

    threshold_ns: int = 5_000
    duration_ns: int = 0             # 0: until stopped
    fifo_priority: int | None = None

    @property
    def probe_path(self) -> Path:
        return self.probe or NOISE_PROBE

    def probe_options(self, cpus: list[int]) -> list[str]:
        return noise_args(cpus, self.threshold_ns, self.capacity, self.duration_ns,
                          self.fifo_priority, self.rt_fallback)
