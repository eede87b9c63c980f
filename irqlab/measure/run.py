"""One measurement run, start to end (docs/design.md tells these steps in prose).

probes -> runner -> samples -> stats -> store: the measure package is the only one that
knows all of them; each layer below knows only the one beneath it.
"""

from __future__ import annotations

import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from irqlab import __version__
from irqlab.measure.boot import StopFlag, boot
from irqlab.measure.config import Observer, RunConfig, RunResult
from irqlab.measure.stream import emit_window, stream
from irqlab.measure.summary import build_summary, histogram_rows, probe_meta
from irqlab.measure.targets import accel_plans
from irqlab.runner.accel import AccelPlan
from irqlab.runner.hostinfo import host_info, qemu_version
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.ring import RingError, RingHeader, RingReader
from irqlab.stats import RunStats
from irqlab.stats.percpu import PerCpuStats
from irqlab.store import Store


def run(cfg: RunConfig, store: Store, observer: Observer) -> RunResult:
    """Measure once: boot, stream samples into stats and store, stop, summarise."""
    name = cfg.name or f"{cfg.target}-{time.strftime('%Y%m%d-%H%M%S')}"
    guest_cfg = GuestConfig(period_ns=cfg.period_ns, idle=cfg.idle,
                            inject_irqoff_ns=cfg.inject_irqoff_ns,
                            inject_every=cfg.inject_every,
                            samples=cfg.target_samples() or 0, timer=cfg.timer,
                            memory_mib=cfg.memory_mib, arch=cfg.arch, probe=cfg.probe,
                            gic=cfg.gic, sink=cfg.sink)
    params = {f.name: (str(getattr(cfg, f.name)) if isinstance(getattr(cfg, f.name), Path)
                       else getattr(cfg, f.name))
              for f in fields(cfg) if f.name != "hooks"}
    guest_cfg.extra_qemu_args = [a for h in cfg.hooks for a in h.qemu_args()]
    meta: dict[str, Any] = {"irqlab_version": __version__, "host": host_info(),
                            "qemu_version": qemu_version(guest_cfg.machine.qemu),
                            "probe_cmdline": guest_cfg.cmdline(), "accel_attempts": []}
    run_id = store.create_run(name, cfg.target, params, meta, tags=cfg.tags,
                              suite=cfg.suite, cell=cfg.cell)
    entered: list[Any] = []
    plan: AccelPlan | None = None
    guest: QemuGuest | None = None
    reader: RingReader | None = None
    hdr: RingHeader | None = None
    stats: RunStats | None = None
    per_cpu: PerCpuStats | None = None
    per_ring: list[dict[str, Any]] = []
    windows: list[dict[str, Any]] = []
    status, message = "failed", None
    injected = 0
    lost = 0
    crash: BaseException | None = None

    with StopFlag() as stop:
        try:
            for hook in cfg.hooks:
                entered.append(hook)
                hook.before_start()
            for candidate in accel_plans(cfg):
                guest, reader, err = boot(cfg, candidate, guest_cfg, f"irqlab-{run_id}", stop)
                meta["accel_attempts"].append({"accel": candidate.label, "error": err,
                                               "qemu_argv": guest.argv})
                if err is not None and cfg.target == "xen":
                    meta["xen"] = guest.metadata()   # kept also when Xen never booted
                if err is None:
                    plan = candidate
                    break
                if reader:
                    reader.close()
                    reader = None  # closed: the cleanup below must not read it again
                code = guest.stop()
                meta["accel_attempts"][-1]["exit_code"] = code
                message = err
                if stop.signum is not None:
                    break
                observer.on_notice(f"{candidate.label}: {err}; trying the next accelerator")
            if plan is None:
                status = "interrupted" if stop.signum is not None else "failed"
                return _finish(store, run_id, meta, status, build_summary(
                    cfg, run_id, name, None, None, status, None, 0, 0, 0, message), [])

            for hook in entered:
                hook.after_start(guest)
            hdr = reader.header()
            meta.update({"qemu_argv": guest.argv, "accel": plan.label,
                         "emulated": plan.emulated, "probe": probe_meta(hdr)})
            store.update_run(run_id, arch=hdr.arch, accel=plan.label, emulated=plan.emulated,
                             tick_hz=hdr.tick_hz, period_ns=cfg.period_ns,
                             threshold_ns=cfg.threshold_ns, metadata=meta)
            stats = RunStats(tick_hz=hdr.tick_hz,
                             threshold_tick=cfg.threshold_ns * hdr.tick_hz // 1_000_000_000,
                             window_tick=cfg.window_ns * hdr.tick_hz // 1_000_000_000,
                             warmup_windows=cfg.warmup)
            if hasattr(reader, "per_ring"):
                per_cpu = PerCpuStats(hdr.tick_hz, stats.threshold_tick, stats.window_tick,
                                      cfg.warmup, cpus=reader.cpus)
                meta["native"] = reader.directory()
                store.update_run(run_id, metadata=meta)
                if meta["native"]["rt_fallback"]:
                    observer.on_notice("SCHED_FIFO was refused: the probe ran SCHED_OTHER "
                                       "(--rt-fallback); these are not real-time figures")
            observer.on_started({"run_id": run_id, "name": name, "accel": plan.label,
                                 "emulated": plan.emulated, "tick_hz": hdr.tick_hz,
                                 "tick_method": hdr.tick_method,
                                 "timer_mode": hdr.timer_mode, "idle": hdr.idle,
                                 "host_is_virtual": meta["host"]["host_is_virtual"]})
            status, message, injected = stream(cfg, guest, reader, stats, store, run_id,
                                                observer, windows, stop, hdr.tick_hz,
                                                per_cpu=per_cpu)
        except (RingError, OSError) as exc:
            status, message = "failed", str(exc)
        except BaseException as exc:
            # A bug or an unexpected failure: store the run as failed with what was
            # collected, then let the exception surface.
            status, message = "failed", f"internal error: {type(exc).__name__}: {exc}"
            crash = exc
        finally:
            final_hdr = None
            if reader is not None:
                try:
                    final_hdr = reader.header() if reader.magic_ok() else None
                except RingError:
                    final_hdr = None
                lost = reader.lost
                if cfg.sink == "console" and hasattr(reader, "stats"):
                    meta["console_sink"] = reader.stats()
                if hasattr(reader, "per_ring"):
                    try:
                        per_ring = reader.per_ring()
                    except RingError:
                        per_ring = []
                reader.close()
            if guest is not None:
                code = guest.stop()
                meta["qemu_exit_code"] = code
                meta["serial_tail"] = guest.serial()[-4000:]
                meta["qemu_stderr_tail"] = guest.stderr()[-4000:]
                if cfg.target == "xen":
                    meta["xen"] = guest.metadata()   # version, build, full command line
            for hook in reversed(entered):
                hook.stop()
            if entered:
                meta["hooks"] = {h.name: h.metadata() for h in entered}
                # A load that died during the run (its exit status is checked) makes
                # the figures not what was asked for: the run fails, saying why.
                hook_errors = [f"{n}: {m['error']}" for n, m in meta["hooks"].items()
                               if m.get("error")]
                if hook_errors and status == "ok":
                    status, message = "failed", "; ".join(hook_errors)
        if final_hdr is not None:
            hdr = final_hdr
        overruns = hdr.overruns if hdr else 0
        run_summary = None
        if stats is not None:
            last_windows, run_summary = stats.finish()
            for w in last_windows:
                emit_window(w, hdr.tick_hz, store, run_id, observer, windows)
        summary = build_summary(cfg, run_id, name, plan, hdr, status, run_summary, lost,
                           overruns, injected, message)
        if per_cpu is not None:
            # Per-CPU summaries (docs/formats.md section 4, key per_cpu): same keys.
            summary["per_cpu"] = per_cpu.summaries(
                {r["cpu"]: {"lost": r["lost"], "overruns": r["overruns"]} for r in per_ring})
        if run_summary is not None and run_summary.samples:
            store.add_histogram(run_id, "all", histogram_rows(run_summary.histogram,
                                                              hdr.tick_hz))
        result = _finish(store, run_id, meta, status, summary, windows)
        if crash is not None:
            raise crash
        return result


def _finish(store: Store, run_id: int, meta: dict[str, Any], status: str,
            summary: dict[str, Any], windows: list[dict[str, Any]]) -> RunResult:
    store.update_run(run_id, metadata=meta)
    store.finish_run(run_id, status, summary, summary.get("message"))
    return RunResult(run_id, status, summary, windows)
