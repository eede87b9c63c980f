"""The explainer of a guest probe's host capture (kind ``host-vcpu``): the host kernel's
events around the VMM (irqlab.trace.capture), each spike followed along its vCPU thread
(irqlab.explain.run); its files: trace.dat, ftrace text, Perfetto, Chrome JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from irqlab.explain.perfetto import VCPU, PerfettoRun, ftrace_packets, thread_state_packets
from irqlab.explain.run import Explained, as_json, capture_path, explain_run
from irqlab.explain.seam import Explanation, Progress, Request, Writer
from irqlab.store import Store
from irqlab.store.db import RunRow


class TracefsFiles:
    """The files of a tracefs capture (host or native), its pages read once for all of
    them (explain keeps only decoded columns); task names from the decoded context
    switches, so every format shows ``comm-pid`` rather than ``<...>``."""

    def __init__(self, path: Path, switches: dict[str, np.ndarray]) -> None:
        self.path = path
        self._switches = switches
        self._read: tuple[dict[str, Any], dict[int, bytes], dict[int, str]] | None = None

    def read(self) -> tuple[dict[str, Any], dict[int, bytes], dict[int, str]]:
        if self._read is None:
            from irqlab.trace.archive import read_archive
            from irqlab.trace.tracedat import cmdlines_from_switches
            header, per_cpu = read_archive(self.path)
            self._read = (header, per_cpu,
                          cmdlines_from_switches(self._switches, header.get("vmm_threads")))
        return self._read

    def dat(self, path: Path, progress: Progress, events: int, pages: int,
            tick_hz: int) -> dict[str, Any]:
        """trace.dat with the stamps in seconds at ``tick_hz`` (as the ftrace text)."""
        from irqlab.trace.tracedat import write_capture_tracedat
        header, per_cpu, cmdlines = self.read()
        progress.stage("writing trace.dat")
        nbytes = write_capture_tracedat(path, header, per_cpu, cmdlines, tick_hz)
        return {"file": str(path), "events": events, "pages": pages, "bytes": nbytes}

    def text(self, path: Path, progress: Progress, run_id: int, tick_hz: int,
             events: int) -> dict[str, Any]:
        from irqlab.explain.export import write_text
        header, per_cpu, cmdlines = self.read()
        progress.stage("writing ftrace text", total=events)
        return write_text(path, header, per_cpu, run_id, tick_hz, cmdlines,
                          lambda done, _total: progress.update(done))


def host_perfetto(res: Explained, files: TracefsFiles, path: Path, progress: Progress,
                  thread: tuple[int, str] | None = None,
                  entry_word: str = "ISR entry") -> dict[str, Any]:
    """``thread``: (tid, what it is) whose states to draw in the spike windows; default
    the vCPU thread. ``entry_word``: what ends a spike (its track's name)."""
    from irqlab.explain.export import to_ns_function
    from irqlab.explain.perfetto import write_perfetto
    header, per_cpu, cmdlines = files.read()
    progress.stage("writing Perfetto trace", total=res.trace.events)
    ns = to_ns_function(header, res.tick_hz)

    def one(tick: int) -> int:
        return int(ns(np.array([tick], dtype=np.uint64))[0])
    lo, hi = res.explainer.span
    every = res.all_samples
    counter: list[tuple[int, int]] = []
    if every:
        inside = (every["host_deadline"] >= lo) & (every["host_deadline"] <= hi)
        counter = [(t, res.ns(lat)) for t, lat in zip(
            ns(every["host_deadline"][inside]).tolist(),
            every["latency_tick"][inside].tolist())]
    windows = sorted((a.start, max(a.end, a.start)) for a in res.samples)
    if thread is None and res.explainer.vcpus:
        thread = (res.explainer.vcpus[0], "vCPU thread")
    tid = thread[0] if thread else None
    tl = res.explainer.threads.get(tid) if tid is not None else None

    def tracks(pb: Any, bar: Any) -> Any:
        if tl is not None and windows and thread is not None:
            for p in thread_state_packets(pb, VCPU, f"{thread[1]} {tid} (spike windows)",
                                          tl, windows, one):
                yield p, 0
        yield from ftrace_packets(pb, header, per_cpu, cmdlines, ns, bar)

    run = PerfettoRun(f"irqlab run {res.run.run_id}", res.samples, one, res.ns, counter,
                      tracks, entry_word=entry_word)
    return write_perfetto(path, run, lambda done, _total: progress.update(done))


def tracefs_writers(res: Explained, capture: Path, thread: tuple[int, str] | None = None,
                    entry_word: str = "ISR entry") -> dict[str, Writer]:
    """trace.dat, ftrace text, Perfetto and Chrome JSON of an explained tracefs capture;
    ``thread``: the thread whose states Perfetto draws (host_perfetto)."""
    files = TracefsFiles(capture, res.trace.t("sched_switch").cols)

    def chrome(path: Path, progress: Progress) -> dict[str, Any]:
        from irqlab.explain.chrome import write_chrome_json
        progress.stage("writing Chrome JSON")
        return {"file": str(path), "events": write_chrome_json(res, path)}

    return {
        "dat": lambda p, pr: files.dat(p, pr, res.trace.events, res.trace.pages,
                                       res.tick_hz),
        "text": lambda p, pr: files.text(p, pr, res.run.run_id, res.tick_hz,
                                         res.trace.events),
        "perfetto": lambda p, pr: host_perfetto(res, files, p, pr, thread, entry_word),
        "chrome_json": chrome,
    }


class HostVcpuExplainer:
    """A guest probe's spikes from the host kernel's capture (KVM, the vCPU thread)."""

    kind = "host-vcpu"
    title = "host vCPU/KVM (host tracefs around the VMM)"
    outputs = ("dat", "text", "perfetto", "chrome_json")

    def outputs_hint(self, run: RunRow) -> str:
        return ""

    def explain(self, store: Store, run: RunRow, request: Request,
                progress: Progress) -> Explanation:
        res = explain_run(store, str(run.run_id), threshold_ns=request.threshold_ns,
                          top=request.top, sample=request.sample, progress=progress)
        return Explanation(as_json(res), tracefs_writers(res, capture_path(store, res.run)))
