"""A stored capture as text: one ftrace-like line per event (for grep and KernelShark
users without trace-cmd). Field values are decoded with the capture's own formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from irqlab.explain.load import Trace


def write_text(trace: Trace, path: Path) -> int:
    rows = []
    for name, tb in trace.tables.items():
        keys = [k for k in tb.cols if k not in ("ts", "cpu", "common_pid")]
        cols = [tb[k].tolist() for k in keys]
        for i, (ts, cpu, pid) in enumerate(zip(tb["ts"].tolist(), tb["cpu"].tolist(),
                                               tb["common_pid"].tolist())):
            vals = " ".join(f"{k}={_fmt(c[i])}" for k, c in zip(keys, cols))
            rows.append((ts, f"{pid:>7} [{cpu:03d}] {ts}: {name}: {vals}"))
    rows.sort(key=lambda r: r[0])
    with open(path, "w") as f:
        f.write(f"# irqlab capture, clock {trace.header.get('clock')}, "
                f"{len(rows)} events\n")
        for _, line in rows:
            f.write(line + "\n")
    return len(rows)


def _fmt(v) -> str:
    if isinstance(v, bytes):
        return v.split(b"\0", 1)[0].decode("utf-8", "replace")
    if isinstance(v, (int, np.integer)) and abs(int(v)) > 0xFFFFFFFF:
        return hex(int(v))
    return str(v)
