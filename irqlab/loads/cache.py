"""Cache and memory-bandwidth thrash (seed 004's calibrator loop): stress-ng --cache."""

from __future__ import annotations

from irqlab.knobs.values import parse_int
from irqlab.loads.base import Load


class CacheLoad(Load):
    kind = "cache"
    tool = "stress-ng"
    package = "stress-ng"
    params = {"workers": "thrashing processes (default 1)",
              "method": "cache (default: touch the last-level cache) or stream "
                        "(memory bandwidth)"}

    def configure(self, params: dict[str, str]) -> None:
        self.workers = parse_int(params.get("workers", "1"), 1, 256, "workers")
        self.method = params.get("method", "cache")
        if self.method not in ("cache", "stream"):
            raise ValueError(f"cache method {self.method!r}: use cache or stream")

    def command(self) -> list[str]:
        return ["stress-ng", "--quiet", f"--{self.method}", str(self.workers)]
