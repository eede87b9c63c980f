"""A stored capture (irqlab.trace.archive) decoded into the columns explain needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from irqlab.trace.archive import read_archive
from irqlab.trace.formats import EventFormat, PageHeader, parse_format, parse_header_page
from irqlab.trace.ringbuf import Coded, Columns, Events, decode_tables

# Fields kept per event (name -> the format fields to read); common_pid is always read.
_KEEP: dict[str, tuple[str, ...]] = {
    "sched_switch": ("prev_comm", "prev_pid", "prev_state", "next_comm", "next_pid"),
    "sched_waking": ("pid", "target_cpu"),
    "sched_wakeup": ("pid", "target_cpu"),
    "irq_handler_entry": ("irq", "name"),
    "irq_handler_exit": ("irq",),
    "softirq_entry": ("vec",),
    "softirq_exit": ("vec",),
    "hrtimer_start": ("hrtimer", "function", "expires"),
    "hrtimer_expire_entry": ("hrtimer", "function"),
    "hrtimer_expire_exit": ("hrtimer",),
    "hrtimer_cancel": ("hrtimer",),
    "kvm_msr": ("write", "ecx", "data"),
    "kvm_eoi": ("apicid", "vector"),
    "kvm_apic_accept_irq": ("apicid", "vec"),
    "kvm_inj_virq": ("vec", "vector"),       # "vector" on 6.x kernels
    "kvm_entry": ("vcpu_id",),
    "kvm_exit": ("esr_ec",),                 # arm64: the exception class of the exit
    "kvm_vcpu_wakeup": (),
    "kvm_userspace_exit": ("reason",),
    "kvm_wait_lapic_expire": ("delta",),
    "kvm_write_tsc_offset": ("previous_tsc_offset", "next_tsc_offset"),
    # arm64 KVM (irqlab.explain.kvm_arm64): the arch timer's and the vGIC's view of an IRQ
    "kvm_timer_update_irq": ("vcpu_id", "irq", "level"),
    "vgic_update_irq_pending": ("vcpu_id", "irq", "level"),
    "kvm_wfx_arm64": ("is_wfe",),
    "kvm_timer_hrtimer_expire": ("timer_idx",),
    "print": ("buf",),
    "signal_generate": ("sig", "pid", "result"),      # irqlab.explain.stops
    # net runs (irqlab.explain.netpath): a packet queued to a device, or received
    "net_dev_queue": ("len", "name"),
    "netif_receive_skb": ("len", "name"),
    "netif_rx": ("len", "name"),
    # noise runs (irqlab.explain.noise): an NMI handler's run, stamped at its end
    "nmi_handler": ("delta_ns",),
}


@dataclass
class Table:
    """Columns of one event type, time ordered: ``ts``, ``cpu``, ``common_pid`` + fields."""

    name: str
    cols: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cols.get("ts", ()))

    def __getitem__(self, key: str) -> np.ndarray:
        return self.cols[key]

    def coded(self, key: str) -> Coded | None:
        """A string column's codes and distinct values, when decoding gave it that way
        and no reader has asked for the strings yet (ringbuf.Columns)."""
        return self.cols.coded(key) if isinstance(self.cols, Columns) else None


@dataclass
class Trace:
    header: dict[str, Any]
    tables: dict[str, Table]
    formats: dict[str, EventFormat]
    missed: list[tuple[int, int, int]]            # (cpu, page ts, count or -1)
    events: int
    pages: int
    decode_seconds: dict[str, float] = field(default_factory=dict)

    def t(self, name: str) -> Table:
        return self.tables.get(name) or Table(name, {"ts": np.empty(0, np.uint64)})

    def fired(self) -> set[str]:
        return {n for n, t in self.tables.items() if len(t)}


def wanted_fields(formats: dict[str, EventFormat]) -> list[tuple[EventFormat, list[str]]]:
    """The event types explain reads and, for each, the fields it keeps."""
    out = []
    for key, fmt in formats.items():
        name = key.split(":", 1)[1]
        keep = _KEEP.get(name)
        if keep is None and not name.endswith(("_entry", "_exit")):
            continue
        out.append((fmt, ["common_pid"] + [f for f in keep or () if f in fmt.fields]))
    return out


def tables_from_events(ev: Events, formats: dict[str, EventFormat]) -> dict[str, Table]:
    """Tables from decoded events (the reference path; :func:`decode_trace` is faster)."""
    out: dict[str, Table] = {}
    by_type = ev.by_type()
    for fmt, names in wanted_fields(formats):
        idx = by_type.get(fmt.id, np.empty(0, np.int64))
        cols = {"ts": ev.ts[idx], "cpu": ev.cpu[idx]}
        # Payload offsets of the type gathered once for all its fields.
        cols.update(ev.columns(fmt, names, idx))
        out[fmt.name] = Table(fmt.name, cols)
    return out


def decode_trace(header: dict[str, Any], per_cpu: dict[int, bytes],
                 formats: dict[str, EventFormat], hdr: PageHeader | None = None) -> Trace:
    """Pages straight into explain's tables (ringbuf.decode_tables)."""
    if hdr is None:
        hdr = parse_header_page(header["header_page"])
    dec = decode_tables(per_cpu, hdr, wanted_fields(formats))
    tables = {fmt.name: Table(fmt.name, dec.tables[fmt.id])
              for fmt, _ in wanted_fields(formats)}
    trace = Trace(header, tables, formats, dec.missed, dec.events, dec.pages, dec.seconds)
    to_kernel_pids(trace)
    return trace


def to_kernel_pids(trace: Trace) -> None:
    """Rename the header's threads (``vmm_threads``, ``vcpu_tids``, ``peer_threads``) to
    the pids the kernel's trace records, where they differ. The capture reads them from
    /proc, which inside a pid namespace (a CI container, a containerised lab runner)
    numbers tasks its own way: a listed tid absent from the trace's switches whose name
    is that of one listed thread and of one task of the trace (QEMU's ``CPU 0/KVM``) is
    that task. Names shared by several threads are left alone (the native explainer
    finds its threads by name).
    Each renaming is kept in the header's ``pid_namespace_map``."""
    hdr = trace.header
    sw = trace.t("sched_switch")
    listed = {int(t): c for key in ("vmm_threads", "peer_threads")
              for t, c in (hdr.get(key) or {}).items()}
    if not listed or not len(sw):
        return
    pids = np.concatenate([np.asarray(sw["next_pid"]), np.asarray(sw["prev_pid"])])
    tids = np.array(sorted(listed), np.int64)
    absent = tids[~np.isin(tids, pids)]
    if not len(absent):
        return
    comms = np.concatenate([np.asarray(sw["next_comm"]), np.asarray(sw["prev_comm"])])
    pairs = np.unique(np.rec.fromarrays([pids.astype(np.int64), comms.astype("S16")]))
    by_name: dict[bytes, list[int]] = {}
    for pid, comm in pairs.tolist():
        by_name.setdefault(comm, []).append(int(pid))
    listed_names = [c.encode()[:15] for c in listed.values()]
    rename = {}
    for tid in absent.tolist():
        name = listed[tid].encode()[:15]
        found = by_name.get(name, [])
        if len(found) == 1 and found[0] not in listed and listed_names.count(name) == 1:
            rename[tid] = found[0]
    if not rename:
        return
    for key in ("vmm_threads", "peer_threads"):
        if hdr.get(key):
            hdr[key] = {str(rename.get(int(t), int(t))): c for t, c in hdr[key].items()}
    if hdr.get("vcpu_tids"):
        hdr["vcpu_tids"] = [rename.get(int(t), int(t)) for t in hdr["vcpu_tids"]]
    hdr["pid_namespace_map"] = {str(a): b for a, b in rename.items()}


def load_capture(path: Path) -> Trace:
    header, per_cpu = read_archive(path)
    return decode_capture(header, per_cpu)


def decode_capture(header: dict[str, Any], per_cpu: dict[int, bytes]) -> Trace:
    formats = {k: parse_format(v, k.split(":")[0]) for k, v in header["formats"].items()}
    return decode_trace(header, per_cpu, formats)
