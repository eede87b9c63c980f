"""``irqlab explain RUN``: who took the time of each latency spike (issue 8)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irqlab.cli.common import EXIT_OK, UsageError, count, db_path, duration
from irqlab.cli.common import db_ref
from irqlab.cli.render import json_line, stage_progress
from irqlab.store import open_store

if TYPE_CHECKING:
    from irqlab.explain.run import Explained

NAME = "explain"


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("explain", help="attribute latency spikes to host-side causes, or "
                                       "to Xen and its domains (needs a run recorded "
                                       "with --trace)")
    e.add_argument("run", metavar="RUN", help="run id or name")
    pick = e.add_mutually_exclusive_group()
    pick.add_argument("--top", type=count, default=None, metavar="N",
                      help="explain the N largest latencies")
    pick.add_argument("--sample", type=count, default=None, metavar="SEQ",
                      help="explain one sample by sequence number")
    e.add_argument("--threshold", type=duration, default=None, metavar="DUR",
                   help="explain samples above DUR (default: the run's threshold)")
    e.add_argument("--perfetto", type=Path, default=None, metavar="FILE",
                   help="write a Perfetto trace (native protobuf, .pftrace): host events "
                        "on CPU tracks, samples, spikes with their stages, attribution")
    e.add_argument("--chrome-json", type=Path, default=None, metavar="FILE",
                   help="write samples, stages and causes as Chrome trace JSON (legacy; "
                        "Perfetto reads it best-effort)")
    e.add_argument("--text", type=Path, default=None, metavar="FILE",
                   help="write the whole capture as ftrace text (comm-pid [cpu] "
                        "secs.nsecs: event: fields), as trace-cmd report prints and "
                        "Perfetto imports")
    e.add_argument("--dat", type=Path, default=None, metavar="FILE",
                   help="write the whole capture as a trace-cmd trace.dat (version 6) "
                        "for trace-cmd report and KernelShark")
    e.add_argument("--db", type=db_ref, default=None, help="database file")
    e.add_argument("--json", action="store_true", help="print one JSON object")


# The file outputs: (option, its dest, which is also its key in the JSON object).
OUTPUTS = (("--dat", "dat"), ("--text", "text"), ("--perfetto", "perfetto"),
           ("--chrome-json", "chrome_json"))


def run(args: argparse.Namespace) -> int:
    from irqlab.explain.report import render_text
    from irqlab.explain.run import _samples, as_json, capture_path, explain_run
    from irqlab.explain.stored import NET_PATH, XENTRACE_HOOK, capture_kind, xentrace_path

    if args.top == 0:
        raise UsageError("--top must be at least 1")
    _check_output_paths(args)
    with open_store(db_path(args), read_only=True) as store:
        run = store.resolve(args.run)
        if capture_kind(run) == XENTRACE_HOOK:
            return _explain_xen(args, run, xentrace_path(run), _samples(store, run.run_id))
        if capture_kind(run) == NET_PATH:
            return _explain_net(args, store, run)
    files: dict[str, dict[str, Any]] = {}
    with stage_progress(args) as progress:
        with open_store(db_path(args), read_only=True) as store:
            res = explain_run(store, args.run, threshold_ns=args.threshold, top=args.top,
                              sample=args.sample, progress=progress)
            capture = capture_path(store, res.run)
        if args.dat or args.text or args.perfetto:
            files = _write_exports(args, res, capture, progress)
        if args.chrome_json:
            from irqlab.explain.chrome import write_chrome_json
            progress.stage("writing Chrome JSON")
            n = _writing(args.chrome_json, lambda: write_chrome_json(res, args.chrome_json))
            files["chrome_json"] = {"file": str(args.chrome_json), "events": n}
    if args.json:
        out = as_json(res)
        out.update(files)
        print(json_line(out))
    else:
        print(render_text(res))
        for line in written_lines(files):
            print(line)
    return EXIT_OK


def _explain_xen(args: argparse.Namespace, run: Any, path: Path, samples: dict) -> int:
    """`irqlab explain` of a xentrace capture (irqlab.xen.explain), same output shape."""
    from irqlab.explain.report import render_json
    from irqlab.store import StoreError
    from irqlab.xen.explain import as_json, explain_run

    for opt, dest in OUTPUTS:
        if dest != "perfetto" and getattr(args, dest):
            raise UsageError(f"{opt} exports host kernel captures; run {run.run_id}'s is "
                             f"xentrace: use --perfetto, `irqlab xentrace {path}` or "
                             f"xenalyze")
    try:
        res = explain_run(run, path, samples, args.threshold, args.top, args.sample)
    except ValueError as exc:
        raise StoreError(str(exc)) from None
    js = as_json(res)
    files: dict[str, dict[str, Any]] = {}
    if args.perfetto:
        from irqlab.xen.perfetto import write_xen_perfetto
        files["perfetto"] = _writing(args.perfetto,
                                     lambda: write_xen_perfetto(res, args.perfetto))
    if args.json:
        js.update(files)
        print(json_line(js))
    else:
        print(render_json(js))
        for line in written_lines(files):
            print(line)
    return EXIT_OK


def _explain_net(args: argparse.Namespace, store: Any, run: Any) -> int:
    """`irqlab explain` of a net run, along the packet's path (irqlab.explain.netpath)."""
    from irqlab.explain.report import render_json
    from irqlab.explain.stored import explain_net_json

    for opt, dest in OUTPUTS:
        if getattr(args, dest):
            raise UsageError(f"{opt} is not written for net runs yet: run {run.run_id}'s "
                             f"capture is explained along the packet's path; use --json")
    js = explain_net_json(store, run, args.threshold, args.top, args.sample)
    print(json_line(js) if args.json else render_json(js))
    return EXIT_OK


def written_lines(files: dict[str, dict[str, Any]]) -> list[str]:
    """One line per file written (the human output's last lines)."""
    out = []
    if "dat" in files:
        d = files["dat"]
        out.append(f"wrote {d['file']}: trace.dat v6, {d['events']} events, "
                   f"{d['pages']} pages, {d['bytes']} bytes")
    if "text" in files:
        t = files["text"]
        out.append(f"wrote {t['file']}: ftrace text, {t['events']} events, "
                   f"{t['bytes']} bytes")
    if "perfetto" in files:
        p = files["perfetto"]
        out.append(f"wrote {p['file']}: Perfetto protobuf trace, {p['events']} host events, "
                   f"{p['samples']} samples, {p['spikes']} spikes, {p['bytes']} bytes")
    if "chrome_json" in files:
        c = files["chrome_json"]
        out.append(f"wrote {c['file']}: Chrome trace JSON, {c['events']} events")
    return out


def _check_output_paths(args: argparse.Namespace) -> None:
    """Checked before explaining, which can take minutes on a large capture, so a typo
    in an output path fails at once."""
    given = [(opt, getattr(args, dest)) for opt, dest in OUTPUTS if getattr(args, dest)]
    for opt, path in given:
        if path.is_dir():
            raise UsageError(f"{opt} {path} is a directory: give a file name, "
                             f"e.g. {path / 'trace'}")
        if not path.parent.is_dir():
            raise UsageError(f"{opt} {path}: directory {path.parent} does not exist; "
                             f"create it or choose another path")
    for i, (opt, path) in enumerate(given):
        for opt2, path2 in given[i + 1:]:
            if path.resolve() == path2.resolve():
                raise UsageError(f"{opt} and {opt2} both name {path}: give two different "
                                 f"files")


def _writing(path: Path, write: Any) -> Any:
    try:
        return write()
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}; choose another path") \
            from exc


def _write_exports(args: argparse.Namespace, res: Explained, capture: Path,
                   progress: Any) -> dict[str, dict[str, Any]]:
    """trace.dat, ftrace text and Perfetto from the capture's pages, read once (explain
    keeps only decoded columns); task names from the decoded context switches, so every
    format shows ``comm-pid`` rather than ``<...>``."""
    from irqlab.trace.archive import read_archive
    from irqlab.trace.tracedat import cmdlines_from_switches

    header, per_cpu = read_archive(capture)
    cmdlines = cmdlines_from_switches(res.trace.t("sched_switch").cols,
                                      header.get("vmm_threads"))
    out: dict[str, dict[str, Any]] = {}

    def bar(done: int, total: int) -> None:
        progress.update(done)

    if args.dat:
        from irqlab.trace.tracedat import write_capture_tracedat
        progress.stage("writing trace.dat")
        nbytes = _writing(args.dat, lambda: write_capture_tracedat(
            args.dat, header, per_cpu, cmdlines))
        out["dat"] = {"file": str(args.dat), "events": res.trace.events,
                      "pages": res.trace.pages, "bytes": nbytes}
    if args.text:
        from irqlab.explain.export import write_text
        progress.stage("writing ftrace text", total=res.trace.events)
        out["text"] = _writing(args.text, lambda: write_text(
            args.text, header, per_cpu, res.run.run_id, res.tick_hz, cmdlines, bar))
    if args.perfetto:
        from irqlab.explain.perfetto import write_perfetto
        progress.stage("writing Perfetto trace", total=res.trace.events)
        out["perfetto"] = _writing(args.perfetto, lambda: write_perfetto(
            res, header, per_cpu, cmdlines, args.perfetto, bar))
    return out
