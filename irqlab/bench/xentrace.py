"""``irqlab bench xentrace``: records/s of ``irqlab xentrace``, and of the Xen explain of
every sample of the fixture's run, against ``xenalyze --summary`` (the baseline) on the
same file in the same run.

The input is a real capture recorded here under TCG (tests/fixtures/xen, or ``--xentrace-file``)
laid end to end until it spans ``minutes`` of trace time, each copy's cycle counts shifted
past the previous copy's, so the runstate replay sees one long, consistent trace. Both
tools run as fresh processes on the same plain file, alternately, ``rounds`` times; the
medians are compared (wall time, process start included for both). Explain runs once in
this process (loading the capture included) on the fixture's samples, laid end to end
with the capture; its records/s is set against the same xenalyze median.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.bench import irqlab_argv
from irqlab.xen.capture import read_xentrace
from irqlab.explain.xen import TRC_HVM_RDTSC, explain_samples, load_capture
from irqlab.xen.index import HAS_TSC, index_records
from irqlab.xen.xenalyze import find_xenalyze

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "xen" / \
    "dom0-cpu.xentrace.xz"
FIXTURE_SAMPLES = FIXTURE.parent / "dom0-cpu.samples.json"     # the probe's samples
FIXTURE_HZ = 2_596_146_000      # the fixture's tsc_hz (tests/fixtures/xen/README.md)


def capture_span(data: bytes) -> int:
    """Cycles from a capture's first to its last record, plus one: a copy's shift."""
    idx = index_records(data)
    own = idx.tsc[(idx.flags & HAS_TSC) != 0]
    return int(own.max() - own.min()) + 1


def tile_capture(data: bytes, copies: int) -> tuple[bytes, int]:
    """``copies`` of a xentrace file end to end, cycle counts shifted; (bytes, records).
    The guest TSC values of emulated-RDTSC records (the explain clock's anchors) move
    with them, so a copy's samples, shifted alike (:func:`tile_samples`), map as the
    original's do."""
    idx = index_records(data)
    own = np.flatnonzero(idx.flags & HAS_TSC)
    span = capture_span(data)
    base = bytearray(data)
    lo_at = (idx.off[own] + 4) // 4
    rdtsc = np.flatnonzero((idx.event == TRC_HVM_RDTSC) & (idx.nextra >= 2))
    val_at = (idx.off[rdtsc] + 4 + 8 * (idx.flags[rdtsc] & HAS_TSC)) // 4
    words = np.frombuffer(base, dtype="<u4").copy()
    tsc = idx.tsc[own].astype(np.uint64)
    val = idx.extra(rdtsc, 0).astype(np.uint64) | \
        idx.extra(rdtsc, 1).astype(np.uint64) << np.uint64(32)
    out = bytearray()
    for k in range(copies):
        for at, v in ((lo_at, tsc), (val_at, val)):
            shifted = v + np.uint64(k * span)
            words[at] = (shifted & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            words[at + 1] = (shifted >> np.uint64(32)).astype(np.uint32)
        out += words.tobytes()[:len(data) - len(data) % 4] + bytes(data[len(data) -
                                                                        len(data) % 4:])
    return bytes(out), len(idx) * copies


def tile_samples(samples: list[list[int]], copies: int, span: int) -> list[np.ndarray]:
    """seq, deadline and entry ticks of the samples of each copy (see tile_capture)."""
    seq, dl, en = (np.array(c, np.int64) for c in list(zip(*samples))[:3])
    k = np.repeat(np.arange(copies, dtype=np.int64), len(seq))
    return [np.tile(seq, copies) + k * len(seq), np.tile(dl, copies) + k * span,
            np.tile(en, copies) + k * span]


def bench_explain(path: Path, copies: int, span: int, records: int,
                  baseline_s: float | None) -> dict[str, Any]:
    """Xen explain of every sample of the tiled fixture run, in this process: the capture
    loaded (records, runstates, hypercalls) and each window attributed."""
    run = json.loads(FIXTURE_SAMPLES.read_text())
    seq, dl, en = tile_samples(run["samples"], copies, span)
    t0 = time.perf_counter()
    cap = load_capture(path)
    t1 = time.perf_counter()
    _clock, atts, _ex = explain_samples(cap, (run["run"]["probe_domid"], 0), seq, dl, en,
                                        np.arange(len(seq)), run["run"]["tsc_hz"])
    t2 = time.perf_counter()
    explained = sum(a.status == "explained" for a in atts)
    fig: dict[str, Any] = {
        "name": "xentrace-explain", "unit": "records/s", "records": records,
        "samples": len(seq), "explained": explained, "value": round(records / (t2 - t0)),
        "seconds": round(t2 - t0, 3), "load_seconds": round(t1 - t0, 3),
        "samples_per_s": round(len(seq) / (t2 - t1))}
    if baseline_s:
        fig.update({"baseline": round(records / baseline_s),
                    "baseline_seconds": round(baseline_s, 3),
                    "ratio": round(baseline_s / (t2 - t0), 2),
                    "baseline_name": "xenalyze --summary --svm-mode"})
    return fig


def bench_xentrace(minutes: float = 10.0, rounds: int = 2,
                   source: Path | None = None, tsc_hz: int | None = None) -> list[dict[str, Any]]:
    header, data = read_xentrace(source or FIXTURE)
    hz = tsc_hz or (header or {}).get("tsc_hz") or FIXTURE_HZ
    idx = index_records(data)
    own = idx.tsc[(idx.flags & HAS_TSC) != 0]
    span_s = float(own.max() - own.min()) / hz
    copies = max(1, round(minutes * 60 / span_s))
    big, records = tile_capture(data, copies)
    figure: dict[str, Any] = {"name": "xentrace", "unit": "records/s", "records": records,
                              "bytes": len(big), "trace_s": round(span_s * copies, 1),
                              "source": str(source or FIXTURE)}
    tool = find_xenalyze()
    with tempfile.TemporaryDirectory(prefix="irqlab-bench-xentrace-") as tmp:
        path = Path(tmp) / "capture.trc"
        path.write_bytes(big)
        del big
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            proc = subprocess.run([*irqlab_argv(), "xentrace",
                                   str(path), "--tsc-hz", str(hz), "--json"],
                                  capture_output=True, text=True)
            ours.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                return [{**figure, "value": None, "why": proc.stderr.strip()[-300:]}]
            if tool is not None:
                t0 = time.perf_counter()
                xa = tool.summary(path, hz, timeout_s=3600)
                theirs.append(time.perf_counter() - t0)
                if xa.returncode != 0:
                    tool, figure["baseline_why"] = None, xa.stderr.strip()[-300:]
        # The fixture comes with its run's samples: explain them all on the same file.
        explain = [bench_explain(path, copies, capture_span(data), records,
                                 statistics.median(theirs) if tool and theirs else None)
                   ] if source is None else []
    seconds = statistics.median(ours)
    figure.update({"value": round(records / seconds), "seconds": round(seconds, 3),
                   "rounds_s": [round(s, 3) for s in ours]})
    if theirs and tool is not None:
        base_s = statistics.median(theirs)
        figure.update({"baseline": round(records / base_s), "baseline_seconds": round(base_s, 3),
                       "baseline_rounds_s": [round(s, 3) for s in theirs],
                       "ratio": round(base_s / seconds, 2),
                       "baseline_name": "xenalyze --summary --svm-mode"})
    elif "baseline_why" not in figure:
        figure["baseline_why"] = ("xenalyze not found: scripts/fetch-xen-dom0.sh (./setup.sh) "
                                  "unpacks it")
    return [figure] + explain
