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


@dataclass
class NoiseProbe(NativeProbe):
    """A running irqlab-noise process and its shared ring memory. ``priority`` None:
    SCHED_OTHER (``--other``), as rtla osnoise runs its threads unless given -P."""

    program = "irqlab-noise"

    threshold_ns: int = 5_000
    duration_ns: int = 0             # 0: until stopped
    fifo_priority: int | None = None

    @property
    def probe_path(self) -> Path:
        return self.probe or NOISE_PROBE

    def start(self) -> None:
        """Create the shared memory and start the probe; raises OSError with the reason."""
        if not self.probe_path.exists():
            raise FileNotFoundError(
                f"noise probe {self.probe_path} is not built: run `make -C probes/native` "
                f"(or the README's set-up command)")
        cpus = self.selected_cpus()
        self._create_memfd("irqlab-noise-rings", self.layout_bytes(len(cpus), self.capacity))
        args = ["--cpus", format_cpu_list(cpus), "--threshold-ns", str(self.threshold_ns),
                "--capacity", str(self.capacity)]
        if self.duration_ns:
            args += ["--duration-ns", str(self.duration_ns)]
        if self.fifo_priority is None:
            args.append("--other")
        else:
            args += ["--priority", str(self.fifo_priority)]
            if self.rt_fallback:
                args.append("--rt-fallback")
        self._spawn([str(self.probe_path), "--shm-fd", str(self.mem_fd)] + args)
