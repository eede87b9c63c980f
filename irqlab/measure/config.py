"""What a run is asked to do (RunConfig), what it can be given (RunHook, with a
RunContext once the probe runs), whom it tells (Observer) and what it returns (RunResult).

RunConfig, TargetOptions, RunContext and RunHook live in irqlab.runconfig, below the
targets that take them; they are re-exported here, where the run flow's callers look."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from irqlab.runconfig import RunConfig, RunContext, RunEnd, RunHook, TargetOptions
from irqlab.targets import get_target

__all__ = ["Observer", "RunConfig", "RunContext", "RunEnd", "RunHook", "RunResult", "TargetOptions",
           "config_for_target"]


def config_for_target(target: str = "guest", given: dict[str, Any] | None = None,
                      **common: Any) -> RunConfig:
    """A config whose target options are made from option values as the CLI gives them
    (dest -> value, e.g. {"accel": "tcg", "icount": True}), checked by the target."""
    period_ns = common.get("period_ns", 1_000_000)
    return RunConfig(target=target,
                     options=get_target(target).configure(given or {}, period_ns), **common)


class Observer(Protocol):
    """What a front end receives while a run goes on (see irqlab.cli.render)."""

    def on_started(self, info: dict[str, Any]) -> None: ...
    def on_window(self, window: dict[str, Any], line: str) -> None: ...
    def on_progress(self, fraction: float, detail: str) -> None: ...
    def on_notice(self, text: str) -> None: ...


@dataclass
class RunResult:
    run_id: int
    status: str
    summary: dict[str, Any]
    windows: list[dict[str, Any]] = field(default_factory=list)
