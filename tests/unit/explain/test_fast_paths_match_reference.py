"""The vectorised decode, field extraction and timeline set-up give exactly what the
previous implementation gave (frozen in reference_*_v1.py), element by element and dtype
by dtype, on real captures: the stored fixture, the same pages repeated with shifted
stamps (as ``irqlab bench trace`` synthesises its large input), and a fresh capture of
this kernel (root only).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from irqlab.explain import timeline as new_tl
from irqlab.explain.load import Trace, tables_from_events
from irqlab.trace.archive import read_archive
from irqlab.trace.formats import parse_format, parse_header_page
from irqlab.trace.ringbuf import decode
from irqlab.trace.tracefs import Instance

from . import reference_ringbuf_v1 as old_rb
from . import reference_timeline_v1 as old_tl

DATA = Path(__file__).parent / "data"
CAPTURES = sorted(DATA.glob("*.irqtrace.gz"))


def _same(a: np.ndarray, b: np.ndarray, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} != {b.dtype}"
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    assert np.array_equal(a, b), f"{what}: first difference at " \
        f"{np.flatnonzero(a.ravel() != b.ravel())[:5].tolist()}"


def _repeat(per_cpu: dict[int, bytes], psz: int, copies: int) -> dict[int, bytes]:
    """The pages ``copies`` times, page stamps shifted by the capture's span per copy."""
    out = {}
    for cpu, blob in per_cpu.items():
        pages = np.frombuffer(blob, np.uint8).reshape(-1, psz)
        stamps = pages[:, :8].copy().view("<u8").ravel()
        span = np.uint64(int(stamps.max() - stamps.min()) + 1_000_000)
        big = np.tile(pages, (copies, 1))
        ts = np.tile(stamps, copies) + np.repeat(np.arange(copies, dtype=np.uint64) * span,
                                                 len(pages))
        big[:, :8] = ts.view(np.uint8).reshape(-1, 8)
        out[cpu] = big.tobytes()
    return out


def _compare(header: dict, per_cpu: dict[int, bytes]) -> int:
    """Old and new paths on the same pages; returns the number of inferred switches."""
    hdr = parse_header_page(header["header_page"])
    fmts = {k: parse_format(v, k.split(":")[0]) for k, v in header["formats"].items()}
    ev_new, ev_old = decode(per_cpu, hdr), old_rb.decode(per_cpu, hdr)
    for k in ("ts", "cpu", "etype", "off"):
        _same(getattr(ev_old, k), getattr(ev_new, k), f"events.{k}")
    assert ev_old.missed == ev_new.missed and ev_old.pages == ev_new.pages
    t_new, t_old = tables_from_events(ev_new, fmts), old_rb.tables_from_events(ev_old, fmts)
    assert list(t_old) == list(t_new)
    for name in t_old:
        assert list(t_old[name].cols) == list(t_new[name].cols), name
        for col in t_old[name].cols:
            _same(t_old[name][col], t_new[name][col], f"{name}.{col}")
    tr = Trace(header, t_new, fmts, ev_new.missed, len(ev_new), ev_new.pages)

    s_old, s_new = old_tl.complete_switches(tr), new_tl.complete_switches(tr)
    assert list(s_old.cols) == list(s_new.cols)
    for col in s_old.cols:
        _same(s_old[col], s_new[col], f"switches.{col}")

    # Timelines of the VMM threads and of the busiest tasks (most switches in).
    nxt = np.asarray(t_new["sched_switch"]["next_pid"]) if "sched_switch" in t_new else []
    pids, counts = np.unique(nxt, return_counts=True)
    tids = sorted({int(t) for t in header.get("vmm_threads", {})}
                  | set(pids[np.argsort(-counts)[:5]].tolist()))
    end = int(s_new["ts"][-1]) + 1 if len(s_new) else 0
    th_old = old_tl.thread_timelines(tr, tids, end, s_old)
    th_new = new_tl.thread_timelines(tr, tids, end, s_new)
    assert list(th_old) == list(th_new)
    for tid in th_old:
        for k in ("starts", "ends", "states", "cpus", "wakers", "ends_max"):
            _same(getattr(th_old[tid], k), getattr(th_new[tid], k), f"thread {tid}.{k}")

    for kind, old, new in zip(("hard", "soft"), old_tl.irq_intervals(tr),
                              new_tl.irq_intervals(tr)):
        assert sorted(old) == sorted(new), kind
        for c in old:
            for k in ("start", "end", "label"):
                _same(getattr(old[c], k), getattr(new[c], k), f"{kind} irq cpu {c}.{k}")
    return int(np.sum(s_new["inferred"])) if "inferred" in s_new.cols else 0


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_stored_capture_matches_reference(path):
    header, per_cpu = read_archive(path)
    assert _compare(header, per_cpu) > 0          # the fixture's point: inferred switches


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_repeated_pages_match_reference(path):
    # Many pages per vectorised pass, stamps far apart: the bench's synthesised input.
    header, per_cpu = read_archive(path)
    psz = parse_header_page(header["header_page"]).page_size
    assert _compare(header, _repeat(per_cpu, psz, 300)) > 0


def test_fresh_capture_of_this_kernel_matches_reference(tracefs, page_header):
    """Every event of the bench plus irq_vectors, a second of real activity on all CPUs
    (on this host most idle exits are not recorded: thousands of inferred switches)."""
    inst = Instance(tracefs, f"irqlab-test-ref-{os.getpid()}")
    formats = {}
    try:
        inst.write("buffer_size_kb", "8192")
        for ev in ("sched/sched_switch", "sched/sched_waking", "sched/sched_wakeup", "irq",
                   "irq_vectors", "timer"):
            if (inst.path / "events" / ev / "enable").exists():
                inst.write(f"events/{ev}/enable", "1")
        for system in ("sched", "irq", "irq_vectors", "timer"):
            for name in inst.events_of(system):
                formats[f"{system}:{name}"] = inst.read(f"events/{system}/{name}/format")
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            time.sleep(0.0005)
            os.listdir("/proc")
        inst.write("tracing_on", "0")
        per_cpu = {}
        for cpu in range(inst.cpu_count()):
            fd = os.open(inst.path / f"per_cpu/cpu{cpu}/trace_pipe_raw",
                         os.O_RDONLY | os.O_NONBLOCK)
            chunks = []
            try:
                while True:
                    try:
                        page = os.read(fd, page_header.page_size)
                    except BlockingIOError:
                        break
                    if not page:
                        break
                    chunks.append(page)
            finally:
                os.close(fd)
            per_cpu[cpu] = b"".join(chunks)
    finally:
        assert inst.close() == []
    hp = (f"\tfield: u64 timestamp;\toffset:{page_header.ts_offset};\tsize:8;\tsigned:0;\n"
          f"\tfield: local_t commit;\toffset:{page_header.commit_offset};"
          f"\tsize:{page_header.commit_size};\tsigned:1;\n"
          f"\tfield: char data;\toffset:{page_header.data_offset};"
          f"\tsize:{page_header.data_size};\tsigned:0;\n")
    _compare({"header_page": hp, "formats": formats, "cpus": sorted(per_cpu)}, per_cpu)
