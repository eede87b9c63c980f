"""Measure package: the run flow (run), its configuration and the JSON it produces.

Modules, in the order a run uses them: config (Observer, RunResult; RunConfig, RunHook and
RunContext re-exported from irqlab.runconfig, below the targets),
boot (start the target's process, wait for its probe), stream (the measuring loop),
summary (window/summary JSON, histogram rows), run (the whole flow). What is measured
comes from irqlab.targets; nothing here names a target.
"""

from irqlab.measure.config import (Observer, RunConfig, RunContext, RunHook, RunResult,
                                   TargetOptions, config_for_target)
from irqlab.measure.run import run
from irqlab.measure.summary import SUMMARY_VERSION, histogram_rows, window_dict

__all__ = ["Observer", "RunConfig", "RunContext", "RunHook", "RunResult", "SUMMARY_VERSION",
           "TargetOptions", "config_for_target",
           "histogram_rows", "run", "window_dict"]
