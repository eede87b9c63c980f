"""Serial-console flood (seed 000: synchronous console output raised the mean to ~1 ms).

source=neighbour (default): a second VM whose firmware writes to COM1 without pause; QEMU
emulates every byte (one I/O exit each) and writes it to ``sink`` (default /dev/null), as
a hypervisor's synchronous console would. source=guest is refused: the probe under test has
no console-output mode (its boot parameters are period_ns, idle, inject_*, samples, timer),
and bulk serial output from it would be a different probe.
"""

from __future__ import annotations

from pathlib import Path

from irqlab.knobs.values import parse_int
from irqlab.loads.base import Load
from irqlab.runner.scratch import ScratchDir
from irqlab.loads.vm import flood_rom, neighbour_plan, rom_vm_argv, vm_name


class ConsoleLoad(Load):
    kind = "console"
    tool = "qemu-system-x86_64"
    package = "qemu-system-x86"
    params = {"source": "neighbour (default); guest is not applicable to the probe",
              "spin": "busy-loop iterations between characters, 0-65535 (default 0: "
                      "flat out)",
              "sink": "file the neighbour's serial port writes to (default /dev/null)",
              "accel": "tcg (default) or kvm: the firmware runs in real mode, which "
                       "software KVM backends may not emulate"}

    def configure(self, params: dict[str, str]) -> None:
        source = params.get("source", "neighbour")
        if source == "guest":
            raise ValueError("console source=guest is not applicable here: the probe has "
                             "no console-output mode; use source=neighbour")
        if source != "neighbour":
            raise ValueError(f"console source {source!r}: use neighbour")
        self.spin = parse_int(params.get("spin", "0"), 0, 65535, "spin")
        self.sink = params.get("sink", "/dev/null")
        self.plan = neighbour_plan(params.get("accel", "tcg"))
        self.rom_path: str | None = None
        self._scratch: ScratchDir | None = None

    def prepare(self) -> None:
        # In a journalled scratch directory: a kill -9 of irqlab leaves no ROM behind
        # (the next start removes it, irqlab.runner.scratch).
        self._scratch = ScratchDir("irqlab-flood-")
        self.rom_path = str(Path(self._scratch.name) / "flood.rom")
        Path(self.rom_path).write_bytes(flood_rom(self.spin))

    def command(self) -> list[str]:
        self.details["accel"] = self.plan.label
        return rom_vm_argv(vm_name("console"), self.plan, self.rom_path,
                           f"file:{self.sink}")

    def cleanup(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
            self.rom_path = None
