"""One measurement run, start to end (docs/design.md tells these steps in prose).

probes -> runner -> samples -> stats -> store: this module is the only one that knows
all of them; each layer below knows only the one beneath it.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from irqlab import __version__
from irqlab.runner.accel import AccelPlan, plans_for
from irqlab.runner.machines import machine_for
from irqlab.runner.hostinfo import host_info, qemu_version
from irqlab.runner.qemu import GuestConfig, QemuGuest
from irqlab.samples.record import FLAG_INJECTED
from irqlab.samples.ring import RingError, RingHeader, RingReader
from irqlab.stats import LogHistogram, RunStats, RunSummary, WindowStats, format_window_line, ticks_to_ns
from irqlab.stats.percpu import PerCpuStats
from irqlab.store import Store

SUMMARY_VERSION = 1
_POLL_S = 0.02
_FLUSH_RECORDS = 200_000


@dataclass
class RunConfig:
    """Parameters of ``irqlab run`` after parsing (all durations in ns)."""

    target: str = "guest"
    arch: str = "x86_64"
    accel: str = "auto"
    icount: bool = False
    period_ns: int = 1_000_000
    duration_ns: int | None = 30_000_000_000
    samples: int | None = None
    window_ns: int = 10_000_000_000
    threshold_ns: int = 30_000
    warmup: int = 1
    idle: str = "hlt"
    inject_irqoff_ns: int = 0
    inject_every: int = 0
    name: str | None = None
    timer: str = "auto"
    memory_mib: int = 64
    boot_timeout_s: float = 30.0
    stall_timeout_s: float | None = None
    probe: Path | None = None
    hooks: list[Any] = field(default_factory=list)   # RunHook objects, not serialised
    suite: str | None = None
    cell: dict[str, Any] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    cpus: list[int] | None = None        # native/linux-guest: CPUs measured (None: default)
    priority: int = 90                   # native/linux-guest: SCHED_FIFO priority
    rt_fallback: bool = False            # native/linux-guest: SCHED_OTHER if RT is refused
    gic: int | None = None               # arm64 guest: GIC version (None: machine default)
    sink: str = "ring"                   # guest: samples via the RAM ring or the console
    xen_domain: str = "domU"             # xen: the probe as dom0 or a dom0less domU
    xen_sched: str = "credit2"           # xen: sched= (credit, credit2, rtds, null)
    xen_opts: dict[str, str] = field(default_factory=dict)   # xen: extra Xen options
    xen_binary: Path | None = None       # xen: hypervisor image (None: the cached one)
    neighbour: str = "none"              # xen: second domU on the pCPU (cpu/console/idle)

    def target_samples(self) -> int | None:
        """Samples the guest stops after, when the run is bounded by count."""
        if self.samples is not None:
            return self.samples
        if self.icount and self.duration_ns is not None:
            # Under icount guest time is virtual: bound the run by guest periods.
            return max(1, self.duration_ns // self.period_ns)
        return None

    def stall_s(self) -> float:
        """Watchdog: no sample for this long means the guest or QEMU is stuck."""
        if self.stall_timeout_s is not None:
            return self.stall_timeout_s
        return max(3.0, 20 * self.period_ns / 1e9)


class RunHook(Protocol):
    """Something started or applied around a run: a load, a host knob (irqlab.loads,
    irqlab.knobs). Hooks are entered in order and always left in reverse order, also after
    a failure or Ctrl-C, so every touched host setting is restored."""

    name: str

    def qemu_args(self) -> list[str]: ...          # extra QEMU options, [] if none
    def before_start(self) -> None: ...            # e.g. start a load, write a sysfs knob
    def after_start(self, target: Any) -> None: ...  # e.g. pin vCPU threads (QEMU runs)
    def metadata(self) -> dict[str, Any]: ...      # what was applied, or why not
    def stop(self) -> None: ...                    # stop / restore; must not raise


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


class _Stop:
    """SIGINT/SIGTERM set a flag; the run loop stops cleanly and stores everything."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> "_Stop":
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signum = signum

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def window_dict(w: WindowStats, tick_hz: int) -> dict[str, Any]:
    """A window as its JSON keys, latencies in integer ns."""
    def ns(v: float | int | None) -> int | None:
        return None if v is None else ticks_to_ns(v, tick_hz)
    return {"index": w.index, "start_s": w.start_s, "samples": w.samples,
            "mean_ns": ns(w.mean_tick), "stddev_ns": ns(w.stddev_tick),
            "min_ns": ns(w.min_tick), "max_ns": ns(w.max_tick),
            "above_threshold": w.above_threshold,
            "global_min_ns": ns(w.global_min_tick), "global_max_ns": ns(w.global_max_tick)}


def _make_target(cfg: RunConfig, plan: AccelPlan, guest_cfg: GuestConfig,
                 name: str) -> QemuGuest:
    """The process that hosts the probe, by ``--target`` (one place to add targets)."""
    if cfg.target == "native":
        from irqlab.runner.native import NativeProbe
        return NativeProbe(cfg.period_ns, cpus=cfg.cpus, priority=cfg.priority,
                           rt_fallback=cfg.rt_fallback, samples=cfg.target_samples() or 0,
                           name=name)
    if cfg.target == "linux-guest":
        from irqlab.runner.linux_guest import LinuxGuest
        return LinuxGuest(cfg.period_ns, plan, cpus=cfg.cpus, priority=cfg.priority,
                          rt_fallback=cfg.rt_fallback, samples=cfg.target_samples() or 0,
                          icount=cfg.icount, extra_qemu_args=guest_cfg.extra_qemu_args,
                          name=name)
    if cfg.target == "xen":
        from irqlab.runner.xen import XenGuest, XenOptions
        return XenGuest(guest_cfg, plan, XenOptions(
            domain=cfg.xen_domain, sched=cfg.xen_sched, opts=dict(cfg.xen_opts),
            binary=cfg.xen_binary, neighbour=cfg.neighbour), name=name)
    return QemuGuest(guest_cfg, plan, icount=cfg.icount, name=name)


def _plans(cfg: RunConfig) -> list[AccelPlan]:
    """Accelerators to try for the target (the native probe runs on the host itself)."""
    if cfg.target == "native":
        return [AccelPlan("none", "native", False)]
    plans = plans_for(cfg.accel, cfg.icount)
    if cfg.target in ("guest", "xen") and not machine_for(cfg.arch).kvm_possible():
        # KVM only runs guests of the host's architecture (arm64 on x86): straight to TCG.
        plans = [p for p in plans if p.accel != "kvm"] or plans
    return plans


def _boot_timeout_s(cfg: RunConfig, plan: AccelPlan) -> float:
    """A Linux kernel reaches init in ~1-2 s under real KVM; a software KVM backend
    (e.g. kvm_pvm) hangs stock kernels, so auto gives KVM at most 10 s, then TCG."""
    if cfg.target == "linux-guest" and cfg.accel == "auto" and plan.accel == "kvm":
        return min(cfg.boot_timeout_s, 10.0)
    return cfg.boot_timeout_s


def _open_source(cfg: RunConfig, guest: QemuGuest) -> RingReader:
    """The reader of the target's samples (one place to add sample sinks)."""
    if cfg.target in ("native", "linux-guest"):
        from irqlab.samples.multiring import MultiRingReader
        return MultiRingReader(guest.mem_path)
    if cfg.sink == "console":
        from irqlab.samples.console import ConsoleReader
        return ConsoleReader(guest.serial_read)
    return RingReader(guest.mem_path, guest.config.machine.ring_offset)


def _boot(cfg: RunConfig, plan: AccelPlan, guest_cfg: GuestConfig, name: str,
          stop: _Stop) -> tuple[QemuGuest, RingReader | None, str | None]:
    """Start the target and wait for the probe to run; returns (guest, reader, error)."""
    guest = _make_target(cfg, plan, guest_cfg, name)
    try:
        guest.start()
    except OSError as exc:
        return guest, None, str(exc)
    reader = None
    deadline = time.monotonic() + _boot_timeout_s(cfg, plan)
    while time.monotonic() < deadline and stop.signum is None:
        if reader is None:
            reader = _open_source(cfg, guest)
        if reader.magic_ok():
            state = reader.state()
            if state in ("running", "done"):
                return guest, reader, None
            if state == "error":
                hdr = reader.header()
                return guest, reader, f"probe error {hdr.error}: {hdr.message}"
        code = guest.exit_code()
        if code is not None and reader is not None and reader.magic_ok() and \
                reader.state() in ("running", "done", "error"):
            continue    # it ran (and maybe ended: arm64 powers off) before we looked
        if code is not None:
            return guest, reader, (f"QEMU exited with code {code} before the probe ran; "
                                   f"stderr: {guest.stderr().strip()[-500:] or '(empty)'}")
        time.sleep(0.01)
    if stop.signum is not None:
        return guest, reader, "interrupted during boot"
    return guest, reader, (f"the probe did not start within {_boot_timeout_s(cfg, plan):g} s "
                           f"under {plan.label}; "
                           + (guest.console_summary() if hasattr(guest, "console_summary")
                              else f"serial: {guest.serial().strip()[-300:]!r}"))


def _summary(cfg: RunConfig, run_id: int, name: str, plan: AccelPlan | None,
             hdr: RingHeader | None, status: str, s: RunSummary | None,
             lost: int, overruns: int, injected: int, message: str | None) -> dict[str, Any]:
    """The summary object (JSON keys are a contract: docs/formats.md section 4)."""
    tick_hz = hdr.tick_hz if hdr else None
    out: dict[str, Any] = {
        "type": "summary", "version": SUMMARY_VERSION, "run_id": run_id, "name": name,
        "target": cfg.target, "arch": hdr.arch if hdr else cfg.arch,
        "accel": plan.label if plan else None, "emulated": plan.emulated if plan else None,
        "status": status, "samples": 0, "lost": lost, "overruns": overruns,
        "tick_hz": tick_hz, "period_ns": cfg.period_ns, "threshold_ns": cfg.threshold_ns,
        "above_threshold": 0, "min_ns": None, "mean_ns": None, "stddev_ns": None,
        "max_ns": None, "warm_max_ns": None, "p50_ns": None, "p90_ns": None,
        "p99_ns": None, "p999_ns": None, "p9999_ns": None,
        "injected": injected, "message": message,
    }
    if s is None or tick_hz is None or s.samples == 0:
        return out

    def ns(v: float | int | None) -> int | None:
        return None if v is None else ticks_to_ns(v, tick_hz)
    out.update({
        "samples": s.samples, "above_threshold": s.above_threshold,
        "min_ns": ns(s.min_tick), "mean_ns": ns(s.mean_tick), "stddev_ns": ns(s.stddev_tick),
        "max_ns": ns(s.max_tick), "warm_max_ns": ns(s.warm_max_tick),
        "p50_ns": ns(s.p50_tick), "p90_ns": ns(s.p90_tick), "p99_ns": ns(s.p99_tick),
        "p999_ns": ns(s.p999_tick), "p9999_ns": ns(s.p9999_tick),
    })
    return out


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

    with _Stop() as stop:
        try:
            for hook in cfg.hooks:
                entered.append(hook)
                hook.before_start()
            for candidate in _plans(cfg):
                guest, reader, err = _boot(cfg, candidate, guest_cfg, f"irqlab-{run_id}", stop)
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
                return _finish(store, run_id, meta, status, _summary(
                    cfg, run_id, name, None, None, status, None, 0, 0, 0, message), [])

            for hook in entered:
                hook.after_start(guest)
            hdr = reader.header()
            meta.update({"qemu_argv": guest.argv, "accel": plan.label,
                         "emulated": plan.emulated, "probe": _probe_meta(hdr)})
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
            status, message, injected = _stream(cfg, guest, reader, stats, store, run_id,
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
                _emit_window(w, hdr.tick_hz, store, run_id, observer, windows)
        summary = _summary(cfg, run_id, name, plan, hdr, status, run_summary, lost,
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


def histogram_rows(hist: LogHistogram, tick_hz: int) -> list[tuple[int, int | None, int]]:
    """The run's histogram as stored buckets ``(lower_ns, upper_ns, count)``.

    Bucket [low, high] ticks becomes [ns(low), ns(high + 1)); negative latencies (the
    underflow bucket) become [min_ns, 0); the overflow bucket has upper_ns None.
    """
    rows: list[tuple[int, int | None, int]] = []
    if hist.underflow:
        rows.append((ticks_to_ns(hist.min, tick_hz), 0, hist.underflow))
    for index in np.flatnonzero(hist.counts):
        low, high = hist.bucket_bounds(int(index))
        rows.append((ticks_to_ns(low, tick_hz), ticks_to_ns(high + 1, tick_hz),
                     int(hist.counts[index])))
    if hist.overflow:
        rows.append((ticks_to_ns(hist.max_trackable + 1, tick_hz), None, hist.overflow))
    return rows


def _probe_meta(hdr: RingHeader) -> dict[str, Any]:
    return {"build_id": hdr.build_id, "tick_hz": hdr.tick_hz, "tick_method": hdr.tick_method,
            "timer_mode": hdr.timer_mode, "apic_hz": hdr.apic_hz, "idle": hdr.idle,
            "period_tick": hdr.period_tick, "ring_capacity": hdr.capacity,
            "inject_every": hdr.inject_every, "inject_irqoff_tick": hdr.inject_irqoff_tick}


def _finish(store: Store, run_id: int, meta: dict[str, Any], status: str,
            summary: dict[str, Any], windows: list[dict[str, Any]]) -> RunResult:
    store.update_run(run_id, metadata=meta)
    store.finish_run(run_id, status, summary, summary.get("message"))
    return RunResult(run_id, status, summary, windows)


def _emit_window(w: WindowStats, tick_hz: int, store: Store, run_id: int,
                 observer: Observer, windows: list[dict[str, Any]]) -> None:
    wd = window_dict(w, tick_hz)
    windows.append(wd)
    store.add_windows(run_id, [wd])
    observer.on_window(wd, format_window_line(w, tick_hz))


def _stream(cfg: RunConfig, guest: QemuGuest, reader: RingReader, stats: RunStats,
            store: Store, run_id: int, observer: Observer, windows: list[dict[str, Any]],
            stop: _Stop, tick_hz: int,
            per_cpu: PerCpuStats | None = None) -> tuple[str, str | None, int]:
    """Poll the ring until the run ends; returns (status, message, injected count)."""
    target = cfg.target_samples()
    wall_end = None
    if target is None and cfg.duration_ns is not None:
        wall_end = time.monotonic() + cfg.duration_ns / 1e9
    wall_start = time.monotonic()
    last_sample_at = time.monotonic()
    pending: list[np.ndarray] = []
    pending_n = 0
    done = 0
    injected = 0
    status, message = "ok", None

    def drain() -> int:
        nonlocal pending_n, done, injected
        batch = reader.poll()
        if len(batch):
            recs = batch.records
            if target is not None and done + len(recs) > target:
                recs = recs[:target - done]
            for w in stats.add(recs["deadline_tick"].astype(np.int64),
                               recs["entry_tick"].astype(np.int64)
                               - recs["deadline_tick"].astype(np.int64)):
                flush()
                _emit_window(w, tick_hz, store, run_id, observer, windows)
            if per_cpu is not None:
                per_cpu.add(recs["cpu"], recs["deadline_tick"].astype(np.int64),
                            recs["entry_tick"].astype(np.int64)
                            - recs["deadline_tick"].astype(np.int64))
            injected += int(np.count_nonzero(recs["flags"] & FLAG_INJECTED))
            pending.append(recs)
            pending_n += len(recs)
            done += len(recs)
            if pending_n >= _FLUSH_RECORDS:
                flush()
        return len(batch)

    def flush() -> None:
        nonlocal pending_n
        if pending:
            store.add_samples(run_id, np.concatenate(pending) if len(pending) > 1
                              else pending[0])
            pending.clear()
            pending_n = 0

    try:
        while True:
            got = drain()
            now = time.monotonic()
            if got:
                last_sample_at = now
            if target is not None:
                observer.on_progress(done / target, f"{done}/{target} samples")
                if done >= target:
                    break
            elif wall_end is not None:
                observer.on_progress(min(1.0, (now - wall_start) / (wall_end - wall_start)),
                                     f"{done} samples")
                if now >= wall_end:
                    break
            if stop.signum is not None:
                status = "interrupted"
                message = f"stopped by {signal.Signals(stop.signum).name}; data kept"
                break
            code = guest.exit_code()
            if code is not None:
                drain()
                if (guest.exited_done(code) or reader.state() == "done"
                        or (target is not None and done >= target)):
                    break
                hdr = reader.header()
                status = "failed"
                # arm64 powers off (exit 0) on errors too: the ring state says which.
                detail = (f"probe error {hdr.error}: {hdr.message}"
                          if guest.exited_error(code) or hdr.state == "error"
                          else f"QEMU exited with code {code}")
                message = (f"{detail} after {done} samples; stderr: "
                           f"{guest.stderr().strip()[-300:] or '(empty)'}")
                break
            if reader.state() == "error":
                hdr = reader.header()
                status, message = "failed", f"probe error {hdr.error}: {hdr.message}"
                break
            if now - last_sample_at > cfg.stall_s():
                status = "failed"
                message = (f"watchdog: no sample for {now - last_sample_at:.1f} s (guest hang "
                           f"or QEMU stuck) after {done} samples; data kept")
                break
            time.sleep(_POLL_S)
        if hasattr(reader, "finish"):
            reader.finish()     # multi-ring: release what the merge watermark held back
        drain()
    finally:
        flush()
    return status, message, injected
