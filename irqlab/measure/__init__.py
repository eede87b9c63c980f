"""Measure package: the run flow (run), its configuration and the JSON it produces.

Modules, in the order a run uses them: config (RunConfig, RunHook, Observer), targets
(which process, which accelerators, which sample reader), boot, stream (the measuring
loop), summary (window/summary JSON, histogram rows), run (the whole flow).
"""

from irqlab.measure.config import Observer, RunConfig, RunHook, RunResult
from irqlab.measure.run import run
from irqlab.measure.summary import SUMMARY_VERSION, histogram_rows, window_dict

__all__ = ["Observer", "RunConfig", "RunHook", "RunResult", "SUMMARY_VERSION",
           "histogram_rows", "run", "window_dict"]
