"""Host and VMM knobs applied around a run (docs/design.md, "Loads, knobs, matrices").

Guest idle mode and the timer period are run options (``--idle``, ``--period``), not knobs:
the probe applies them itself and nothing on the host needs restoring.
"""

from __future__ import annotations

from typing import Any

from irqlab.knobs.base import NOT_APPLICABLE, Knob


def _knobs() -> dict[str, type[Knob]]:
    """Every knob by key. Built on first use: the knob modules import the runners, and
    `irqlab list` must not pay for them (docs/design.md, "Start-up")."""
    knobs = globals().get("KNOBS")
    if knobs is not None:
        return knobs
    from irqlab.knobs.block import AioKnob, IothreadKnob
    from irqlab.knobs.cpuidle import DeepestIdleStateKnob
    from irqlab.knobs.housekeeping import HousekeepingKnob
    from irqlab.knobs.kvm import CpuPmKnob, HaltPollGlobalKnob, HaltPollKnob
    from irqlab.knobs.net import QueuesKnob, VhostKnob
    from irqlab.knobs.vcpu import PinKnob, PrioKnob, VcpusKnob
    from irqlab.knobs.xen import (Credit2CapKnob, Credit2RatelimitKnob, Credit2WeightKnob,
                                  CpupoolKnob, CreditRatelimitKnob, CreditTsliceKnob,
                                  RtdsBudgetKnob, RtdsPeriodKnob)

    knobs = globals()["KNOBS"] = {k.key: k for k in (
        PinKnob, PrioKnob, VcpusKnob, CpuPmKnob, HaltPollKnob, HaltPollGlobalKnob, AioKnob,
        IothreadKnob, RtdsPeriodKnob, RtdsBudgetKnob, CpupoolKnob, Credit2WeightKnob,
        Credit2CapKnob, Credit2RatelimitKnob, CreditTsliceKnob, CreditRatelimitKnob,
        VhostKnob, QueuesKnob, DeepestIdleStateKnob, HousekeepingKnob)}
    return knobs


def __getattr__(name: str) -> Any:          # PEP 562: KNOBS on first use
    if name == "KNOBS":
        return _knobs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Run options users may try to pass as knobs: point them at the option.
RUN_OPTION_KNOBS = {"idle": "--idle hlt|poll", "period": "--period DUR"}


def make_knob(key: str, value: str) -> Knob | None:
    """A knob from its name and value, None for "off"/"none" (leave the setting alone, so
    a matrix can hold ``prio = ["off", 80]``); ValueError names the fix."""
    key = key.strip().replace("-", "_")
    if key in RUN_OPTION_KNOBS:
        raise ValueError(f"{key} is a run option, not a knob: use {RUN_OPTION_KNOBS[key]}")
    cls = _knobs().get(key)
    if cls is None:
        raise ValueError(f"unknown knob {key!r}; knobs: {', '.join(_knobs())}")
    if str(value).strip().lower() in ("off", "none") and not cls.accepts_off:
        return None
    try:
        return cls(str(value).strip())
    except ValueError as exc:
        raise ValueError(f"knob {key}: {exc}") from None


def parse_knob(spec: str) -> Knob | None:
    """``KEY=VALUE`` as given to --knob."""
    key, sep, value = spec.partition("=")
    if not sep:
        raise ValueError(f"--knob {spec!r}: write KEY=VALUE, e.g. prio=80 or pin=1")
    return make_knob(key, value)


__all__ = ["KNOBS", "NOT_APPLICABLE", "Knob", "make_knob", "parse_knob"]
