"""``--deepest-idle-state N``: the measured CPUs' cpuidle states deeper than N disabled
for the run, as rtla timerlat's ``--deepest-idle-state`` does (an exit from a deep
C-state is part of a sleeping thread's wake-up latency).

Each ``state<K>/disable`` file changed is journalled first (op ``write``: the old value
comes back after any end, also a ``kill -9``) and restored at stop (Linux
Documentation/admin-guide/pm/cpuidle.rst, "disable": 1 keeps the governor from
choosing the state). A host without cpuidle (no driver: ``cpuidle/current_driver``
absent or ``none``) is refused when the option is read, exit 2: the option cannot mean
anything there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from irqlab.cpus import online_cpus
from irqlab.journal import journal
from irqlab.knobs.base import Knob
# The journal's undo of op "write" (a file's old value written back) lives there.
from irqlab.knobs.kvm import undo_write  # noqa: F401
from irqlab.knobs.values import parse_int

CPU_ROOT = Path("/sys/devices/system/cpu")


def cpuidle_driver(root: Path) -> str | None:
    """The cpuidle driver's name, or None when the host has none."""
    try:
        name = (root / "cpuidle" / "current_driver").read_text().strip()
    except OSError:
        return None
    return None if name in ("", "none") else name


def idle_states(root: Path, cpu: int) -> list[Path]:
    """A CPU's ``cpuidle/state<K>`` directories, by K."""
    d = root / f"cpu{cpu}" / "cpuidle"
    try:
        found = [p for p in d.iterdir() if p.name.startswith("state")
                 and p.name[5:].isdigit()]
    except OSError:
        return []
    return sorted(found, key=lambda p: int(p.name[5:]))


class DeepestIdleStateKnob(Knob):
    key = "deepest_idle_state"
    metavar = "N"
    help = ("cpuidle states deeper than N disabled on the measured CPUs (0: only the "
            "shallowest; restored after the run); refused on a host without cpuidle")
    root = CPU_ROOT           # tests point this at a copy of the layout

    def parse(self, value: str) -> None:
        # Linux keeps at most CPUIDLE_STATE_MAX (10) states a CPU (include/linux/cpuidle.h).
        self.deepest = parse_int(value, 0, 9, "deepest idle state")
        driver = cpuidle_driver(self.root)
        if driver is None:
            raise ValueError(f"this host has no cpuidle driver ({self.root}/cpuidle/"
                             f"current_driver absent or none), so there are no idle "
                             f"states to limit: leave --deepest-idle-state out")
        self.driver = driver

    def after_start(self, ctx: Any) -> None:
        self._entries: list[tuple[int, Path, str]] = []
        cpus = ctx.source.ring_cpus() or online_cpus()
        self.details.update({"driver": self.driver, "cpus": cpus, "disabled": {}})
        for cpu in cpus:
            names = []
            for state in idle_states(self.root, cpu)[self.deepest + 1:]:
                path = state / "disable"
                try:
                    old = path.read_text().strip()
                    names.append((state / "name").read_text().strip())
                except OSError as exc:
                    self.status = f"failed: {path}: {exc.strerror}"
                    return
                if old == "1":
                    continue
                entry = journal().add("write", path=str(path), old=old)
                try:
                    path.write_text("1")
                except OSError as exc:
                    journal().done(entry)
                    self.status = f"failed: {path} is not writable ({exc.strerror})"
                    return
                self._entries.append((entry, path, old))
            self.details["disabled"][str(cpu)] = names
        self.status = "applied"
        if not any(self.details["disabled"].values()):
            self.details["note"] = f"no state deeper than {self.deepest}: nothing changed"

    def stop(self) -> None:
        restored = True
        for entry, path, old in reversed(getattr(self, "_entries", [])):
            try:
                path.write_text(old)
                journal().done(entry)
            except OSError as exc:
                # Left in the journal: the next irqlab start tries again.
                restored = f"failed: {path}: {exc.strerror}"
        if getattr(self, "_entries", None):
            self.details["restored"] = restored
        self._entries = []
