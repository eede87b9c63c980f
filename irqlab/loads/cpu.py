"""CPU burn (seed 000's "Dom0 burning CPU"): stress-ng --cpu."""

from __future__ import annotations

from irqlab.knobs.values import parse_int
from irqlab.loads.base import Load


class CpuLoad(Load):
    kind = "cpu"
    tool = "stress-ng"
    package = "stress-ng"
    params = {"workers": "burner processes (default 1)",
              "load": "percent busy per worker, 1-100 (default 100)"}

    def configure(self, params: dict[str, str]) -> None:
        self.workers = parse_int(params.get("workers", "1"), 1, 256, "workers")
        self.load = parse_int(params.get("load", "100"), 1, 100, "load")

    def command(self) -> list[str]:
        return ["stress-ng", "--quiet", "--cpu", str(self.workers),
                "--cpu-load", str(self.load)]
