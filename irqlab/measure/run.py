"""One measurement run, start to end: record -> boot -> stream -> finish (docs/design.md
tells these steps in prose).

probes -> runner -> samples -> stats -> store: the measure package is the only one that
knows all of them; it reaches the measured system only through its target
(irqlab.targets) and never names one.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from irqlab import __version__
from irqlab.measure.boot import StopFlag, boot
from irqlab.measure.config import Observer, RunConfig, RunContext, RunEnd, RunResult
from irqlab.measure.stream import (BreakAt, DurationBound, MeasureState, OnThreshold,
                                   emit_window, stream)
from irqlab.measure.summary import build_summary, histogram_rows, probe_meta
from irqlab.runconfig import LiveCapture
from irqlab.runner.accel import AccelPlan
from irqlab.runner.hostinfo import host_info
from irqlab.samples.layout import RingError
from irqlab.stats import RunStats, RunSummary
from irqlab.stats.percpu import PerCpuStats
from irqlab.store import Store, StoreWriteError
from irqlab.store.percentiles import per_cpu_exact, with_exact_percentiles
from irqlab.store.recover import writer_identity
from irqlab.store.sample_files import FILES_MIN_SAMPLES_PER_WINDOW
from irqlab.targets import get_target
from irqlab.store.interface import NewRun


def run(cfg: RunConfig, store: Store, observer: Observer) -> RunResult:
    """Measure once: boot, stream samples into stats and store, stop, summarise."""
    return Run(cfg, store, observer).execute()


class Run(MeasureState):
    """The state of one run as it moves through its steps (each a method below); the
    measuring loop (stream) works on it as its MeasureState."""

    def __init__(self, cfg: RunConfig, store: Store, observer: Observer) -> None:
        super().__init__(cfg, store, observer)
        self.target = get_target(cfg.target)
        self.name = cfg.name or f"{cfg.target}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.meta: dict[str, Any] = {}
        self.entered: list[Any] = []          # hooks entered, left in reverse
        self.spike_listeners: list[Any] = []  # SpikeListeners beside the hooks
        self.plan: AccelPlan | None = None
        self.per_ring: list[dict[str, Any]] = []
        self.lost = 0

    def execute(self) -> RunResult:
        self.record()
        crash: BaseException | None = None
        with StopFlag() as stop:
            try:
                for hook in self.cfg.hooks:
                    self.entered.append(hook)
                    hook.before_start()
                if self.boot(stop):
                    self.start()
                    self.measure(stop)
            except (RingError, OSError) as exc:
                self.status, self.message = "failed", str(exc)
            except StoreWriteError as exc:
                self.status, self.message = "failed", _store_failed(exc)
            except BaseException as exc:
                # A bug or an unexpected failure: store the run as failed with what was
                # collected, then let the exception surface.
                self.status = "failed"
                self.message = f"internal error: {type(exc).__name__}: {exc}"
                crash = exc
            finally:
                self.stop()
            result = self.finish()
        if crash is not None:
            raise crash
        return result

    # -- steps ---------------------------------------------------------------------------

    def record(self) -> None:
        """Host facts and the run row (status ``running``), before anything starts, so
        even a run that never boots is recorded."""
        # writer: who measures this run, so a later start can tell it died (store.recover).
        self.meta = {"irqlab_version": __version__, "host": host_info(),
                     **self.target.run_metadata(self.cfg), "accel_attempts": [],
                     "writer": writer_identity(),
                     # Global identity, so a lab store never mixes two hosts' run 1.
                     "run_uuid": str(uuid.uuid4()), **self.cfg.metadata}
        self.run_id = self.store.create_run(NewRun(
            self.name, self.cfg.target, self.cfg.params(), self.meta, tags=self.cfg.tags,
            suite=self.cfg.suite, cell=self.cfg.cell))
        if self.cfg.window_ns // self.cfg.period_ns >= FILES_MIN_SAMPLES_PER_WINDOW:
            self.store.keep_samples_in_files(self.run_id)   # big windows: sample files

    def boot(self, stop: StopFlag) -> bool:
        """Try the target's accelerators in order until the probe runs; False if none
        did (or the run was interrupted)."""
        process_args = [a for h in self.cfg.hooks for a in h.qemu_args()]
        for candidate in self.target.accel_plans(self.cfg):
            self.process, self.source, err = boot(self.target, self.cfg, candidate,
                                                  f"irqlab-{self.run_id}", process_args, stop)
            self.meta["accel_attempts"].append({"accel": candidate.label, "error": err,
                                                "qemu_argv": self.process.argv})
            self.meta.update(self.target.process_metadata(self.process))
            if err is None:
                self.plan = candidate
                return True
            if self.source is not None:
                self.source.close()
                self.source = None    # closed: the cleanup must not read it again
            # Stopped, but kept: the run's metadata keeps what it printed.
            self.meta["accel_attempts"][-1]["exit_code"] = self.process.stop()
            self.message = err
            if stop.signum is not None:
                break
            self.observer.on_notice(f"{candidate.label}: {err}; trying the next accelerator")
        self.status = "interrupted" if stop.signum is not None else "failed"
        return False

    def start(self) -> None:
        """The probe runs: hooks get the run context, the statistics are set up from the
        probe's header, and the front end is told."""
        assert self.process is not None and self.source is not None and self.plan
        cfg, source, plan = self.cfg, self.source, self.plan
        ctx = RunContext(self.run_id, self.process, source, plan)
        if any(isinstance(h, LiveCapture) for h in self.entered):
            from irqlab.explain.live import LiveSplit
            # Told before the capture starts: it keeps every page for the live columns.
            self.live_split = LiveSplit.for_hooks(self.entered)
        for hook in self.entered:
            hook.after_start(ctx)
        hdr = self.hdr = source.header()
        self.meta.update({"qemu_argv": self.process.argv, "accel": plan.label,
                          "emulated": plan.emulated, "probe": probe_meta(hdr)})
        self.meta.update(source.metadata())
        self.store.update_run(self.run_id, arch=hdr.arch, accel=plan.label,
                              emulated=plan.emulated, tick_hz=hdr.tick_hz,
                              period_ns=cfg.period_ns, threshold_ns=cfg.threshold_ns,
                              metadata=self.meta)
        self.stats = RunStats(tick_hz=hdr.tick_hz,
                              threshold_tick=cfg.threshold_ns * hdr.tick_hz // 1_000_000_000,
                              window_tick=cfg.window_ns * hdr.tick_hz // 1_000_000_000,
                              warmup_windows=cfg.warmup)
        if source.ring_cpus():
            self.per_cpu = PerCpuStats(hdr.tick_hz, self.stats.threshold_tick,
                                       self.stats.window_tick, cfg.warmup,
                                       cpus=source.ring_cpus())
        for notice in source.notices():
            self.observer.on_notice(notice)
        self.observer.on_started({"run_id": self.run_id, "name": self.name,
                                  "accel": plan.label, "emulated": plan.emulated,
                                  "tick_hz": hdr.tick_hz, "tick_method": hdr.tick_method,
                                  "timer_mode": hdr.timer_mode, "idle": hdr.idle,
                                  "host_is_virtual": self.meta["host"]["host_is_virtual"]})

    def measure(self, stop: StopFlag) -> None:
        """Stream samples into statistics and the store until the run ends."""
        assert self.hdr is not None
        stall_s = self.cfg.stall_timeout_s or self.target.stall_timeout_s(self.cfg)
        # --duration: the deadlines within it of the first, on every target.
        self.bound = DurationBound.for_run(self.cfg, self.hdr.tick_hz, self.hdr.period_tick)
        self.break_at = BreakAt.for_run(self.cfg, self.hdr.tick_hz)
        self.on_threshold = OnThreshold.for_run(self.cfg, self.hdr.tick_hz, self.run_id,
                                                self.spike_listeners)
        on_threshold = self.on_threshold
        try:
            stream(self, stop, stall_s)
        finally:
            if self.bound is not None:
                self.meta["duration_bound"] = self.bound.metadata()
            if self.break_at is not None:
                self.meta["break_at"] = self.break_at.metadata()
            if on_threshold is not None:
                on_threshold.finish()
                self.meta["on_threshold"] = on_threshold.metadata()
            if self.invalid_kept:
                self.meta["invalid_samples"] = self.invalid_kept
            if self.live_split is not None:
                self.meta["live_parts"] = self.live_split.metadata()

    def stop(self) -> None:
        """Read the source one last time and close it, stop the process (only the one we
        started), then leave the hooks in reverse order (every host setting restored)."""
        if self.source is not None:
            try:
                if self.source.magic_ok():
                    self.hdr = self.source.header()
            except RingError:
                pass
            # The run's losses are those before its end (stream); the source's count
            # also holds what was lost after it while the probe ran on: kept as evidence.
            source_lost = self.source.lost
            self.lost = source_lost if self.lost_in_run is None else self.lost_in_run
            if source_lost != self.lost:
                self.meta["lost_after_end"] = source_lost - self.lost
            try:
                self.per_ring = self.source.per_ring()
                self.meta.update(self.source.metadata())
            except RingError:
                self.per_ring = []
            self.source.close()
        if self.process is not None:
            self.meta["process_exit_code"] = self.process.stop()
            self.meta["serial_tail"] = self.process.serial()[-4000:]
            self.meta["process_stderr_tail"] = self.process.stderr()[-4000:]
            # The names before 2026-11-26, kept for readers of stored runs (formats.md).
            self.meta["qemu_exit_code"] = self.meta["process_exit_code"]
            self.meta["qemu_stderr_tail"] = self.meta["process_stderr_tail"]
            self.meta.update(self.target.process_metadata(self.process))
        for hook in reversed(self.entered):
            hook.stop()
        if self.entered:
            self.meta["hooks"] = {h.name: h.metadata() for h in self.entered}
            # A load that died during the run (its exit status is checked) makes the
            # figures not what was asked for: the run fails, saying why.
            errors = [f"{n}: {m['error']}" for n, m in self.meta["hooks"].items()
                      if m.get("error")]
            if errors and self.status in ("ok", "stopped-at-break"):
                self.status, self.message = "failed", "; ".join(errors)

    def finish(self) -> RunResult:
        """The last windows, the summary and the histogram, stored with the metadata."""
        hdr, run_summary = self.hdr, None
        if self.stats is not None and hdr is not None:
            last_windows, run_summary = self.stats.finish()
            # After a failed store write (disk full) nothing more is written but the
            # run's status: what is stored stays consistent (windows with their samples).
            if self.store.write_failed is None:
                try:
                    for w in last_windows:
                        emit_window(self, w)
                except StoreWriteError as exc:
                    self.status, self.message = "failed", _store_failed(exc)
        if self.bound is not None and hdr is not None and "duration_bound" in self.meta:
            # The probe's own count, for the whole time it ran (evidence beside ours).
            self.meta["duration_bound"]["probe_overruns"] = hdr.overruns
        summary = build_summary(self.cfg, self.run_id, self.name, self.plan, hdr, self.status,
                                run_summary, self.lost, self.overruns(), self.injected,
                                self.message)
        if self.cfg.options.self_check():
            summary["self_check"] = self_check(self.injected, self.injected_found)
        if self.break_at is not None and self.break_at.sample is not None:
            summary["break_sample"] = self.break_at.sample     # docs/formats.md section 4
        if self.per_cpu is not None:
            # Per-CPU summaries (docs/formats.md section 4, key per_cpu): same keys.
            summary["per_cpu"] = self.per_cpu.summaries(
                {r["cpu"]: {"lost": r["lost"], "overruns": self.overruns(r)}
                 for r in self.per_ring})
        self.exact_percentiles(summary, run_summary)
        if run_summary is not None and run_summary.samples and hdr is not None:
            self.split_parts(summary, hdr.tick_hz)
        if hdr is not None and self.store.write_failed is None:
            summary.update(self.target.summary_extra(RunEnd(
                self.run_id, self.store, self.meta, self.per_ring, hdr.tick_hz,
                self.cfg.threshold_ns, self.observer.on_notice)))
        try:
            if self.store.write_failed is None:
                if run_summary is not None and run_summary.samples and hdr is not None:
                    self.store.add_histogram(self.run_id, "all", histogram_rows(
                        run_summary.histogram, hdr.tick_hz))
                self.store.update_run(self.run_id, metadata=self.meta)
        except StoreWriteError as exc:
            self.status, self.message = "failed", _store_failed(exc)
        if self.store.write_failed is not None:
            summary["status"], summary["message"] = self.status, self.message
        # The status last: if even this fails (a disk full to the last block), the run
        # row stays `running` and the next start closes it as `died`, with a summary from
        # its stored samples; this run still reports what it measured.
        try:
            self.store.finish_run(self.run_id, self.status, summary, summary.get("message"))
        except StoreWriteError as exc:
            self.status = summary["status"] = "failed"
            self.message = summary["message"] = (
                f"{self.message or exc}; the run's status could not be stored either "
                f"({exc}): the next irqlab command that opens {self.store.path} marks it "
                f"died")
        return RunResult(self.run_id, self.status, summary, self.windows)

    def split_parts(self, summary: dict[str, Any], tick_hz: int) -> None:
        """A traced run whose capture shares its samples' clock: every sample's IRQ and
        thread parts (irqlab.explain.parts), stored per sample, and their two
        distributions in the summary (``irq_latency``, ``thread_latency``). A split that
        fails leaves the run as measured, said aloud and recorded."""
        from irqlab.explain.parts import capture_parts, split_capture
        from irqlab.explain.seam import stored_samples
        from irqlab.stats.parts import PART_KEYS, part_summary, part_ticks

        capture = split_capture(_trace_meta(self.meta))
        if capture is None or self.store.write_failed is not None:
            return
        try:
            parts = capture_parts(capture, stored_samples(self.store, self.run_id))
            self.store.add_sample_parts(self.run_id, parts.seq, parts.cpu, parts.irq_tick)
        except Exception as exc:  # noqa: BLE001 - a damaged capture, a decoder's error,
            # a store write: the run's figures stand without the split, said aloud.
            self.meta["sample_parts"] = {"error": f"{type(exc).__name__}: {exc}"}
            self.observer.on_notice(f"no IRQ/thread split: {exc}")
            return
        unsplit = sum(parts.unsplit.values())
        self.meta["sample_parts"] = {"split": len(parts), "unsplit": dict(parts.unsplit)}
        for key, metric in PART_KEYS.items():
            summary[key] = part_summary(part_ticks(parts.deadline_tick, parts.entry_tick,
                                                   parts.irq_tick, metric),
                                        tick_hz, unsplit)

    def overruns(self, ring: dict[str, Any] | None = None) -> int:
        """The run's skipped periods (or one ring's): with --duration those within it,
        as its samples are (DurationBound), else the probe's own counter, which also
        holds periods skipped after the end (docs/formats.md section 4)."""
        probe = (ring["overruns"] if ring is not None
                 else self.hdr.overruns if self.hdr else 0)
        if self.bound is None or not self.bound.counts_overruns:
            return probe
        if ring is not None:
            return self.bound.skipped_by_cpu.get(ring["cpu"], 0)
        return self.bound.overruns

    def exact_percentiles(self, summary: dict[str, Any], run_summary: RunSummary | None
                          ) -> None:
        """The run has ended and its samples are stored: its percentiles become the
        exact nearest-rank values every reader recomputes (irqlab.store.percentiles),
        replacing the live histogram's estimate. After a failed write the store lacks
        samples: the estimate stays, marked ``percentiles_from: histogram``."""
        if run_summary is None or not run_summary.samples or self.store.write_failed:
            return
        try:
            with_exact_percentiles(self.store, self.run_id, summary, run_summary.histogram)
            if self.per_cpu is not None and summary.get("per_cpu"):
                per_cpu_exact(self.store, self.run_id, summary["per_cpu"],
                              int(summary["tick_hz"]),
                              {c: st.summary().histogram
                               for c, st in self.per_cpu.stats.items()})
        except Exception as exc:  # noqa: BLE001 - whatever the store raised (a file
            # gone, an I/O error, a driver's own error): the run's status and figures
            # must still be stored, so the measured estimate stays, said aloud.
            self.observer.on_notice(f"percentiles stay the live histogram's estimate: "
                                    f"the stored samples could not be read ({exc})")


def _trace_meta(meta: dict[str, Any]) -> dict[str, Any]:
    return (meta.get("hooks") or {}).get("trace") or {}


def self_check(injected: int, found: int) -> dict[str, Any]:
    """The self-check's verdict (``--inject-irqoff``/``--inject-delay`` with
    ``--inject-every``): every injected sample, and at least one, must be found above
    the threshold; the summary's ``self_check`` (docs/formats.md section 4)."""
    passed = injected > 0 and found == injected
    return {"injected": injected, "found": found, "passed": passed,
            "text": f"self-check: {injected} injected, {found} found: "
                    f"{'PASS' if passed else 'FAIL'}"}


def _store_failed(exc: StoreWriteError) -> str:
    return f"{exc}; measuring stopped, everything stored before is kept"
