"""``irqlab bench xentrace``: records/s of ``irqlab xentrace`` against ``xenalyze
--summary`` (the baseline) on the same file in the same run.

The input is a real capture recorded here under TCG (tests/fixtures/xen, or ``--xentrace-file``)
laid end to end until it spans ``minutes`` of trace time, each copy's cycle counts shifted
past the previous copy's, so the runstate replay sees one long, consistent trace. Both
tools run as fresh processes on the same plain file, alternately, ``rounds`` times; the
medians are compared (wall time, process start included for both).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.xen.capture import read_xentrace
from irqlab.xen.index import HAS_TSC, index_records
from irqlab.xen.xenalyze import find_xenalyze

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "xen" / \
    "dom0-cpu.xentrace.xz"
FIXTURE_HZ = 2_596_146_000      # the fixture's tsc_hz (tests/fixtures/xen/README.md)


def tile_capture(data: bytes, copies: int) -> tuple[bytes, int]:
    """``copies`` of a xentrace file end to end, cycle counts shifted; (bytes, records)."""
    idx = index_records(data)
    own = np.flatnonzero(idx.flags & HAS_TSC)
    span = int(idx.tsc[own].max() - idx.tsc[own].min()) + 1
    base = bytearray(data)
    lo_at = (idx.off[own] + 4) // 4
    words = np.frombuffer(base, dtype="<u4").copy()
    tsc = idx.tsc[own].astype(np.uint64)
    out = bytearray()
    for k in range(copies):
        shifted = tsc + np.uint64(k * span)
        words[lo_at] = (shifted & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        words[lo_at + 1] = (shifted >> np.uint64(32)).astype(np.uint32)
        out += words.tobytes()[:len(data) - len(data) % 4] + bytes(data[len(data) -
                                                                        len(data) % 4:])
    return bytes(out), len(idx) * copies


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
            proc = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "xentrace",
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
    return [figure]
