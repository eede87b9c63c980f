"""``irqlab`` entry point: run, list, show, bench."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from irqlab.cli.durations import parse_duration_ns
from irqlab.cli.render import HumanRenderer, JsonRenderer, Renderer
from irqlab.runner.machines import MACHINES
from irqlab.store import Store, StoreError, default_db_path

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad arguments: the message names the problem and the fix."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, then exit 2
        self.exit(EXIT_USAGE, f"irqlab: error: {message} (see `{self.prog} --help`)\n")


def _duration(text: str) -> int:
    try:
        return parse_duration_ns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    try:
        val = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if val < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return val


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=None,
                   help=f"database file (default {default_db_path()}, or $IRQLAB_DB)")
    p.add_argument("--json", action="store_true", help="print JSON lines")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="irqlab", description="Interrupt latency lab.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="measure timer-interrupt latency")
    r.add_argument("--target", default="guest", choices=["guest"],
                   help="what to measure (guest: the x86-64 probe in a QEMU VM)")
    r.add_argument("--arch", default="x86_64", choices=sorted(MACHINES),
                   help="guest probe architecture (default x86_64)")
    r.add_argument("--accel", default="auto", choices=["auto", "kvm", "tcg"],
                   help="auto tries KVM with a real boot and falls back to TCG")
    r.add_argument("--icount", action="store_true",
                   help="TCG with deterministic guest time (exact, repeatable)")
    r.add_argument("--period", type=_duration, default=1_000_000, metavar="DUR",
                   help="timer period (default 1ms)")
    bound = r.add_mutually_exclusive_group()
    bound.add_argument("--duration", type=_duration, default=None, metavar="DUR",
                       help="run length (default 30s)")
    bound.add_argument("--samples", type=_positive_int, default=None, metavar="N",
                       help="stop after N samples")
    r.add_argument("--window", type=_duration, default=10_000_000_000, metavar="DUR",
                   help="statistics window (default 10s)")
    r.add_argument("--threshold", type=_duration, default=30_000, metavar="DUR",
                   help="latency threshold counted per window (default 30us)")
    r.add_argument("--warmup", type=_positive_int, default=1, metavar="N",
                   help="windows left out of warm max (default 1)")
    r.add_argument("--idle", default="hlt", choices=["hlt", "poll"],
                   help="how the guest waits: hlt (default) or busy poll")
    r.add_argument("--inject-irqoff", type=_duration, default=0, metavar="DUR",
                   help="self-check: spin with interrupts off for DUR across the deadline")
    r.add_argument("--inject-every", type=_positive_int, default=0, metavar="N",
                   help="self-check: inject in every Nth period")
    r.add_argument("--timer", default="auto", choices=["auto", "deadline", "oneshot"],
                   help="LAPIC timer mode (auto: TSC-deadline when CPUID has it)")
    r.add_argument("--memory", type=_positive_int, default=64, metavar="MIB",
                   help="guest memory in MiB (default 64)")
    r.add_argument("--boot-timeout", type=_duration, default=30_000_000_000, metavar="DUR",
                   help="give up on an accelerator when the probe has not started (30s)")
    r.add_argument("--stall-timeout", type=_duration, default=None, metavar="DUR",
                   help="watchdog: fail when no sample arrives for DUR (default "
                        "max(3s, 20 periods))")
    r.add_argument("--probe", type=Path, default=None, help="probe ELF to boot")
    r.add_argument("--name", default=None, help="run name (later commands accept it)")
    _add_common(r)

    ls = sub.add_parser("list", help="list stored runs")
    _add_common(ls)

    sh = sub.add_parser("show", help="show one stored run")
    sh.add_argument("run", metavar="RUN", help="run id or name (latest run of that name)")
    _add_common(sh)

    b = sub.add_parser("bench", help="print performance figures (a benchmark, not a test)")
    b.add_argument("what", nargs="*", choices=["ingest", "stats", "rate", []],
                   default=[], help="which figures (default: all)")
    b.add_argument("--stats-samples", type=_positive_int, default=100_000_000, metavar="N")
    b.add_argument("--json", action="store_true", help="print JSON lines")
    return parser


def _renderer(args: argparse.Namespace) -> Renderer:
    return JsonRenderer() if args.json else HumanRenderer()


def _run_config(args: argparse.Namespace):
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
    if args.probe is not None and not args.probe.is_file():
        raise UsageError(f"--probe {args.probe} is not a file: build it with "
                         f"`make -C probes/guest` or give the right path")
    return RunConfig(target=args.target, arch=args.arch, accel=args.accel,
                     icount=args.icount or False, period_ns=args.period,
                     duration_ns=duration, samples=args.samples, window_ns=args.window,
                     threshold_ns=args.threshold, warmup=args.warmup, idle=args.idle,
                     inject_irqoff_ns=args.inject_irqoff, inject_every=args.inject_every,
                     name=args.name, timer=args.timer, memory_mib=args.memory,
                     boot_timeout_s=args.boot_timeout / 1e9,
                     stall_timeout_s=(None if args.stall_timeout is None
                                      else args.stall_timeout / 1e9),
                     probe=args.probe)


def cmd_run(args: argparse.Namespace) -> int:
    from irqlab.measure import run

    cfg = _run_config(args)
    renderer = _renderer(args)
    with Store(args.db or default_db_path()) as store:
        try:
            result = run(cfg, store, renderer)
        finally:
            renderer.close()
    renderer.summary(result.summary)
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK if result.status == "ok" else EXIT_FAIL


def _list_row(row) -> dict[str, Any]:
    s = row.summary or {}
    return {"run_id": row.run_id, "name": row.name, "started_at": row.started_at.isoformat(),
            "target": row.target, "accel": row.accel, "emulated": row.emulated,
            "status": row.status, "samples": s.get("samples", 0),
            "p99_ns": s.get("p99_ns"), "max_ns": s.get("max_ns")}


def cmd_list(args: argparse.Namespace) -> int:
    path = args.db or default_db_path()
    if not Path(path).exists():
        rows = []
    else:
        with Store(path, read_only=True) as store:
            rows = [_list_row(r) for r in store.runs()]
    _renderer(args).run_list(rows)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    with Store(args.db or default_db_path(), read_only=True) as store:
        row = store.resolve(args.run)
        windows = store.windows(row.run_id)
    summary = row.summary or {"type": "summary", "run_id": row.run_id, "name": row.name,
                              "target": row.target, "status": row.status,
                              "message": "run has no summary yet (still running, or irqlab "
                                         "was killed before it could write one)"}
    meta = row.metadata
    host = meta.get("host", {})
    probe = meta.get("probe", {})
    detail = {"run": f"{row.run_id} {row.name}", "status": row.status,
              "started": row.started_at.isoformat(), "ended": row.ended_at and row.ended_at.isoformat(),
              "host": f"{host.get('hostname')} {host.get('kernel')} {host.get('cpu_model')} "
                      f"({host.get('cpus_online')} cpus)",
              "qemu": meta.get("qemu_version"), "accel": row.accel,
              "probe": f"build {probe.get('build_id')} timer {probe.get('timer_mode')} "
                       f"ticks {probe.get('tick_hz')} Hz ({probe.get('tick_method')})",
              "qemu command": " ".join(meta.get("qemu_argv", [])) or "—"}
    _renderer(args).run_detail(summary, detail, windows)
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from irqlab.bench import run_benchmarks

    figures = run_benchmarks(args.what or ["ingest", "stats", "rate"],
                             stats_samples=args.stats_samples)
    _renderer(args).bench(figures)
    return EXIT_OK


COMMANDS = {"run": cmd_run, "list": cmd_list, "show": cmd_show, "bench": cmd_bench}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"irqlab {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as exc:
        print(f"irqlab {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
