"""The native probe on this host: a process writing one ring per CPU into a memfd.

irqlab creates the shared memory (a memfd sized for every ring), hands the probe its fd,
and reads the rings through /proc/self/fd/N: nothing on disk, nothing left behind. A
MeasuredProcess (irqlab.runner.process) like QemuGuest, so the run flow in irqlab.measure
treats it like any target.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from irqlab.cpus import format_cpu_list, online_cpus
from irqlab.paths import built
from irqlab.runner.process import MeasuredProcess

NATIVE_BUILD = built("probes/native/build")
NATIVE_PROBE = NATIVE_BUILD / "irqlab-native"
NATIVE_INIT = NATIVE_BUILD / "irqlab-init"
DEFAULT_CAPACITY = 65536

# Exit codes of irqlab-native (probes/native/native.c).
EXIT_DONE, EXIT_RUNTIME, EXIT_USAGE, EXIT_NO_RT = 0, 1, 2, 3


def probe_args(period_ns: int, cpus: list[int], priority: int, rt_fallback: bool,
               samples_per_cpu: int, capacity: int) -> list[str]:
    """Options of irqlab-native shared by the host and Linux-guest targets."""
    args = ["--cpus", format_cpu_list(cpus), "--priority", str(priority),
            "--period-ns", str(period_ns), "--capacity", str(capacity)]
    if samples_per_cpu:
        args += ["--samples", str(samples_per_cpu)]
    if rt_fallback:
        args.append("--rt-fallback")
    return args


def no_layout(rings: int, capacity: int) -> int:
    """Default of the targets' ``layout_bytes``: a target built without it cannot start."""
    raise RuntimeError("the ring layout size was not given (irqlab.targets gives it)")


@dataclass
class NativeProbe(MeasuredProcess):
    """A running irqlab-native process and its shared ring memory."""

    program = "irqlab-native"

    period_ns: int
    cpus: list[int] | None = None
    priority: int = 90
    rt_fallback: bool = False
    samples: int = 0                 # total over CPUs; 0 = until stopped
    capacity: int = DEFAULT_CAPACITY
    probe: Path | None = None
    name: str = "irqlab"
    # Bytes the ring directory + rings take, (rings, capacity) -> bytes: the ring
    # format belongs to the samples layer, which the runner does not import.
    layout_bytes: Callable[[int, int], int] = no_layout

    @property
    def probe_path(self) -> Path:
        return self.probe or NATIVE_PROBE

    def selected_cpus(self) -> list[int]:
        return list(self.cpus) if self.cpus else online_cpus()

    def start(self) -> None:
        """Create the shared memory and start the probe; raises OSError with the reason."""
        if not self.probe_path.exists():
            raise FileNotFoundError(
                f"{self.program} {self.probe_path} is not built: run `make -C "
                f"probes/native` (or the README's set-up command)")
        cpus = self.selected_cpus()
        self._create_memfd(f"{self.program}-rings",
                           self.layout_bytes(len(cpus), self.capacity))
        self._spawn([str(self.probe_path), "--shm-fd", str(self.mem_fd)]
                    + self.probe_options(cpus))

    def probe_options(self, cpus: list[int]) -> list[str]:
        """The program's options beyond its shared memory, for ``cpus``."""
        per_cpu = -(-self.samples // len(cpus)) if self.samples else 0
        return probe_args(self.period_ns, cpus, self.priority, self.rt_fallback, per_cpu,
                          self.capacity)

    @property
    def mem_paths(self) -> list[str]:
        return [self.mem_path]

    def exited_done(self, code: int) -> bool:
        return code == EXIT_DONE

    def exited_error(self, code: int) -> bool:
        return code in (EXIT_RUNTIME, EXIT_USAGE, EXIT_NO_RT)
