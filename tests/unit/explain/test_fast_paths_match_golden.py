"""The vectorised decode / tables / switch repair / timelines / IRQ intervals give exactly
what the first (straightforward) implementation gave on the stored real captures, element by
element and dtype by dtype. The expected arrays (data/*.expected.npz) were written by that
implementation before it was replaced; data/README.md says how.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from irqlab.explain import timeline
from irqlab import native
from irqlab.explain.load import Trace, decode_trace, tables_from_events
from irqlab.trace import ringbuf
from irqlab.trace.archive import read_archive
from irqlab.trace.formats import parse_format, parse_header_page

DATA = Path(__file__).parent / "data"
GOLDEN = sorted(DATA.glob("*.expected.npz"))


def repeat_pages(per_cpu: dict[int, bytes], page_size: int, copies: int) -> dict[int, bytes]:
    """The pages ``copies`` times, page stamps shifted by the capture's span per copy (many
    pages per vectorised pass, stamps far apart: the benchmark's synthesised input)."""
    out = {}
    for cpu, blob in per_cpu.items():
        pages = np.frombuffer(blob, np.uint8).reshape(-1, page_size)
        stamps = pages[:, :8].copy().view("<u8").ravel()
        span = np.uint64(int(stamps.max() - stamps.min()) + 1_000_000)
        big = np.tile(pages, (copies, 1))
        ts = np.tile(stamps, copies) + np.repeat(np.arange(copies, dtype=np.uint64) * span,
                                                 len(pages))
        big[:, :8] = ts.view(np.uint8).reshape(-1, 8)
        out[cpu] = big.tobytes()
    return out


def outputs(header: dict, per_cpu: dict[int, bytes], rb=ringbuf, tables=None,
            tl=timeline) -> dict[str, np.ndarray]:
    """Every array the attribution path produces, by name (implementations pluggable;
    ``tables`` None: explain's own path, pages straight into tables)."""
    hdr = parse_header_page(header["header_page"])
    fmts = {k: parse_format(v, k.split(":")[0]) for k, v in header["formats"].items()}
    ev = rb.decode(per_cpu, hdr)
    out = {f"events.{k}": np.asarray(getattr(ev, k)) for k in ("ts", "cpu", "etype", "off")}
    out["events.missed"] = np.asarray(ev.missed, dtype=np.int64).reshape(-1, 3)
    out["events.pages"] = np.asarray(ev.pages)
    tabs = tables(ev, fmts) if tables is not None else \
        decode_trace(header, per_cpu, fmts, hdr).tables
    for name, table in tabs.items():
        for col in table.cols:
            out[f"table.{name}.{col}"] = np.asarray(table[col])
    tr = Trace(header, tabs, fmts, ev.missed, len(ev), ev.pages)
    s = tl.complete_switches(tr)
    for col in s.cols:
        out[f"switches.{col}"] = np.asarray(s[col])
    nxt = np.asarray(tabs["sched_switch"]["next_pid"]) if "sched_switch" in tabs else []
    pids, counts = np.unique(nxt, return_counts=True)
    tids = sorted({int(t) for t in header.get("vmm_threads", {})}
                  | set(pids[np.argsort(-counts)[:5]].tolist()))
    end = int(s["ts"][-1]) + 1 if len(s) else 0
    for tid, th in tl.thread_timelines(tr, tids, end, s).items():
        for k in ("starts", "ends", "states", "cpus", "wakers", "ends_max"):
            out[f"thread.{tid}.{k}"] = np.asarray(getattr(th, k))
    for kind, per in zip(("hard", "soft"), tl.irq_intervals(tr)):
        for c, iv in per.items():
            for k in ("start", "end", "label"):
                out[f"irq.{kind}.{c}.{k}"] = np.asarray(getattr(iv, k))
    return out


def storable(out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Object arrays (strings) as unicode arrays plus their dtype, so no pickle is needed."""
    res = {}
    for k, v in out.items():
        res[f"dtype.{k}"] = np.asarray(str(v.dtype))
        res[k] = v.astype(str) if v.dtype == object else v
    return res


@pytest.fixture(params=["C", "numpy"])
def fast_path(request):
    """Each test once with the C fast paths (irqlab/native) and once with numpy only."""
    if request.param == "C":
        assert native.lib() is not None, native.why_not()
        yield "C"
        return
    native.set_enabled(False)
    try:
        yield "numpy"
    finally:
        native.set_enabled(True)


@pytest.mark.parametrize("golden", GOLDEN, ids=[p.name for p in GOLDEN])
@pytest.mark.parametrize("tables", [None, tables_from_events], ids=["decode_tables",
                                                                    "tables_from_events"])
def test_outputs_match_the_first_implementation(golden, tables, fast_path):
    stem, copies = golden.name.split(".x")[0], int(golden.name.split(".x")[1].split(".")[0])
    header, per_cpu = read_archive(DATA / f"{stem}.irqtrace.gz")
    if copies > 1:
        page_size = parse_header_page(header["header_page"]).page_size
        per_cpu = repeat_pages(per_cpu, page_size, copies)
    got = storable(outputs(header, per_cpu, tables=tables))
    with np.load(golden, allow_pickle=False) as want:
        assert sorted(got) == sorted(want.files)
        for key in want.files:
            a, b = want[key], got[key]
            assert a.dtype == b.dtype and a.shape == b.shape, key
            assert np.array_equal(a, b), \
                f"{key}: first difference at {np.flatnonzero(a.ravel() != b.ravel())[:5]}"
        # The captures' point: switches the kernel never recorded, put back by inference.
        assert want["switches.inferred"].sum() > 0
