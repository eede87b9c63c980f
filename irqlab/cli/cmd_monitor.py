"""``irqlab monitor``: measure one target without end, in windows, with bounded storage
and optional Prometheus metrics (docs/monitor.md)."""

from __future__ import annotations

import argparse
import re
import signal
from typing import Any

from irqlab.cli.common import (EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError, add_db_json,
                               count, db_path, duration, renderer)
from irqlab.cli.output import json_or_text, show

NAME = "monitor"

EXAMPLES = """\
examples:
  irqlab monitor --target native --cpus 1 --priority 95 --period 1ms
      this host's CPU 1 watched without end, 60 s windows, raw samples kept 24 h
      (those above the threshold for good); stop it with SIGTERM or Ctrl-C
  irqlab monitor --target native --metrics 127.0.0.1:9464 --keep-raw 5m
      the same with Prometheus metrics at http://127.0.0.1:9464/metrics
  systemctl --user start irqlab-monitor
      as a service: contrib/irqlab-monitor.service (docs/monitor.md)
"""

_LONG_UNITS_S = {"h": 3600, "d": 86400}


def keep_raw(text: str) -> float:
    """argparse type of --keep-raw: a duration with a unit (s, m, h, d ...) -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([hd])\s*", text)
    if m:
        return float(m.group(1)) * _LONG_UNITS_S[m.group(2)]
    try:
        return duration(text) / 1e9
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text.strip()!r} is not a duration: write a number with a unit, e.g. 30m, "
            f"24h, 7d (units: s, m, h, d)") from None


def register(sub: argparse._SubParsersAction) -> None:
    from irqlab.cli.cmd_run import _register_target_options, _targets
    from irqlab.cli.hook_options import add_arguments as add_hook_options
    from irqlab.cli.cmd_manage import tag_pair
    from irqlab.cli.recorder_options import add_arguments as add_recorder_arguments
    from irqlab.argtypes import period

    m = sub.add_parser("monitor", help="measure one target without end, in windows, "
                                       "with bounded storage and Prometheus metrics",
                       description="Measure one target window by window until SIGTERM or "
                                   "Ctrl-C.\nWindows and histograms are kept for good, raw "
                                   "samples for --keep-raw\n(those above the threshold for "
                                   "good). A monitor of the same name and\nconfiguration "
                                   "on the same store continues its series.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("--target", default="native", type=_targets, metavar="TARGET",
                   help="what to measure, one target (default native); see irqlab run "
                        "--help")
    m.add_argument("-i", "--period", type=period, default=1_000_000, metavar="DUR",
                   help="timer period, with a unit (default 1ms)")
    m.add_argument("--window", type=duration, default=60_000_000_000, metavar="DUR",
                   help="statistics window, one sample file each (default 60s)")
    m.add_argument("--threshold", type=duration, default=30_000, metavar="LAT",
                   help="latency threshold: samples above it are counted and their raw "
                        "samples kept for good (default 30us)")
    m.add_argument("--warmup", type=count, default=1, metavar="N",
                   help="windows left out of warm max (default 1)")
    m.add_argument("--keep-raw", type=keep_raw, default=86_400.0, metavar="DUR",
                   help="keep raw samples at or below the threshold this long, then drop "
                        "them in whole files (default 24h; units s, m, h, d)")
    m.add_argument("--metrics", nargs="?", const="127.0.0.1:9464", default=None,
                   metavar="ADDR:PORT",
                   help="serve Prometheus/OpenMetrics text at http://ADDR:PORT/metrics "
                        "(default 127.0.0.1:9464; loopback only unless "
                        "--metrics-allow-remote)")
    m.add_argument("--metrics-allow-remote", action="store_true",
                   help="let --metrics listen on a non-loopback address (no "
                        "authentication: firewall it)")
    m.add_argument("--boot-timeout", type=duration, default=30_000_000_000, metavar="DUR",
                   help="give up when the probe has not started (30s)")
    m.add_argument("--stall-timeout", type=duration, default=None, metavar="DUR",
                   help="watchdog: fail when no sample arrives for DUR")
    _register_target_options(m)
    add_hook_options(m.add_argument_group("loads and knobs"))
    m.add_argument("-n", "--name", default=None,
                   help="the monitor's name (default monitor-TARGET); with the same "
                        "configuration a restart continues its series")
    m.add_argument("--tag", type=tag_pair, action="append", default=[],
                   metavar="KEY=VALUE", help="tag its runs, repeatable")
    rec = m.add_argument_group("flight recorder")
    rec.add_argument("--trace", action="store_true",
                     help="keep the host kernel's trace in an overwriting ring and save it "
                          "around each spike (needs --on-threshold LAT; --target native)")
    add_recorder_arguments(rec)
    m.add_argument("--brief", action="store_true", help="window lines in brief")
    m.add_argument("-q", "--quiet", action="store_true",
                   help="no window lines, only the summary at the end")
    add_db_json(m)


def _run_config(args: argparse.Namespace) -> Any:
    """The run's config through `irqlab run`'s own checks (cmd_run.run_configs)."""
    from irqlab.cli.cmd_run import run_configs
    from irqlab.store import keeps_files

    if "," in args.target:
        raise UsageError(f"--target {args.target}: a monitor measures one target; start "
                         f"one monitor per target")
    db = db_path(args)
    if not keeps_files(db):
        raise UsageError("irqlab monitor keeps raw samples in files beside a database "
                         "file: use --db FILE (and `irqlab push` runs to the lab store)")
    if args.keep_raw <= 0:
        raise UsageError("--keep-raw must be more than 0, e.g. --keep-raw 24h")
    if args.trace and not any(i not in ("stop",) and not i.startswith(("signal:", "shell:"))
                              for i in args.on_threshold):
        raise UsageError("a monitor keeps no whole trace (about 1 GB a minute): --trace "
                         "needs --on-threshold LAT, which keeps the trace around each "
                         "spike")
    # What run_configs reads and a monitor does not take.
    args.duration, args.samples, args.break_at = None, None, None
    cfg = run_configs(args, db)[0]
    cfg.name = args.name or f"monitor-{cfg.target}"
    return cfg


def run(args: argparse.Namespace) -> int:
    from irqlab.measure.metrics import MetricsAddressError, MonitorMetrics, parse_address
    from irqlab.measure.monitor import MonitorConfig, run_monitor
    from irqlab.runner.hostinfo import host_info
    from irqlab.store import open_store

    cfg = _run_config(args)
    metrics = None
    if args.metrics is not None:
        try:
            addr, port = parse_address(args.metrics, args.metrics_allow_remote)
        except MetricsAddressError as exc:
            raise UsageError(str(exc)) from None
        metrics = MonitorMetrics({"target": cfg.target,
                                  "host": str(host_info().get("hostname", "")),
                                  "configuration": cfg.name}, cfg.threshold_ns)
        try:
            port = metrics.serve(addr, port)
        except OSError as exc:
            raise UsageError(f"--metrics {args.metrics}: cannot listen there "
                             f"({exc.strerror or exc}): pick another port") from None
    out = renderer(args)
    out.quiet, out.brief = args.quiet, args.brief
    try:
        if metrics is not None:
            out.on_notice(f"metrics at http://{_host(addr)}:{port}/metrics")
        with open_store(db_path(args)) as store:
            mcfg = MonitorConfig(cfg, keep_raw_s=args.keep_raw, metrics=metrics)
            if metrics is not None:
                mcfg.metrics_address = f"{_host(addr)}:{port}"
            try:
                result = run_monitor(mcfg, store, _NoProgress(out))
            finally:
                out.close()
    finally:
        if metrics is not None:
            metrics.close()
    show(result.summary, json_or_text(args), out.screen)
    if result.status == "interrupted":
        # SIGTERM is how a service is stopped: a clean end (systemd sees success).
        stopped_by = str(result.summary.get("message") or "")
        return EXIT_OK if signal.Signals.SIGTERM.name in stopped_by else EXIT_INTERRUPTED
    return EXIT_OK if result.status == "ok" else EXIT_FAIL


class _NoProgress:
    """The renderer, without its progress bar: a monitor has no end to progress to (the
    bar would sit at 0 %); window lines and notices as `irqlab run` prints them."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def on_started(self, info: dict[str, Any]) -> None:
        self.out.on_started(info)
        self.out.close()                  # ends the bar on_started opened

    def __getattr__(self, name: str) -> Any:
        return getattr(self.out, name)


def _host(addr: str) -> str:
    return f"[{addr}]" if ":" in addr else addr
