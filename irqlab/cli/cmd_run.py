"""``irqlab run``: measure timer-interrupt latency (the contract in README and issue 2)."""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from irqlab.cli.common import (EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError, add_db_json,
                               count, db_path, duration, renderer)
from irqlab.cli.hook_options import add_arguments as add_hook_options, hooks_from_args
from irqlab.runner.machines import MACHINES
from irqlab.store import Store

NAME = "run"


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="measure timer-interrupt latency")
    r.add_argument("--target", default="guest", type=_targets, metavar="TARGET[,TARGET]",
                   help="what to measure: guest (the probe in a QEMU VM), native (this "
                        "host, one RT thread per CPU), linux-guest (Debian's kernel in QEMU "
                        "running the native probe); a comma list or `all` runs them one "
                        "after another as one suite and prints a comparison table")
    r.add_argument("--cpus", type=_cpus, default=None, metavar="LIST",
                   help="native: host CPUs to measure (default all online); linux-guest: "
                        "guest CPUs (default 0), e.g. 0,2-3")
    r.add_argument("--priority", type=int, default=90, metavar="N",
                   help="native/linux-guest: SCHED_FIFO priority 1-99 (default 90)")
    r.add_argument("--rt-fallback", action="store_true",
                   help="native/linux-guest: run SCHED_OTHER (recorded) when RT priority "
                        "cannot be set, instead of failing")
    r.add_argument("--arch", default=None, choices=sorted(MACHINES),
                   help="guest probe architecture (default x86_64; arm64 for --target "
                        "xen, where x86_64 runs the probe as a PVH dom0)")
    r.add_argument("--accel", default="auto", choices=["auto", "kvm", "tcg"],
                   help="auto tries KVM with a real boot and falls back to TCG")
    r.add_argument("--icount", action="store_true",
                   help="TCG with deterministic guest time (exact, repeatable)")
    r.add_argument("--period", type=duration, default=1_000_000, metavar="DUR",
                   help="timer period (default 1ms)")
    bound = r.add_mutually_exclusive_group()
    bound.add_argument("--duration", type=duration, default=None, metavar="DUR",
                       help="run length (default 30s)")
    bound.add_argument("--samples", type=count, default=None, metavar="N",
                       help="stop after N samples")
    r.add_argument("--window", type=duration, default=10_000_000_000, metavar="DUR",
                   help="statistics window (default 10s)")
    r.add_argument("--threshold", type=duration, default=30_000, metavar="DUR",
                   help="latency threshold counted per window (default 30us)")
    r.add_argument("--warmup", type=count, default=1, metavar="N",
                   help="windows left out of warm max (default 1)")
    r.add_argument("--idle", default="hlt", choices=["hlt", "poll", "wfi"],
                   help="how the guest waits: hlt (default; wfi on arm64, either name "
                        "works there) or busy poll")
    r.add_argument("--inject-irqoff", type=duration, default=0, metavar="DUR",
                   help="self-check: spin with interrupts off for DUR across the deadline")
    r.add_argument("--inject-every", type=count, default=0, metavar="N",
                   help="self-check: inject in every Nth period")
    r.add_argument("--timer", default="auto",
                   choices=["auto", "deadline", "oneshot", "virt", "phys"],
                   help="x86: LAPIC timer mode (auto: TSC-deadline when CPUID has it); "
                        "arm64: EL1 virtual (auto) or physical generic timer")
    r.add_argument("--gic", type=int, default=None, choices=[2, 3],
                   help="arm64: GIC version of the QEMU virt machine (default 3)")
    r.add_argument("--sink", default="ring", choices=["ring", "console"],
                   help="how samples come back: ring (guest RAM read by the host, "
                        "default) or console (framed lines on the serial console: COM1 "
                        "on x86, PL011 on arm64, console_io under Xen)")
    r.add_argument("--memory", type=count, default=64, metavar="MIB",
                   help="guest memory in MiB (default 64)")
    r.add_argument("--boot-timeout", type=duration, default=30_000_000_000, metavar="DUR",
                   help="give up on an accelerator when the probe has not started (30s)")
    r.add_argument("--stall-timeout", type=duration, default=None, metavar="DUR",
                   help="watchdog: fail when no sample arrives for DUR (default "
                        "max(3s, 20 periods))")
    r.add_argument("--probe", type=Path, default=None, help="probe ELF to boot")
    r.add_argument("--name", default=None, help="run name (later commands accept it)")
    r.add_argument("--trace", action="store_true",
                   help="capture host kernel events (private tracefs instance) for "
                        "`irqlab explain`")
    _register_xen(r)
    add_hook_options(r)  # --load, --knob and one option per knob (irqlab.cli.hook_options)
    add_db_json(r)



def _check_arch_options(args: argparse.Namespace) -> None:
    """Options whose valid values depend on the guest architecture (--arch)."""
    if getattr(args, "target", "guest") != "guest":
        return
    m = MACHINES[args.arch]
    if args.timer not in m.timers:
        raise UsageError(f"--timer {args.timer} does not exist on {args.arch}: use one of "
                         f"{', '.join(m.timers)}")
    if args.idle not in m.idles:
        raise UsageError(f"--idle {args.idle} does not exist on {args.arch}: use one of "
                         f"{', '.join(m.idles)}")
    if args.sink not in m.sinks:
        raise UsageError(f"--sink {args.sink} is not supported by the {args.arch} probe "
                         f"(it has: {', '.join(m.sinks)})")
    if args.gic is not None:
        try:
            m.configured(gic=args.gic)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.accel == "kvm" and not m.kvm_possible():
        raise UsageError(f"--accel kvm cannot run an {args.arch} guest on this "
                         f"{platform.machine()} host: use --accel tcg (or auto)")


def _register_xen(r: argparse.ArgumentParser) -> None:
    """``--target xen`` options (irqlab.runner.xen; docs/xen.md)."""
    from irqlab.runner.xen import NEIGHBOURS, XEN_DOMAINS, XEN_SCHEDS

    r.add_argument("--xen-domain", default=None, choices=XEN_DOMAINS,
                   help="xen: run the probe as dom0 or as a dom0less domU (default domU)")
    r.add_argument("--xen-sched", default=None, choices=XEN_SCHEDS,
                   help="xen: Xen's scheduler, sched= (default credit2; rtds and null need "
                        "a Xen built with them: scripts/build-xen-rtds.sh)")
    r.add_argument("--xen-opt", action="append", default=None, metavar="K=V",
                   help="xen: extra hypervisor option, repeatable (e.g. vwfi=native)")
    r.add_argument("--xen-binary", type=Path, default=None, metavar="PATH",
                   help="xen: hypervisor image to boot (default: Debian's, cached by "
                        "setup.sh; $IRQLAB_XEN also sets it)")
    r.add_argument("--neighbour", default=None, choices=NEIGHBOURS,
                   help="xen: a second dom0less domU on the same pCPU: cpu (busy), "
                        "console (console flood), idle, or none (default)")


def xen_stall_timeout_ns(period_ns: int) -> int:
    """Watchdog for Xen guests: console frames come in batches and Xen under TCG is slow."""
    return max(10_000_000_000, 40 * period_ns)


def _xen_settings(args: argparse.Namespace) -> dict:
    """RunConfig fields for --target xen; refuses --xen-* options elsewhere."""
    from irqlab.runner.xen import DEB_ARCH, binary_from_path, find_xen, fetch_hint, parse_opts

    given = [opt for opt, val in (("--xen-domain", args.xen_domain),
                                  ("--xen-sched", args.xen_sched),
                                  ("--xen-opt", args.xen_opt),
                                  ("--xen-binary", args.xen_binary),
                                  ("--neighbour", args.neighbour)) if val is not None]
    targets = args.target.split(",")
    if "xen" not in targets:
        if given:
            raise UsageError(f"{', '.join(given)} only apply to --target xen")
        return {}
    if args.icount:
        raise UsageError("--icount is not supported with --target xen (Xen under "
                         "QEMU -icount was not verified): drop --icount")
    if args.sink != "ring" and args.sink != "console":
        raise UsageError(f"--sink {args.sink}: Xen guests report through the console")
    arch = args.arch
    for opt, val, allowed in (("--idle", args.idle, MACHINES[arch].idles),
                              ("--timer", args.timer, MACHINES[arch].timers)):
        if val not in allowed:
            raise UsageError(f"{opt} {val} does not exist on the {arch} probe: use one of "
                             f"{', '.join(allowed)}")
    if arch == "x86_64":
        # docs/xen.md: the x86 probe is a PVH dom0 (no dom0 Linux, so no xl for domUs),
        # and Xen needs VT-x/AMD-V inside its VM, which only TCG gives here.
        if args.xen_domain == "domU" or args.neighbour not in (None, "none"):
            raise UsageError("--target xen --arch x86_64 runs the probe as a PVH dom0 "
                             "only: drop --xen-domain domU and --neighbour")
        if args.accel == "kvm":
            raise UsageError("--target xen --arch x86_64 runs under TCG only (Xen needs "
                             "nested VT-x/AMD-V under KVM): use --accel tcg or auto")
    try:
        opts = parse_opts(args.xen_opt or [])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if "sched" in opts:
        raise UsageError("set the scheduler with --xen-sched, not --xen-opt sched=")
    sched = args.xen_sched or "credit2"
    if args.xen_binary is not None and not args.xen_binary.is_file():
        raise UsageError(f"--xen-binary {args.xen_binary} is not a file")
    deb_arch = DEB_ARCH[arch]
    binary = (binary_from_path(args.xen_binary) if args.xen_binary is not None
              else find_xen(sched, deb_arch))
    if binary is None:
        raise UsageError(f"no Xen hypervisor found: {fetch_hint(deb_arch)}")
    built = binary.schedulers()
    if built is not None and sched not in built:
        raise UsageError(f"--xen-sched {sched}: {binary.path} has only "
                         f"{', '.join(built)} (from {binary.config}); build a Xen with "
                         f"RTDS and null with scripts/build-xen-rtds.sh, or pass "
                         f"--xen-binary")
    if targets == ["xen"]:
        # The probe answers through the console (the host cannot map a Xen guest's RAM);
        # frames come every 16 samples, and Xen under TCG is slow: a longer watchdog.
        # (In a suite, irqlab.suite sets the same for the xen run only.)
        args.stall_timeout = args.stall_timeout or xen_stall_timeout_ns(args.period)
        args.sink = "console"
    return {"xen_domain": args.xen_domain or ("dom0" if arch == "x86_64" else "domU"),
            "xen_sched": sched, "xen_opts": opts, "xen_binary": args.xen_binary,
            "neighbour": args.neighbour or "none"}


def run_config(args: argparse.Namespace):
    from irqlab.measure import RunConfig

    if args.period <= 0:
        raise UsageError("--period must be more than 0, e.g. --period 1ms")
    if args.period < 10_000:
        raise UsageError(f"--period {args.period} ns is below 10us, faster than a guest "
                         f"can take interrupts: use --period 10us or more")
    if args.icount and args.accel == "kvm":
        raise UsageError("--icount needs TCG: drop --accel kvm or use --accel tcg")
    if (args.inject_irqoff > 0) != (args.inject_every > 0):
        raise UsageError("--inject-irqoff and --inject-every go together, e.g. "
                         "--inject-irqoff 2ms --inject-every 100")
    if args.inject_irqoff >= args.period * max(args.inject_every, 1):
        raise UsageError("--inject-irqoff must be shorter than --inject-every periods, or "
                         "every injected delay would swallow the next injection")
    if args.samples == 0:
        raise UsageError("--samples must be at least 1")
    duration = args.duration
    if duration is None and args.samples is None:
        duration = 30_000_000_000
    if duration is not None and duration < args.period:
        raise UsageError("--duration is shorter than one --period: nothing to measure")
    if args.window < args.period:
        raise UsageError("--window must hold at least one period, e.g. --window 10s")
    if args.memory < 8:
        raise UsageError("--memory must be at least 8 (MiB): the ring sits at 4 MiB")
    if args.arch is None:
        args.arch = "arm64" if args.target == "xen" else "x86_64"
    if args.probe is not None and not args.probe.is_file():
        raise UsageError(f"--probe {args.probe} is not a file: build it with "
                         f"`make -C probes/guest` or give the right path")
    _check_arch_options(args)
    xen = _xen_settings(args)
    try:
        hooks = hooks_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not 1 <= args.priority <= 99:
        raise UsageError(f"--priority {args.priority} must be 1-99 (SCHED_FIFO)")
    return RunConfig(cpus=args.cpus, priority=args.priority, rt_fallback=args.rt_fallback,
                     hooks=hooks, target=args.target, arch=args.arch, accel=args.accel,
                     icount=args.icount or False, period_ns=args.period,
                     duration_ns=duration, samples=args.samples, window_ns=args.window,
                     threshold_ns=args.threshold, warmup=args.warmup, idle=args.idle,
                     inject_irqoff_ns=args.inject_irqoff, inject_every=args.inject_every,
                     name=args.name, timer=args.timer, memory_mib=args.memory,
                     boot_timeout_s=args.boot_timeout / 1e9,
                     stall_timeout_s=(None if args.stall_timeout is None
                                      else args.stall_timeout / 1e9),
                     probe=args.probe, gic=args.gic, sink=args.sink, **xen)


def run(args: argparse.Namespace) -> int:
    from irqlab.measure import run as measure

    cfg = run_config(args)
    if getattr(args, "trace", False):
        from irqlab.trace.capture import TraceHook
        cfg.hooks.append(TraceHook(db_path(args), cfg.period_ns))
    out = renderer(args)
    if "," in cfg.target:
        return _run_suite(cfg, out, args)
    with Store(db_path(args)) as store:
        try:
            result = measure(cfg, store, out)
        finally:
            out.close()
    out.summary(result.summary)
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if result.status == "ok" else EXIT_FAIL


def _targets(text: str) -> str:
    """argparse type: one target, a comma list or a suite name -> "a,b" (validated)."""
    from irqlab.suite import parse_targets
    try:
        return ",".join(parse_targets(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cpus(text: str) -> list[int]:
    """argparse type: a CPU list like 0,2-3."""
    from irqlab.runner.native import parse_cpu_list
    try:
        return parse_cpu_list(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _run_suite(cfg, out, args: argparse.Namespace) -> int:
    """Several targets one after another (irqlab.suite), then one comparison table."""
    from irqlab.suite import run_suite

    def after_run(result) -> None:
        out.close()                      # ends this run's progress bar
        if args.json:
            out.summary(result.summary)  # one summary line per target

    with Store(db_path(args)) as store:
        try:
            suite = run_suite(cfg, cfg.target.split(","), store, out, after_run=after_run)
        finally:
            out.close()
    out.suite(suite.json_object())
    if suite.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if suite.status == "ok" else EXIT_FAIL
