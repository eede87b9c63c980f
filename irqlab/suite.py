"""Side by side and replicates: several runs stored as one suite, or as series.

``irqlab run --target native,guest,linux-guest`` (or ``--target all``) runs each target
with the same period, duration, window and threshold. Every run is an ordinary run in the
store with ``suite`` = the suite's name and ``cell`` = {"target": ...}, so the suite can
be reported later; the comparison rows (one per target) are what the CLI prints.

``--repeat N`` makes N runs of each configuration, a *series* per configuration: each run
is an ordinary run with the same name, tag ``series=<id>`` and metadata ``series`` =
``{"id", "index", "count"}``. Several configurations' runs are interleaved, round by round
(A1 B1 A2 B2 …), so slow drift of the host (temperature, frequency, other load) hits every
configuration alike instead of biasing the one measured last: the practice of Kalibera &
Jones, "Rigorous benchmarking in reasonable time" (ISMM 2013), and of hyperfine.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import signal
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from irqlab.measure import Observer, RunConfig, RunResult, run
from irqlab.measure.boot import StopFlag
from irqlab.reports.select import SERIES_TAG
from irqlab.stats.fields import SUITE_TABLE
from irqlab.store import Store

# Comparison columns: (heading, summary key), from the catalog (irqlab.stats.fields).
COLUMNS: tuple[tuple[str, str], ...] = tuple((c.heading, c.key) for c in SUITE_TABLE)

SERIES_VERSION = 1             # of the {"type": "series"} line (docs/formats.md)
_ID_STEM_CHARS = 40            # a series id's readable part: the run name, cut

T = TypeVar("T")


def new_series_id(name: str) -> str:
    """A short unique id: the run name made safe ([A-Za-z0-9._-], so it needs no quoting
    in a shell or a selector) and 6 random hex digits (two series of one name differ)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:_ID_STEM_CHARS]
    return f"{stem or 'series'}-{secrets.token_hex(3)}"


def in_series(cfg: RunConfig, series_id: str, index: int, count: int) -> RunConfig:
    """``cfg`` as run ``index`` (1-based) of ``count`` of series ``series_id``: the tag and
    the metadata every reader finds it by (a copy; hooks are the caller's to renew)."""
    return dataclasses.replace(
        cfg, tags={**cfg.tags, SERIES_TAG: series_id},
        metadata={**cfg.metadata,
                  SERIES_TAG: {"id": series_id, "index": index, "count": count}})


def interleave(plans: Sequence[Sequence[T]]) -> list[T]:
    """Round-robin over the configurations' runs: round 1 of each, then round 2, …
    (a configuration with fewer runs left drops out of the later rounds)."""
    rounds = max((len(p) for p in plans), default=0)
    return [p[i] for i in range(rounds) for p in plans if i < len(p)]


@dataclass
class Series:
    """The runs of one configuration made by one ``--repeat``."""

    id: str
    name: str
    count: int
    run_ids: list[int] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)

    def add(self, result: RunResult) -> None:
        self.run_ids.append(result.run_id)
        self.statuses.append(result.status)

    def json_object(self) -> dict[str, Any]:
        """The ``{"type": "series", ...}`` line (docs/formats.md section 4)."""
        return {"type": "series", "version": SERIES_VERSION, "id": self.id,
                "name": self.name, "count": self.count, "run_ids": list(self.run_ids),
                "statuses": list(self.statuses)}

    def line(self, others: Sequence["Series"] = ()) -> str:
        """One line for people: what was made and how to compare it."""
        ok = sum(s == "ok" for s in self.statuses)
        # Alone: "..." stands for what to hold it against (another series, a run).
        refs = " ".join(f"series:{s.id}" for s in [self, *others]) if others \
            else f"series:{self.id} ..."
        return (f"series {self.id}: {len(self.run_ids)} runs (ok {ok}) — compare with: "
                f"irqlab compare {refs}")


@dataclass
class SuiteResult:
    name: str
    targets: list[str]
    results: list[RunResult] = field(default_factory=list)
    repeat: int = 1
    run_targets: list[str] = field(default_factory=list)   # target of each result
    series: list[Series] = field(default_factory=list)     # one per target, if repeat > 1
    stopped: bool = False          # Ctrl-C between two runs
    auto: dict[str, Any] | None = None  # --repeat auto: where it stopped and why

    @property
    def status(self) -> str:
        statuses = [r.status for r in self.results] + ["interrupted"] * self.stopped
        return suite_status(statuses, len(self.targets) * self.repeat)

    def rows(self) -> list[dict[str, Any]]:
        """One comparison row per run (per target unless repeated), in run order."""
        out = []
        targets = self.run_targets or self.targets
        for target, res in zip(targets, self.results):
            s = res.summary
            # "lost" is also a column: update() keeps it in this place (JSON key order).
            row = {"target": target, "run_id": res.run_id, "status": res.status,
                   "accel": s.get("accel"), "emulated": s.get("emulated"),
                   "lost": s.get("lost"), "threshold_ns": s.get("threshold_ns")}
            row.update({key: s.get(key) for _h, key in COLUMNS})
            out.append(row)
        return out

    def json_object(self) -> dict[str, Any]:
        """The ``{"type": "suite", ...}`` line (docs/formats.md section 4)."""
        out = {"type": "suite", "suite": self.name, "status": self.status,
               "targets": self.targets, "rows": self.rows()}
        if self.auto is not None:
            out["auto"] = self.auto
        return out


def suite_status(statuses: list[str], planned: int) -> str:
    """``interrupted`` if a run was, ``ok`` if every planned run ran and ended ok, else
    ``failed``: the exit status of a suite and of a series (130, 0, 1)."""
    if "interrupted" in statuses:
        return "interrupted"
    if len(statuses) == planned and all(s == "ok" for s in statuses):
        return "ok"
    return "failed"


def series_plan(cfgs: list[RunConfig], repeat: int,
                renew: Callable[[RunConfig], RunConfig]) -> list[tuple[int, RunConfig]]:
    """(configuration index, config) of every run, interleaved; with ``repeat`` > 1 each
    configuration is a series of its own (its name fixed now, so all its runs share it).
    ``renew`` gives a config new hook objects: a hook (a load, a capture) lives one run."""
    if repeat == 1:
        return list(enumerate(cfgs))
    plans = []
    for i, cfg in enumerate(cfgs):
        series_id = new_series_id(cfg.name or cfg.target)
        runs = [(i, in_series(cfg if k == 1 else renew(cfg), series_id, k, repeat))
                for k in range(1, repeat + 1)]
        plans.append(runs)
    return interleave(plans)


def run_suite(cfgs: list[RunConfig], store: Store, observer: Observer,
              after_run: Callable[[RunResult], None] | None = None, repeat: int = 1,
              renew: Callable[[RunConfig], RunConfig] = lambda c: c,
              until: Callable[["SuiteResult", int], bool] | None = None) -> SuiteResult:
    """Run each config (one per target, made by the CLI with the targets' own rules and
    their own hooks) ``repeat`` times, interleaved; stops early on Ctrl-C/SIGTERM (what
    was stored stays), or when ``until(suite, rounds)``, asked after each whole round
    (every config run once more), says enough (`--repeat auto`: ``repeat`` is then the
    cap). A single config with ``repeat`` > 1 is a plain series."""
    suite = SuiteResult(cfgs[0].suite or "suite", [c.target for c in cfgs], repeat=repeat)
    plan = series_plan(cfgs, repeat, renew)
    if repeat > 1:
        by_cfg: dict[int, Series] = {}
        for i, cfg in plan:
            meta = cfg.metadata[SERIES_TAG]
            by_cfg.setdefault(i, Series(meta["id"], cfg.name or cfg.target, repeat))
        suite.series = [by_cfg[i] for i in sorted(by_cfg)]
    # Ctrl-C between two runs must stop the suite too, and must not land as an exception
    # inside a store query (DuckDB turns it into "Query interrupted"): a flag of the
    # suite's own holds it; each run installs its own handler while it runs.
    with StopFlag() as stop:
        for i, cfg in plan:
            if stop.signum is not None:
                suite.stopped = True
                break
            try:
                result = run(cfg, store, _Forward(observer, stop))
                suite.results.append(result)
                suite.run_targets.append(cfg.target)
                if suite.series:
                    suite.series[i].add(result)
                if after_run is not None:
                    after_run(result)
            except KeyboardInterrupt:
                suite.stopped = True
                break
            if result.status == "interrupted":
                break
            rounds, left = divmod(len(suite.results), len(cfgs))
            # Asked after the last round too: it records where the cap left things.
            if until is not None and left == 0 and until(suite, rounds) and rounds < repeat:
                _end_early(suite, rounds)
                break
    return suite


def _end_early(suite: SuiteResult, rounds: int) -> None:
    """A suite stopped by its ``until`` after ``rounds`` whole rounds: that many runs
    were planned after all (its status counts them; each series says so)."""
    suite.repeat = rounds
    for series in suite.series:
        series.count = rounds


class _Forward:
    """A run's observer that passes on a Ctrl-C the suite's flag caught just before the
    run installed its own handler (while it recorded its row): at the run's first
    callback the signal is raised again, now for the run, which then stops."""

    def __init__(self, observer: Observer, stop: StopFlag) -> None:
        self.observer, self.stop, self.sent = observer, stop, False

    def _forward(self) -> None:
        if self.stop.signum is not None and not self.sent:
            self.sent = True
            signal.raise_signal(self.stop.signum)

    def on_started(self, info: dict[str, Any]) -> None:
        self._forward()
        self.observer.on_started(info)

    def on_window(self, window: dict[str, Any], line: str) -> None:
        self._forward()
        self.observer.on_window(window, line)

    def on_progress(self, fraction: float, detail: str) -> None:
        self._forward()
        self.observer.on_progress(fraction, detail)

    def on_notice(self, text: str) -> None:
        self._forward()
        self.observer.on_notice(text)
