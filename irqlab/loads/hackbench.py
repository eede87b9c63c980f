"""Scheduler/messaging storm (seed 004's `hackbench 150 process 1000`): rt-tests' hackbench.

hackbench ends after its loops, so a shell repeats it for the whole run and stops at the
first failure with hackbench's exit code (that code is what stop() then checks).
"""

from __future__ import annotations

from irqlab.knobs.values import parse_int
from irqlab.loads.base import Load

_LOOP = 'while :; do hackbench "$@" >/dev/null || exit $?; done'


class HackbenchLoad(Load):
    kind = "hackbench"
    tool = "hackbench"
    package = "rt-tests"
    params = {"groups": "groups of 2x fds tasks (default 2)",
              "fds": "sender/receiver pairs per group (default 10)",
              "loops": "messages per sender per round (default 1000)",
              "mode": "process (default) or thread"}

    def configure(self, params: dict[str, str]) -> None:
        self.groups = parse_int(params.get("groups", "2"), 1, 1000, "groups")
        self.fds = parse_int(params.get("fds", "10"), 1, 1000, "fds")
        self.loops = parse_int(params.get("loops", "1000"), 1, 10**9, "loops")
        self.mode = params.get("mode", "process")
        if self.mode not in ("process", "thread"):
            raise ValueError(f"hackbench mode {self.mode!r}: use process or thread")

    def command(self) -> list[str]:
        return ["sh", "-c", _LOOP, "irqlab-hackbench", "-g", str(self.groups),
                "-f", str(self.fds), "-l", str(self.loops),
                "-T" if self.mode == "thread" else "-P"]
