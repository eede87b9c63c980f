"""``irqlab run``: measure timer-interrupt latency (the contract in README and issue 2)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from irqlab.cli.common import (EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError, add_db_json,
                               count, db_path, duration, renderer)
from irqlab.cli.hook_options import add_arguments as add_hook_options, hooks_from_args
from irqlab.cli.recorder_options import add_arguments as add_recorder_arguments
from irqlab.cli.recorder_options import on_threshold, recorder_hook
from irqlab.cli.cmd_manage import tag_pair
from irqlab.argtypes import period, run_length
from irqlab.cli.output import json_or_text, show
from irqlab.store import keeps_files, open_store

NAME = "run"


# The end of `irqlab run --help`, like rtla timerlat hist's: what people type first.
EXAMPLES = """\
examples:
  irqlab run
      the x86-64 probe in QEMU (KVM if it boots, else TCG), 1 ms period, 30 s
  irqlab run --accel tcg --icount --samples 2000 --window 1s
      deterministic emulated run: same build and arguments, same latencies
  irqlab run --inject-irqoff 2ms --inject-every 100
      self-check: every 100th sample, and only those, must show a 2 ms delay
  irqlab run --target native --cpus 1-2 --priority 95 --duration 1m
      cyclictest-class probe on this host, one SCHED_FIFO thread per CPU
  irqlab run --target xen --xen-sched credit2 --neighbour cpu
      the arm64 probe as a dom0less Xen domU beside a CPU-bound domain
  irqlab run --target net --net tap --inject-delay 5ms --inject-every 100
      UDP round trips to a Linux guest through a tap in a namespace of the run's
      own; every 100th reply held 5 ms by the guest (self-check)
  irqlab run --target guest,native --duration 10s
      two targets one after another, one comparison table
  irqlab run --target native --repeat 5 --duration 10s --name base
      a series of 5 runs of one configuration (run to run variation); then
      `irqlab compare series:base series:other` holds two series against each other
  irqlab run --load cpu:cpus=1 --pin 1 --prio 80 --trace --name loaded
      with a CPU load and the vCPU pinned at SCHED_FIFO 80, host events captured
      for `irqlab explain loaded`
  irqlab run --target native -D 3600 -i 1ms --break-at 1ms --trace -n spike
      stop at the first sample above 1 ms (cyclictest -b, rtla -T; -D in seconds):
      the capture ends at it, then `irqlab explain spike` names its cause
  irqlab run --samples 10000 --json | jq 'select(.type == "summary")'
      machine-readable: versioned JSON lines (docs/formats.md section 4)
"""


def register(sub: argparse._SubParsersAction) -> None:
    """The options in groups (target, timing, statistics, each target's own, loads and
    knobs, output): names, defaults and behaviour are those of the flat list they were,
    only `--help` reads differently (users' scripts rely on the options)."""
    from irqlab.targets import SUITES, TARGETS

    r = sub.add_parser("run", help="measure timer-interrupt latency",
                       description="Measure timer-interrupt latency window by window,\n"
                                   "store every sample and print a summary.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = r.add_argument_group("target")
    target.add_argument("--target", default="guest", type=_targets, metavar="TARGET[,TARGET]",
                        help="what to measure: "
                        + "; ".join(f"{t.name} ({t.help})" for t in TARGETS.values())
                        + "; a comma list or a suite (" + ", ".join(SUITES) + ") runs them "
                        "one after another as one suite and prints a comparison table")
    timing = r.add_argument_group("timing")
    timing.add_argument("-i", "--period", type=period, default=1_000_000, metavar="DUR",
                        help="timer period, with a unit (default 1ms; cyclictest's -i "
                             "1000 is -i 1000us)")
    bound = timing.add_mutually_exclusive_group()
    bound.add_argument("-D", "--duration", type=run_length, default=None, metavar="DUR",
                       help="run length; a bare number is seconds, as cyclictest's -D "
                            "(default 30s)")
    bound.add_argument("--samples", type=count, default=None, metavar="N",
                       help="stop after N samples")
    timing.add_argument("--repeat", type=repeat_arg, default=1, metavar="N|auto",
                        help="make N runs of each configuration, stored as a series "
                             "(tag series=ID; select with series:ID); several targets' "
                             "runs interleave, round by round (default 1); auto (two or "
                             "more targets): add rounds until every compared quantile of "
                             "each target against the first is `different` or `same` "
                             "(as compare judges them), at most --max-repeat")
    timing.add_argument("--max-repeat", type=repeat_count, default=10, metavar="N",
                        help="--repeat auto: at most N runs of each configuration "
                             "(default 10)")
    timing.add_argument("--break-at", type=duration, default=None, metavar="LATENCY",
                        help="stop at the first sample above LATENCY (cyclictest -b, rtla "
                             "-T): status stopped-at-break, exit 1; with --trace the "
                             "capture ends at it")
    timing.add_argument("--boot-timeout", type=duration, default=30_000_000_000,
                        metavar="DUR",
                        help="give up on an accelerator when the probe has not started (30s)")
    timing.add_argument("--stall-timeout", type=duration, default=None, metavar="DUR",
                        help="watchdog: fail when no sample arrives for DUR (default "
                             "max(3s, 20 periods); xen: max(10s, 40 periods))")
    stats = r.add_argument_group("statistics")
    stats.add_argument("--window", type=duration, default=10_000_000_000, metavar="DUR",
                       help="statistics window (default 10s)")
    stats.add_argument("--threshold", type=duration, default=None, metavar="DUR",
                       help="latency threshold counted per window (default 30us); "
                            "noise: the shortest gap recorded (default 5us)")
    stats.add_argument("--warmup", type=count, default=1, metavar="N",
                       help="windows left out of warm max (default 1)")
    _register_target_options(r)
    # --load, --knob and one option per knob (irqlab.cli.hook_options).
    add_hook_options(r.add_argument_group("loads and knobs"))
    output = r.add_argument_group("output and recording")
    output.add_argument("-n", "--name", default=None,
                        help="run name (later commands accept it)")
    output.add_argument("--tag", type=tag_pair, action="append", default=[],
                        metavar="KEY=VALUE",
                        help="tag the run, repeatable (select with tag:KEY=VALUE)")
    output.add_argument("--brief", action="store_true",
                        help="window lines in brief: '#3 mean 31.6 us max 76.5 us above 5' "
                             "(the default keeps the seed logs' raw-tick shape)")
    output.add_argument("-q", "--quiet", action="store_true",
                        help="print no window lines and no progress, only the summary "
                             "(as cyclictest -q)")
    output.add_argument("--trace", action="store_true",
                        help="capture host kernel events (private tracefs instance) for "
                             "`irqlab explain`; with --target xen --xen-dom0 linux, "
                             "xentrace in dom0 instead; native and linux-guest runs also "
                             "split every sample into IRQ and thread latency (window "
                             "lines and summary)")
    add_recorder_arguments(output)
    add_db_json(output)


def target_option_groups() -> list[tuple[str, str | None, list[tuple[Any, list[str]]]]]:
    """(title, description, [(option, names of the targets taking it)]) for `run --help`:
    options several targets take in one shared group whose lines name the targets, then
    one group per target with its own options and the shared ones it also takes
    (irqlab.targets declares who takes what)."""
    from irqlab.targets import TARGETS, all_options

    every = list(all_options().values())
    groups: list[tuple[str, str | None, list[tuple[Any, list[str]]]]] = [
        ("target options shared by several targets ([the targets that take it])", None,
         [(opt, names) for opt, names in every if len(names) > 1])]
    for name in TARGETS:
        also = [opt.flag for opt, names in every if name in names and len(names) > 1]
        desc = f"also takes {', '.join(also)} (shared, above)" if also else None
        groups.append((f"{name} options (--target {name})", desc,
                       [(opt, names) for opt, names in every if names == [name]]))
    return groups


def _register_target_options(r: argparse.ArgumentParser) -> None:
    """Each target option once (irqlab.targets), in the group of who takes it."""
    for title, desc, options in target_option_groups():
        group = r.add_argument_group(title, desc)
        for opt, names in options:
            kwargs = dict(opt.kwargs)
            kwargs["help"] = f"[{', '.join(names)}] {kwargs.get('help', '')}".rstrip()
            flags = [SHORT_TARGET_OPTIONS[opt.flag]] if opt.flag in SHORT_TARGET_OPTIONS \
                else []
            group.add_argument(*flags, opt.flag, dest=opt.dest, default=None, **kwargs)


# Short forms of target options, cyclictest's letters (-p: its SCHED_FIFO priority).
# Every short option of `irqlab run` is one of -D -i -n -p -q (tests/cli/test_args.py).
SHORT_TARGET_OPTIONS = {"--priority": "-p"}


def _target_given(args: argparse.Namespace, targets: list[str]) -> list[dict[str, Any]]:
    """Per target, the values of its options that were given; an option given that no
    chosen target takes exits 2 naming the target and the fix."""
    from irqlab.targets import all_options, get_target

    chosen = [get_target(t) for t in targets]
    for dest, (opt, names) in all_options().items():
        if getattr(args, dest) is None or any(t.name in names for t in chosen):
            continue
        what = ", ".join(t.name for t in chosen)
        reason = next((t.why_not[dest] for t in chosen if dest in t.why_not), None)
        raise UsageError(f"{opt.flag} does not apply to --target {what}"
                         + (f" ({reason})" if reason else "")
                         + f": drop it (it applies to {', '.join(names)})")
    return [{opt.dest: getattr(args, opt.dest) for opt in t.options
             if getattr(args, opt.dest) is not None} for t in chosen]


def _check_common(args: argparse.Namespace, targets: list[str]) -> int | None:
    """Options every target shares; returns the run's --duration (ns, or None)."""
    from irqlab.targets import get_target

    if args.period <= 0:
        raise UsageError("--period must be more than 0, e.g. --period 1ms")
    for name in targets:
        floor = get_target(name).min_period_ns
        if args.period < floor:
            raise UsageError(f"--period {args.period} ns is below {floor // 1000}us, the "
                             f"shortest period the {name} probe takes: use --period "
                             f"{floor // 1000}us or more")
    if args.samples == 0:
        raise UsageError("--samples must be at least 1")
    # Issue 20: a zero timeout would fail every boot (or every run) later, with exit 1.
    if args.boot_timeout <= 0:
        raise UsageError("--boot-timeout must be more than 0, e.g. --boot-timeout 30s")
    if args.stall_timeout is not None and args.stall_timeout <= 0:
        raise UsageError("--stall-timeout must be more than 0, e.g. --stall-timeout 5s")
    duration_ns = args.duration
    if duration_ns is None and args.samples is None:
        duration_ns = 30_000_000_000
    if duration_ns is not None and duration_ns < args.period:
        raise UsageError("--duration is shorter than one --period: nothing to measure")
    if args.window < args.period:
        raise UsageError("--window must hold at least one period, e.g. --window 10s")
    if args.break_at is not None and args.break_at <= 0:
        raise UsageError("--break-at must be more than 0, e.g. --break-at 1ms")
    return duration_ns


def build_hooks(args: argparse.Namespace, db: Path, target: Any, options: Any) -> list[Any]:
    """The run hooks of one run, new objects each call: knobs, loads, then the trace
    capture the target provides (Target.trace_capture; what `irqlab run`, its suites and
    `irqlab matrix` all use)."""
    try:
        hooks = hooks_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    limit_ns, _actions, _stop = on_threshold(args)
    if args.trace:
        if not keeps_files(db):
            raise UsageError("--trace keeps its capture beside a database file: use --db "
                             "FILE, then `irqlab push` the run to the lab store")
        hook = target.trace_capture(options, db, args.period)
        if limit_ns is not None:
            hook = recorder_hook(args, hook, args.period, limit_ns, target.name)
        hooks.append(hook)
    elif getattr(args, "trace_ring", None) is not None:
        raise UsageError("--trace-ring sizes the flight recorder: add --trace and "
                         "--on-threshold LAT, or drop it")
    return hooks


def run_configs(args: argparse.Namespace, db: Path | None = None) -> list:
    """One RunConfig per target of ``--target``, each checked by its target's own rules
    (exit 2 on the first problem, before anything starts); a suite's runs are named
    ``<suite>-<target>`` and carry ``suite`` and ``cell``."""
    from irqlab.measure import RunConfig
    from irqlab.targets import CAPABILITIES, TargetUsageError, get_target

    targets = args.target.split(",")
    duration_ns = _check_common(args, targets)
    given = _target_given(args, targets)
    db = db or db_path(args)
    suite = None
    if len(targets) > 1:
        suite = args.name or f"suite-{time.strftime('%Y%m%d-%H%M%S')}"
    out = []
    for name, values in zip(targets, given):
        try:
            options = get_target(name).configure(values, args.period)
        except TargetUsageError as exc:
            raise UsageError(str(exc) if suite is None else f"--target {name}: {exc}") \
                from None
        hooks = build_hooks(args, db, get_target(name), options)
        for hook in hooks:
            # A hook that runs only somewhere (e.g. inside a Xen dom0) refuses the others.
            if hook.requires is not None and hook.requires not in options.capabilities():
                raise UsageError(f"{hook.name} needs {CAPABILITIES[hook.requires]}; this "
                                 f"--target {name} run has no such thing: drop it or run "
                                 f"with that")
        limit_ns, actions, stop = on_threshold(args)
        if stop and args.break_at not in (None, limit_ns):
            raise UsageError("--on-threshold stop is --break-at at the same latency: give "
                             "one of them")
        out.append(RunConfig(
            target=name, options=options, hooks=hooks,
            period_ns=args.period, duration_ns=duration_ns, samples=args.samples,
            window_ns=args.window, warmup=args.warmup,
            threshold_ns=(get_target(name).default_threshold_ns if args.threshold is None
                          else args.threshold),
            name=args.name if suite is None else f"{suite}-{name}",
            boot_timeout_s=args.boot_timeout / 1e9,
            break_at_ns=limit_ns if stop else args.break_at,
            on_threshold_ns=limit_ns, on_threshold_actions=actions,
            stall_timeout_s=(None if args.stall_timeout is None
                             else args.stall_timeout / 1e9),
            suite=suite, cell=None if suite is None else {"target": name},
            tags=dict(getattr(args, "tag", None) or [])))
    return out


def run_config(args: argparse.Namespace, db: Path | None = None):
    """The RunConfig of a single-target ``irqlab run`` (matrix cells are one run each)."""
    cfgs = run_configs(args, db)
    if len(cfgs) != 1:
        raise UsageError(f"--target {args.target} names several targets; a matrix cell "
                         f"measures one: make target a matrix key instead")
    return cfgs[0]


def repeat_count(text: str) -> int:
    """argparse type of --repeat (and a scenario's repeat): a whole number, at least 1."""
    n = count(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text.strip()} is too few: every configuration "
                                         f"runs at least once; write 1 (the default) or "
                                         f"more, e.g. --repeat 5")
    return n


AUTO = "auto"


def repeat_arg(text: str) -> int | str:
    """argparse type of run's --repeat: N (repeat_count) or auto."""
    return AUTO if text.strip().lower() == AUTO else repeat_count(text)


def run(args: argparse.Namespace) -> int:
    from irqlab.measure import run as measure

    cfgs = run_configs(args)
    args.auto = args.repeat == AUTO
    if args.auto:
        from irqlab.reports.noise import MIN_RUNS
        if len(cfgs) < 2:
            raise UsageError("--repeat auto compares configurations: give two or more "
                             "targets (--target a,b), or --repeat N for one")
        if args.max_repeat < MIN_RUNS:
            raise UsageError(f"--max-repeat {args.max_repeat} is too few for --repeat "
                             f"auto: it judges from {MIN_RUNS} runs a side")
        args.repeat = args.max_repeat
    out = renderer(args)
    out.quiet, out.brief = args.quiet, args.brief
    if len(cfgs) > 1 or args.repeat > 1:
        return _run_suite(cfgs, out, args)
    with open_store(db_path(args)) as store:
        try:
            result = measure(cfgs[0], store, out)
        finally:
            out.close()
    show(result.summary, json_or_text(args), out.screen)
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    if not (result.summary.get("self_check") or {}).get("passed", True):
        return EXIT_FAIL                # the self-check found fewer than it injected
    return EXIT_OK if result.status == "ok" else EXIT_FAIL


def _targets(text: str) -> str:
    """argparse type: one target, a comma list or a suite name -> "a,b" (validated)."""
    from irqlab.targets import parse_targets
    try:
        return ",".join(parse_targets(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _run_suite(cfgs: list, out, args: argparse.Namespace) -> int:
    """Several targets one after another, or one target's --repeat series, or both
    (irqlab.suite: interleaved); then one comparison table if several targets, and one
    line per series."""
    from irqlab.suite import run_suite

    single = len(cfgs) == 1
    if args.repeat > 1:
        stamp = time.strftime('%Y%m%d-%H%M%S')
        for cfg in cfgs:
            # The default name has the time of each run: a series' runs share one.
            cfg.name = cfg.name or f"{cfg.target}-{stamp}"

    def after_run(result) -> None:
        out.close()                      # ends this run's progress bar
        if args.json or single:
            # One summary per run (a suite: a table at the end).
            show(result.summary, json_or_text(args), out.screen)

    db = db_path(args)
    with open_store(db) as store:
        try:
            suite = run_suite(cfgs, store, out, after_run=after_run, repeat=args.repeat,
                              renew=lambda cfg: _renewed(cfg, args, db),
                              until=_auto_until(args.repeat) if args.auto else None)
        finally:
            out.close()
    if not single:
        show(suite.json_object(), json_or_text(args), out.screen)
    for i, series in enumerate(suite.series):
        show({"type": "series_result", "series": series,
              "others": suite.series[:i] + suite.series[i + 1:]}, json_or_text(args))
    if suite.auto is not None:
        show({"type": "auto_result", "auto": suite.auto}, json_or_text(args))
    if suite.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if suite.status == "ok" else EXIT_FAIL


def _auto_until(max_runs: int) -> Any:
    """--repeat auto's stopping rule for run_suite: after each whole round, every series
    against the first is judged on its runs' summaries (noise.auto_judge); stop when
    every quantile is `different` or `same`."""
    from irqlab.reports import noise

    def until(suite: Any, rounds: int) -> bool:
        if rounds < noise.MIN_RUNS or len(suite.series) < 2:
            return False
        by_id = {r.run_id: r.summary for r in suite.results}
        suite.auto = noise.auto_judge(
            [(s.id, [by_id[i] for i in s.run_ids]) for s in suite.series], rounds,
            max_runs)
        return bool(suite.auto["decided"])
    return until


def _renewed(cfg: Any, args: argparse.Namespace, db: Path) -> Any:
    """``cfg`` with hook objects of its own: a hook (load, knob, capture) lives one run."""
    import dataclasses

    from irqlab.targets import get_target
    return dataclasses.replace(cfg, hooks=build_hooks(args, db, get_target(cfg.target),
                                                      cfg.options))
