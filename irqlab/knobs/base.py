"""A knob: a host or VMM setting applied around one run (a RunHook, see irqlab.measure).

Every knob is recorded in the run's metadata (``hooks``) with what was asked, what was
done, and, when the host does not allow it, ``not applicable here: <reason>`` — a knob is
never silently ignored. Host state a knob changes is journalled first (irqlab.journal)
and restored in ``stop()``, which runs after success, failure and Ctrl-C alike.
"""

from __future__ import annotations

from typing import Any

NOT_APPLICABLE = "not applicable here"


class Knob:
    key: str = ""          # knob name in --knob KEY=V, scenario files and --KEY options
    metavar: str = "V"
    help: str = ""
    accepts_off = False    # on/off knobs take "off" themselves; others read it as "unset"
    requires: str | None = None   # a target capability (RunHook.requires); none

    def __init__(self, value: str) -> None:
        self.value = value
        self.status = "requested"      # becomes applied / not applicable here: ... / failed
        self.details: dict[str, Any] = {}
        self.parse(value)

    @property
    def name(self) -> str:
        return f"knob:{self.key}"

    def parse(self, value: str) -> None:
        """Check the value; raise ValueError naming the accepted values."""

    def qemu_args(self) -> list[str]:
        return []

    def before_start(self) -> None:
        pass

    def after_start(self, ctx: Any) -> None:
        """The probe runs; ``ctx`` is the RunContext (run id, process, source, plan)."""

    def stop(self) -> None:
        pass

    def not_applicable(self, reason: str) -> None:
        self.status = f"{NOT_APPLICABLE}: {reason}"

    def metadata(self) -> dict[str, Any]:
        status = self.status
        if status == "requested":
            status = "not reached: the run ended before the guest started"
        return {"requested": self.value, "status": status, **self.details}


def qemu_accel(ctx: Any) -> str | None:
    """'kvm' or 'tcg' for a run under QEMU, None for a run that is not (the native
    probe's plan is "none"). ``ctx``: the RunContext (irqlab.runconfig)."""
    return ctx.plan.accel if ctx.plan.accel in ("kvm", "tcg") else None
