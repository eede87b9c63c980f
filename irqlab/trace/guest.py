"""``irqlab run --target linux-guest --trace``: the guest kernel's own ftrace beside the
host capture (issue 29).

The host gives the guest a second ivshmem-plain device at PCI slot 0x10 (``TRACE_SLOT``)
backed by a file in a journalled scratch directory. irqlab-init sees it and runs
``/irqlab-gtrace`` (probes/native/gtrace.c) before the probe: it enables the guest's
sched, irq, softirq, timer, irq_vectors (and preemptirq, where the kernel has them)
events on the guest's CLOCK_MONOTONIC — the clock the probe's samples are read on — and
copies every ring page into that memory every 50 ms. After the run the host reads the
region (``read_region``) and writes it as an ordinary capture archive
(irqlab.trace.archive, ``clock`` "mono", ``layer`` "guest") next to the host capture:
``run-N.guest.irqtrace.gz``. The guest also reads its clock and its counter (x86: the
TSC; arm64: CNTVCT_EL0, whose rate the region's version 2 gives as ``counter_hz``) back
to back at start and at each drain (``guest_anchors``); :class:`LinuxGuestTraceHook`
keeps them, the first and last host-side KVM debugfs reads, and the host capture's own
guest->host anchors, so explain can bound the guest->host mapping. The host capture is
on x86-tsc for an x86 guest, on mono for an arm64 one (irqlab.runner.linux_arch says
why).
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from typing import Any

from irqlab.runner.scratch import ScratchDir
from irqlab.trace.archive import spool_chunk, trace_dir_for, write_archive
from irqlab.trace.capture import TraceHook

TRACE_SLOT = 0x10                   # PCI 00:10.0; probes/native/init.c GTRACE_SLOT
REGION_BYTES = 64 << 20             # ivshmem BARs are a power of two
MAGIC = b"IRQGTR01"
HEADER_BYTES = 4096
STATES = {0: "not started", 1: "recording", 2: "done", 3: "error"}
_HEAD = struct.Struct("<8sIIQQIIQ200s")
_ANCHORS = struct.Struct("<II4Q")
_V2 = struct.Struct("<3Q")   # at 256 + _ANCHORS.size, version >= 2: counter_hz, gap_ns[2]
_REC = struct.Struct("<IIII")


def guest_trace_file_for(db_path: Path, run_id: int) -> Path:
    """Where a Linux guest run's guest-side capture lives, beside the host capture."""
    return trace_dir_for(db_path) / f"run-{run_id}.guest.irqtrace.gz"


def read_region(raw: bytes) -> tuple[dict[str, Any], list[tuple[int, bytes]]]:
    """(facts, [(cpu, page), ...]) of a guest trace region; ValueError when it holds
    none. Facts: state, error, dropped_pages, ncpus, the shipped tracefs files
    (``files``: name -> text) and the guest's clock anchors."""
    facts = region_facts(raw)
    end = HEADER_BYTES + min(facts["committed_bytes"], len(raw) - HEADER_BYTES)
    pages, _next = region_records(raw, HEADER_BYTES, end, facts["files"])
    return facts, pages


def region_facts(raw: bytes) -> dict[str, Any]:
    """The facts of a region's header (its first HEADER_BYTES; read_region), with no
    files yet; ValueError when it holds no trace."""
    if len(raw) < HEADER_BYTES or raw[:8] != MAGIC:
        raise ValueError("the guest wrote no trace (irqlab-gtrace did not start)")
    (_m, version, state, committed, dropped, ncpus, page_bytes, _size,
     error) = _HEAD.unpack_from(raw, 0)
    n_anchors, _pad, m0, t0, m1, t1 = _ANCHORS.unpack_from(raw, 256)
    counter_hz, g0, g1 = _V2.unpack_from(raw, 256 + _ANCHORS.size) if version >= 2 \
        else (0, None, None)
    return {
        "version": version, "state": STATES.get(state, str(state)),
        "error": error.split(b"\0", 1)[0].decode("utf-8", "replace") or None,
        "dropped_pages": dropped, "ncpus": ncpus, "page_bytes": page_bytes,
        "committed_bytes": committed, "counter_hz": counter_hz,
        "guest_anchors": [{"mono_ns": m, "tsc": t, **({"gap_ns": g} if g is not None
                                                       else {})}
                          for m, t, g in ((m0, t0, g0), (m1, t1, g1))]
        if n_anchors == 2 else [],
        "files": {}}


def region_records(raw: bytes, at: int, end: int, files: dict[str, str]
                   ) -> tuple[list[tuple[int, bytes]], int]:
    """The pages ([(cpu, page)]) of the whole records in ``raw[at:end]`` and where the
    next record starts; the shipped files among them go into ``files``."""
    pages: list[tuple[int, bytes]] = []
    while at + _REC.size <= end:
        kind, cpu, n, name_len = _REC.unpack_from(raw, at)
        body = at + _REC.size
        if body + name_len + n > end:
            break
        name = raw[body:body + name_len].decode("utf-8", "replace")
        data = raw[body + name_len:body + name_len + n]
        if kind == 1:
            files[name] = data.decode("utf-8", "replace")
        elif kind == 2:
            pages.append((cpu, data))
        at += (_REC.size + name_len + n + 7) & ~7
    return pages, at


def archive_header(facts: dict[str, Any], run_id: int) -> dict[str, Any]:
    """The capture header (irqlab.trace.archive) of a guest-side capture."""
    files = facts["files"]
    formats = {}
    for name, text in files.items():
        parts = name.split("/")
        if len(parts) == 4 and parts[0] == "events" and parts[3] == "format":
            formats[f"{parts[1]}:{parts[2]}"] = text
    enabled = [e.replace("/", ":") for e in files.get("enabled", "").split()]
    return {"version": 1, "run_id": run_id, "clock": "mono", "layer": "guest",
            "header_page": files.get("header_page", ""),
            "header_event": files.get("header_event", ""), "formats": formats,
            "cpus": list(range(facts["ncpus"])), "stats": {}, "vmm_pid": None,
            "vmm_threads": {}, "vcpu_tids": [], "anchors": [],
            "enabled": enabled,
            "missing": [e.replace("/", ":") for e in files.get("missing", "").split()],
            "kernel": files.get("kernel", "").strip(),
            "tracers": files.get("available_tracers", "").split(),
            "guest_anchors": facts["guest_anchors"],
            "guest_counter_hz": facts["counter_hz"],
            "dropped_pages": facts["dropped_pages"]}


def region_qemu_args(path: Path, obj_id: str, slot: int | None = None,
                     size: int = REGION_BYTES) -> list[str]:
    """QEMU's options for a trace region: ``path`` as an ivshmem-plain BAR (a file QEMU
    maps shared, not a memfd: a hook cannot hand QEMU an fd), at PCI ``slot`` if given."""
    addr = f",addr={slot:#x}" if slot is not None else ""
    return ["-object", f"memory-backend-file,id={obj_id},size={size},"
                       f"mem-path={path},share=on",
            "-device", f"ivshmem-plain,memdev={obj_id}{addr}"]


def keep_region(region: Path, dest: Path, run_id: int,
                header: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read a region gtrace wrote and store it as a capture archive at ``dest``
    (``header``: keys added to the archive's header); what to record about it.
    ValueError when the region holds no trace, OSError when it cannot be read."""
    facts, pages = read_region(region.read_bytes())
    head = archive_header(facts, run_id) | (header or {})
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=dest.parent) as spool:
        for cpu, page in pages:
            spool_chunk(spool, cpu, page)
        size = write_archive(dest, head, spool)
    out = {"status": "ok" if facts["state"] in ("recording", "done") else "error",
           "state": facts["state"], "file": str(dest), "bytes": size,
           "pages": len(pages), "dropped_pages": facts["dropped_pages"],
           "clock": "mono", "guest_anchors": facts["guest_anchors"],
           "guest_counter_hz": facts["counter_hz"],
           "enabled": head["enabled"], "missing": head["missing"],
           "tracers": head["tracers"]}
    if facts["error"]:
        out["error"] = facts["error"]
    return out


class LinuxGuestTraceHook(TraceHook):
    """The host capture around QEMU (TraceHook, kind "linux-guest") plus the guest's
    own, shipped through a second ivshmem device (see the module docstring)."""

    def __init__(self, db_path: Path, period_ns: int = 1_000_000,
                 clock: str | None = None) -> None:
        """``clock``: the host capture's trace clock (None: x86-tsc)."""
        super().__init__(db_path, period_ns, clock=clock, kind="linux-guest")
        self._scratch: ScratchDir | None = None
        self._region: Path | None = None
        self.meta["guest"] = {"status": "not started"}
        self._live_files: dict[str, str] | None = None   # LiveCapture: files shipped
        self._live_at = HEADER_BYTES                      # and where reading goes on

    def _make_region(self) -> Path:
        if self._region is None:
            self._scratch = ScratchDir("irqlab-gtrace-")
            self._region = Path(self._scratch.name) / "region"
            with open(self._region, "wb") as f:
                f.truncate(REGION_BYTES)          # sparse: only written pages take room
        return self._region

    def qemu_args(self) -> list[str]:
        return region_qemu_args(self._make_region(), "irqlab-gtrace", TRACE_SLOT)

    # -- LiveCapture: the guest's capture, the one on the samples' clock ------------------
    def keep_live(self) -> bool:
        if self._live_files is None:
            self._live_files, self._live_at = {}, HEADER_BYTES
        return True

    def live_pages(self) -> tuple[dict[str, Any], list[tuple[int, bytes]]] | None:
        """The guest's pages gtrace has shipped since the last call (it copies its ring
        every 50 ms: the newest samples' events may not be there yet), read from the
        region as QEMU maps it, with their header; None until gtrace has started."""
        if self._live_files is None or self._region is None:
            return None
        try:
            with open(self._region, "rb") as f:
                facts = region_facts(f.read(HEADER_BYTES))
                end = HEADER_BYTES + facts["committed_bytes"]
                f.seek(self._live_at)
                raw = f.read(max(0, end - self._live_at))
        except (OSError, ValueError):
            return None
        pages, used = region_records(raw, 0, len(raw), self._live_files)
        self._live_at += used
        facts["files"] = self._live_files
        return archive_header(facts, getattr(self, "run_id", 0)), pages

    def _finish(self) -> None:
        super()._finish()
        self._keep_guest()

    def _keep_guest(self) -> None:
        """Read the region (QEMU has exited) and store it as the guest-side capture."""
        g = self.meta["guest"]
        if self._region is None or not hasattr(self, "run_id"):
            return
        try:
            g.update(keep_region(self._region, guest_trace_file_for(self.db_path,
                                                                    self.run_id),
                                 self.run_id))
        except (OSError, ValueError) as exc:
            g.update({"status": "none", "why": str(exc)})
            self.meta["problems"].append(f"guest trace: {exc}")
            return
        if g.get("error"):
            self.meta["problems"].append(f"guest trace: {g['error']}")

    def _teardown(self) -> None:
        super()._teardown()
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
