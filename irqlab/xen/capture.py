"""``irqlab run --target xen --xen-dom0 linux --trace``: xentrace recorded in dom0 with
the run, kept beside it like host captures (docs/formats.md §9a).

dom0's init starts ``xentrace -D -e MASK -S PAGES -s POLL`` before it creates the probe
domU (irqlab.runner.xen_dom0: the Xen target finds this hook by its InDom0Trace
interface); its stdout goes through a fifo into ``trcfwd`` (probes/xen-dom0/trcfwd.c),
which copies the bytes into a byte ring in the BAR of a second ivshmem-plain device, a
host memfd. This hook maps that memfd (ctx.process implements Dom0TraceChannel) and a
thread drains the ring into a spool file every 50 ms, advancing the ring's tail; at the
end the spool becomes ``<db>.traces/run-<id>.xentrace.gz``.

Why not Xen's console: every byte there is a console_io hypercall and a UART write under
Xen's console lock, which is the interference seed 000 measured (~1 ms mean with dom0
writing to it). Why not virtio-serial: dom0 would need the virtio PCI and console drivers
and each write traps to QEMU; the ivshmem ring costs dom0 a memcpy and the host a read,
and reuses the path the probe's samples already take.

Nothing is lost silently: the ring is lossless (trcfwd waits for room, counted as
``stalls``), so what cannot be kept is dropped by Xen itself when its per-CPU buffers are
full, and Xen says so in TRC_LOST_RECORDS records, which are counted here. The capture
ends when QEMU stops: records still in Xen's buffers then (at most about one poll
interval, dom0 stops xentrace only after ringfwd has forwarded the last sample, and the
host stops QEMU once it has that sample) are not in the file; ``complete`` says whether
dom0 finished the stream.
"""

from __future__ import annotations

import gzip
import io
import json
import lzma
import mmap
import os
import struct
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.runner.xen_dom0 import Dom0Trace, Dom0TraceChannel, InDom0Trace
from irqlab.trace.archive import XENTRACE_MAGIC, write_archive, xentrace_file_for
from irqlab.trace.hook import CaptureHook
from irqlab.xen.index import index_records
from irqlab.xen.records import (TRC_DOM0OP, TRC_GEN, TRC_HVM, TRC_HW, TRC_LOST_RECORDS,
                                TRC_MEM, TRC_PV, TRC_SCHED, TRC_TRACE_CPU_CHANGE,
                                TraceFormatError)

# The classes attribution needs (xen/include/public/trace.h): runstates and scheduler
# decisions (SCHED), domain creation/destruction (DOM0OP), HVM/PVH exits and injected
# interrupts (HVM: the probe domU is PVH), memory operations (MEM), dom0's PV hypercalls
# with their arguments, i.e. sub-ops (PV), physical IRQs and power management (HW).
# Subclass bits 12-15 are all set: Xen matches class and subclass separately (trace.c).
EVT_MASK = TRC_GEN | TRC_SCHED | TRC_DOM0OP | TRC_HVM | TRC_MEM | TRC_PV | TRC_HW
BUFFER_PAGES = 256          # per pCPU (1 MiB): Xen keeps it until reboot
POLL_MS = 50                # xentrace's poll when Xen does not signal half-full first
READ_INTERVAL_S = 0.05

# The channel's header (probes/xen-dom0/trcfwd.c)
CHANNEL_MAGIC = int.from_bytes(b"IRQLXTR1", "little")
HDR_SIZE = 4096
OFF_CAPACITY, OFF_HEAD, OFF_TAIL, OFF_STATE, OFF_STALLS = 8, 16, 24, 32, 40
CHANNEL_STATES = {0: "running", 1: "done", 2: "error"}


class XentraceHook(InDom0Trace, CaptureHook):
    """RunHook: xentrace in dom0, forwarded through ivshmem (see the module doc)."""

    name = "xentrace"
    requires = "xen-dom0"

    def __init__(self, db_path: Path, evt_mask: int = EVT_MASK,
                 buffer_pages: int = BUFFER_PAGES, poll_ms: int = POLL_MS) -> None:
        self.db_path = Path(db_path)
        self.spec = Dom0Trace(evt_mask, buffer_pages, poll_ms)
        self.meta: dict[str, Any] = {"evt_mask": f"{evt_mask:#x}",
                                     "buffer_pages": buffer_pages, "poll_ms": poll_ms,
                                     "channel": "ivshmem-plain (trcfwd)", "problems": [],
                                     # which explainer reads it (irqlab.explain.registry)
                                     "kind": "xentrace"}
        self._map: mmap.mmap | None = None
        self._spool = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._process: Dom0TraceChannel | None = None
        self._bytes = 0
        self.run_id: int | None = None

    # -- InDom0Trace ------------------------------------------------------------------
    def dom0_trace(self) -> Dom0Trace:
        return self.spec

    # -- RunHook ------------------------------------------------------------------------
    def qemu_args(self) -> list[str]:
        return []

    def before_start(self) -> None:
        d = xentrace_file_for(self.db_path, 0).parent
        d.mkdir(parents=True, exist_ok=True)
        self._spool = tempfile.TemporaryFile(dir=str(d))

    def after_start(self, ctx: Any) -> None:
        """Map the channel (the memfd outlives QEMU in our mapping) and start draining."""
        self.run_id = ctx.run_id
        process = ctx.process
        if not isinstance(process, Dom0TraceChannel):
            raise OSError("--trace with a Xen dom0: the target's process has no xentrace "
                          "channel")
        self._process = process
        fd = os.open(process.trace_mem_path, os.O_RDWR)
        try:
            self._map = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
        self._thread = threading.Thread(target=self._reader, daemon=True,
                                        name="irqlab-xentrace-reader")
        self._thread.start()

    # -- the channel --------------------------------------------------------------------
    def _u64(self, off: int) -> int:
        return struct.unpack_from("<Q", self._map, off)[0]

    def _drain(self) -> int:
        """Copy the ring's new bytes to the spool and give the room back."""
        with self._lock:
            m = self._map
            if m is None or self._u64(0) != CHANNEL_MAGIC:
                return 0
            cap, head, tail = self._u64(OFF_CAPACITY), self._u64(OFF_HEAD), self._u64(OFF_TAIL)
            got = head - tail
            if not cap or got <= 0:
                return 0
            start = tail % cap
            first = min(got, cap - start)
            self._spool.write(m[HDR_SIZE + start:HDR_SIZE + start + first])
            if got > first:
                self._spool.write(m[HDR_SIZE:HDR_SIZE + got - first])
            struct.pack_into("<Q", m, OFF_TAIL, head)
            self._bytes += got
            return got

    def _reader(self) -> None:
        while not self._stop.wait(READ_INTERVAL_S):
            try:
                self._drain()
            except (OSError, ValueError) as exc:
                self.meta["problems"].append(f"reader: {exc}")
                return

    def _finish(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._map is None or self._spool is None:
            self.meta["problems"].append("no capture: the run stopped before the probe ran")
            return
        self._drain()
        m = self._map
        seen = self._u64(0) == CHANNEL_MAGIC
        state = struct.unpack_from("<I", m, OFF_STATE)[0] if seen else None
        self.meta.update({
            "channel_seen": seen, "bytes_raw": self._bytes,
            "channel_state": CHANNEL_STATES.get(state, state) if seen else None,
            "stalls": self._u64(OFF_STALLS) if seen else None,
            "complete": state == 1,
        })
        hz = self._process.trace_clock_hz() if self._process is not None else None
        self._spool.seek(0)
        data = self._spool.read()
        facts = capture_facts(data)
        self.meta.update(facts)
        self.meta["tsc_hz"] = hz
        header = {"version": 1, "run_id": self.run_id, "tsc_hz": hz,
                  "evt_mask": self.spec.evt_mask, "buffer_pages": self.spec.buffer_pages,
                  "poll_ms": self.spec.poll_ms, "channel": self.meta["channel"],
                  "complete": self.meta["complete"], "stalls": self.meta["stalls"],
                  **facts}
        path = xentrace_file_for(self.db_path, self.run_id or 0)
        self.meta["file"] = str(path)
        self.meta["bytes"] = write_archive(path, header, self._spool, XENTRACE_MAGIC)

    def _teardown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        with self._lock:
            if self._map is not None:
                self._map.close()
                self._map = None
        if self._spool is not None:
            self._spool.close()
            self._spool = None


def capture_facts(data: bytes) -> dict[str, Any]:
    """Records, lost records (Xen's TRC_LOST_RECORDS counts), CPUs and cycle span."""
    idx = index_records(data)
    lost_rows = np.flatnonzero((idx.event == TRC_LOST_RECORDS) & (idx.nextra >= 1))
    timed = idx.tsc[idx.timed]
    return {"records": int(len(idx)), "bytes_xentrace": len(data),
            "truncated_bytes": len(data) - idx.end,
            "lost_records": int(idx.extra(lost_rows, 0).sum()) if len(lost_rows) else 0,
            "lost_events": int(len(lost_rows)),
            "cpus": sorted(set(idx.cpu.tolist())),
            "first_tsc": int(timed.min()) if len(timed) else None,
            "last_tsc": int(timed.max()) if len(timed) else None}


def read_xentrace(path: str | Path, mapped: bool = False
                  ) -> tuple[dict[str, Any] | None, bytes | mmap.mmap]:
    """(header, xentrace bytes) of a run's capture, or (None, bytes) of a plain xentrace
    file as xentrace writes it (as is, gzipped or xz-compressed). ``mapped``: a plain
    uncompressed file is memory-mapped read-only instead of read (no copy of a file of
    hundreds of MB; the map is a buffer like bytes for numpy and slicing)."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(len(XENTRACE_MAGIC))
        if mapped and head[:2] != b"\x1f\x8b" and head[:6] != b"\xfd7zXZ\x00" \
                and head != XENTRACE_MAGIC and path.stat().st_size > 0:
            return None, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    compressed = head[:2] == b"\x1f\x8b" or head[:6] == b"\xfd7zXZ\x00"
    opener = (gzip.open if head[:2] == b"\x1f\x8b" else
              lzma.open if head[:6] == b"\xfd7zXZ\x00" else open)
    limit = decompressed_limit(path.stat().st_size) if compressed else None
    with opener(path, "rb") as f:
        magic = f.read(len(XENTRACE_MAGIC))
        if magic == XENTRACE_MAGIC:
            (n,) = struct.unpack("<I", f.read(4).ljust(4, b"\0"))
            if n > MAX_HEADER_BYTES:
                raise TraceFormatError(f"its capture header claims {n:,} bytes (at most "
                                       f"{MAX_HEADER_BYTES:,}): a damaged capture")
            header = json.loads(f.read(n))
            if not isinstance(header, dict):
                raise TraceFormatError("its capture header is not a JSON object: a damaged "
                                       "capture")
            return header, _read_bounded(f, limit, len(magic) + 4 + n)
        return None, magic + _read_bounded(f, limit, len(magic))


# A compressed file's bytes are read whole, so a decompression bomb (a few MB that inflate
# to GBs) is stopped at a size relative to the file's. xentrace records hold cycle
# counts and ids that compress poorly: the fixture (tests/fixtures/xen) is 4.1:1 with
# gzip -9 and 6.1:1 with xz -9e, so 32:1 leaves a wide margin; small synthetic files
# may compress far better, hence the floor.
MAX_DECOMPRESSION_RATIO = 32
MIN_DECOMPRESSED_BYTES = 64 << 20
MAX_DECOMPRESSED_BYTES = 4 << 30
MAX_HEADER_BYTES = 1 << 20


class DecompressionLimitError(ValueError):
    """A compressed capture inflates beyond decompressed_limit (a decompression bomb?)."""


def decompressed_limit(compressed_bytes: int) -> int:
    """The most bytes a compressed xentrace file of this size may inflate to."""
    return min(MAX_DECOMPRESSED_BYTES,
               max(MIN_DECOMPRESSED_BYTES, MAX_DECOMPRESSION_RATIO * compressed_bytes))


def _read_bounded(f: Any, limit: int | None, already: int) -> bytes:
    """The rest of ``f``; with ``limit``, at most that many bytes in all (``already``
    read), else DecompressionLimitError."""
    if limit is None:
        return f.read()
    rest = f.read(max(0, limit - already) + 1)
    if already + len(rest) > limit:
        raise DecompressionLimitError(
            f"it inflates to more than {limit:,} bytes, over {MAX_DECOMPRESSION_RATIO} "
            f"times its compressed size (a decompression bomb?); decompress it yourself "
            f"if it is genuine and give the plain file")
    return rest


# Xen's trace classes, the event's bits 16-27 (public/trace.h, TRC_CLS_SHIFT 16): gen,
# sched, dom0op, hvm, mem, pv, shadow, hw, guest.
KNOWN_CLASSES = (0x001, 0x002, 0x004, 0x008, 0x010, 0x020, 0x040, 0x080, 0x800)
MIN_KNOWN_SHARE = 0.9


def check_xentrace_file(src: Path) -> tuple[dict[str, Any] | None, bytes | mmap.mmap,
                                             dict[str, Any]]:
    """(header, data, capture_facts) of a xentrace file; TraceFormatError when it holds
    no xentrace record."""
    header, data = read_xentrace(src, mapped=True)
    # xentrace has no magic number: any bytes decode as some records. What it writes
    # starts with a CPU-change record (each buffer window's header, records.py), and its
    # events belong to Xen's trace classes.
    idx = index_records(data)
    known = np.isin((idx.event >> 16) & 0xFFF, KNOWN_CLASSES) if len(idx) else idx.event
    if not len(idx) or idx.event[0] != TRC_TRACE_CPU_CHANGE or \
            known.mean() < MIN_KNOWN_SHARE:
        raise TraceFormatError(f"{src} is not a xentrace file (it should start with "
                               f"xentrace's CPU-change record and hold Xen's trace events;"
                               f" write it with `xentrace -D -e all FILE` in dom0)")
    return header, data, capture_facts(data)


def import_xentrace(src: Path, db_path: Path, run_id: int, tsc_hz: int) -> dict[str, Any]:
    """Keep a board's xentrace file (as xentrace wrote it: plain, gzip or xz; or an
    irqlab capture) as run ``run_id``'s capture, beside the store like a live run's, and
    return what the run's metadata says of it (``hooks.xentrace``). ``tsc_hz``: the
    records' clock rate (Xen on Arm stamps them with the generic timer's counter, the
    probe's tick rate). TraceFormatError when the file holds no xentrace record."""
    header, data, facts = check_xentrace_file(src)
    path = xentrace_file_for(db_path, run_id)
    head = {"version": 1, "run_id": run_id, "tsc_hz": tsc_hz, "imported_from": str(src),
            **facts}
    if isinstance(data, mmap.mmap):
        with open(src, "rb") as spool:
            size = write_archive(path, head, spool, XENTRACE_MAGIC)
        data.close()
    else:
        size = write_archive(path, head, io.BytesIO(data), XENTRACE_MAGIC)
    return {"kind": "xentrace", "file": str(path), "bytes": size, "tsc_hz": tsc_hz,
            "imported_from": str(src), "complete": True,
            "from_capture_header": header is not None, **facts}

