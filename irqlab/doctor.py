"""One line of ``irqlab doctor``: what was checked, ok or not, what was found, the fix.

Here, apart from the command (irqlab.cli.cmd_doctor), so that each target declares its
own checks (Target.doctor in irqlab/targets/) without importing the CLI. Standard
library only: every layer may import it.
"""

from __future__ import annotations

from dataclasses import dataclass

# The command that installs or fetches what a failed check lacks.
SETUP = "./setup.sh --install-only"
NEEDED, NOT_YET = "needed to run", "not yet created"


@dataclass
class Check:
    check: str
    ok: bool
    detail: str
    fix: str | None = None
    # "needed to run": a NO makes `irqlab doctor` exit 1. "not yet created": something
    # irqlab makes on first use (a store file): said, never a failure (issue 32).
    group: str = "needed to run"

    def line(self) -> str:
        mark = "-- " if self.group == NOT_YET else "ok " if self.ok else "NO "
        return f"{mark} {self.check:<14} {self.detail}" + (f" — fix: {self.fix}"
                                                          if self.fix else "")

    def lines(self, width: int = 120) -> list[str]:
        """line() within ``width`` columns, cut at spaces, the rest under the detail."""
        import textwrap

        return textwrap.wrap(self.line(), width, subsequent_indent=" " * 19,
                             break_long_words=False, break_on_hyphens=False)
