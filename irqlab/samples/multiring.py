"""Host-side reader of several v1 rings behind one directory (docs/formats.md section 6).

The native probe writes one ring per CPU thread (one writer each). Each ring is read by
an ordinary RingReader, so loss is counted per ring exactly as for the guest probe. The
batches are then *merged*: the statistics layer needs samples in non-decreasing window
order, and rings advance at slightly different moments, so a record is released only
when no ring can still produce an earlier deadline (a watermark). A ring's next deadline
is at least its last deadline plus the period (deadlines only grow, overruns skip ahead),
and a ring with no sample yet starts at the directory's ``start_ns`` + period; a ring whose
writer publishes its progress (the busy-loop noise probe, whose records come at no
period) holds nothing back below it; a finished ring holds nothing back.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Any

import numpy as np

from irqlab.samples.record import RECORD_DTYPE, SampleBatch
from irqlab.samples.layout import HEADER_SIZE, STATE_NAMES, RingError, RingHeader
from irqlab.samples.ring import RingReader, map_readonly
from irqlab.samples.source import RingPeek, SampleSource

MR_MAGIC = 0x544C554D4C515249      # "IRQLMULT" read as bytes
MR_VERSION = 1
DIR_SIZE = 4096
MAX_RINGS = 512
POLICY_NAMES = {0: "SCHED_OTHER", 1: "SCHED_FIFO"}
FLAG_RT_FALLBACK, FLAG_MLOCKED, FLAG_DMA_LATENCY = 1, 2, 4

_DIR = struct.Struct("<QIIQQIIIIIIQQ")
_CPU_OFFSET = 512
_MESSAGE_OFFSET = 128


def ring_stride(capacity: int) -> int:
    """Bytes between two ring bases (header + records, rounded up to 4 KiB)."""
    return (HEADER_SIZE + capacity * RECORD_DTYPE.itemsize + 4095) & ~4095


def layout_bytes(rings: int, capacity: int) -> int:
    """Bytes the directory and ``rings`` rings of ``capacity`` records take."""
    return DIR_SIZE + rings * ring_stride(capacity)


class MultiRingReader(SampleSource):
    """Reads, loss-counts and merges the rings named by a directory in a shared file."""

    def __init__(self, mem_path: str, offset: int = 0) -> None:
        self._map, size = map_readonly(mem_path, offset + DIR_SIZE,
                                       f"a ring directory at {offset:#x}")
        self._path = mem_path
        self._base = offset
        self._size = size
        self.rings: list[RingReader] = []
        self.cpus: list[int] = []
        self._pending: list[np.ndarray] = []
        self._floor: list[int] = []          # lowest deadline each ring can still write
        self._released_to = 0
        self._release_all = False

    # --- directory -----------------------------------------------------------------

    def _dir(self) -> tuple:
        return _DIR.unpack_from(self._map, self._base)

    def directory(self) -> dict[str, Any]:
        """The directory's fields (what the probe recorded about itself)."""
        (magic, version, count, stride, first, state, error, policy, priority, flags,
         _res, period_ns, start_ns) = self._dir()
        msg = self._map[self._base + _MESSAGE_OFFSET:self._base + _MESSAGE_OFFSET + 256]
        return {"version": version, "rings": count, "ring_stride": stride,
                "first_ring": first, "state": STATE_NAMES.get(state, f"unknown({state})"),
                "error": error, "policy": POLICY_NAMES.get(policy, f"unknown({policy})"),
                "priority": priority, "rt_fallback": bool(flags & FLAG_RT_FALLBACK),
                "mlocked": bool(flags & FLAG_MLOCKED),
                "dma_latency_held": bool(flags & FLAG_DMA_LATENCY),
                "period_ns": period_ns, "start_ns": start_ns, "cpus": list(self.cpus),
                "message": msg.split(b"\0", 1)[0].decode("utf-8", "replace")}

    def _open_rings(self) -> bool:
        """Open a RingReader per ring once the directory is published."""
        if self.rings:
            return True
        magic, version, count, stride, first, *_ = self._dir()
        if magic != MR_MAGIC:
            return False
        if version != MR_VERSION:
            raise RingError(f"ring directory version {version} is not supported (need "
                            f"v{MR_VERSION}): rebuild the probe (make -C probes/native)")
        if not 0 < count <= MAX_RINGS or stride % 4096 or stride < HEADER_SIZE \
                or self._base + first + count * stride > self._size:
            raise RingError(f"ring directory is invalid: {count} rings of stride {stride} "
                            f"at {first} do not fit a {self._size}-byte shared memory")
        cpus = struct.unpack_from(f"<{count}I", self._map, self._base + _CPU_OFFSET)
        start_ns = self._dir()[12]
        period_ns = self._dir()[11]
        self.rings = [RingReader(self._path, self._base + first + i * stride)
                      for i in range(count)]
        self.cpus = list(cpus)
        self._floor = [start_ns + period_ns] * count
        return True

    def magic_ok(self) -> bool:
        """True once the directory and every ring header are published."""
        return self._open_rings() and all(r.magic_ok() for r in self.rings)

    def state(self) -> str:
        """Directory state, but "error" as soon as any ring reports one."""
        dstate = STATE_NAMES.get(self._dir()[5], "unknown")
        if dstate == "error" or any(r.state() == "error" for r in self.rings):
            return "error"
        return dstate

    def header(self) -> RingHeader:
        """Ring 0's header standing for the whole: head and overruns summed over rings,
        state, error and message from the directory or the first failing ring."""
        if not self.magic_ok():
            raise RingError("no irqlab ring directory in the shared memory (bad magic): "
                            "the native probe did not start")
        hdrs = [r.header() for r in self.rings]
        d = self.directory()
        err, msg = d["error"], d["message"]
        for h in hdrs:
            if h.state == "error" and not err:
                err, msg = h.error, h.message
        return replace(hdrs[0], head=sum(h.head for h in hdrs),
                       overruns=sum(h.overruns for h in hdrs), state=self.state(),
                       error=err, message=msg)

    # --- samples -----------------------------------------------------------------

    @property
    def lost(self) -> int:
        return sum(r.lost for r in self.rings)

    def per_ring(self) -> list[dict[str, Any]]:
        """Per ring: cpu, lost, overruns, samples written (head); a busy-loop ring also
        its measured time and the sum of its gaps (busy_tick, noise_tick)."""
        out = []
        for cpu, r in zip(self.cpus, self.rings):
            h = r.header()
            ring = {"cpu": cpu, "lost": r.lost, "overruns": h.overruns,
                    "written": h.head, "state": h.state}
            if h.busy_start_tick:
                ring.update(busy_tick=max(0, h.progress_tick - h.busy_start_tick),
                            noise_tick=h.noise_tick)
            out.append(ring)
        return out

    def finish(self) -> None:
        """The run is over: the next poll releases everything held back."""
        self._release_all = True

    def ring_cpus(self) -> list[int]:
        return list(self.cpus)

    def metadata(self) -> dict[str, Any]:
        """The directory, under the key ``native`` (the native probe writes it, on the
        host or inside a Linux guest)."""
        return {"native": self.directory()} if self._open_rings() else {}

    def notices(self) -> list[str]:
        if self._open_rings() and self.directory()["rt_fallback"]:
            return ["SCHED_FIFO was refused: the probe ran SCHED_OTHER (--rt-fallback); "
                    "these are not real-time figures"]
        return []

    def peek(self) -> RingPeek | None:
        """Ring 0's newest sample (the first measured CPU)."""
        return self.rings[0].peek() if self._open_rings() else None

    def poll(self, max_records: int | None = None) -> SampleBatch:
        """Records of every ring below the watermark, in deadline order (stable sort)."""
        if not self._open_rings():
            return SampleBatch()
        lost = 0
        period = self._dir()[11]
        for i, r in enumerate(self.rings):
            finished = r.state() in ("done", "error")   # read before the records
            progress = r.progress_tick()                 # so is the progress
            batch = r.poll()
            lost += batch.lost
            if len(batch):
                self._pending.append(batch.records)
                self._floor[i] = max(self._floor[i],
                                     int(batch.records["deadline_tick"][-1]) + period)
            self._floor[i] = max(self._floor[i], progress)
            if finished:
                self._floor[i] = 2**64
        if not self._pending:
            return SampleBatch(lost=lost)
        recs = (np.concatenate(self._pending) if len(self._pending) > 1
                else self._pending[0])
        order = np.argsort(recs["deadline_tick"], kind="stable")
        recs = recs[order]
        if self._release_all:
            cut = len(recs)
        else:
            cut = int(np.searchsorted(recs["deadline_tick"], np.uint64(min(self._floor)),
                                      side="left")) if min(self._floor) < 2**64 else len(recs)
        if max_records is not None:
            cut = min(cut, max_records)
        out, rest = recs[:cut], recs[cut:]
        self._pending = [rest] if len(rest) else []
        return SampleBatch(records=out, lost=lost)

    @property
    def held_back(self) -> int:
        """Records read from the rings but not yet released."""
        return sum(len(p) for p in self._pending)

    def close(self) -> None:
        for r in self.rings:
            r.close()
        self._map.close()
