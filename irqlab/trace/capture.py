"""``irqlab run --trace``: a RunHook capturing host kernel events around the VMM.

after_start() (QEMU runs, its pid and thread names are known) creates the private
instance ``instances/irqlab-<pid>-<run>`` (unique per irqlab process: two runs on
different databases may share a run id; journalled before it is made, see
irqlab.trace.tracefs), selects the events of issue 8 that exist on this kernel (the
missing ones are recorded), sets the trace clock to x86-tsc (guest TSC and
trace timestamps then share a clock under TCG), sizes the buffer from the period, limits
tracing to the VMM's CPUs and starts two threads:

- a reader draining ``per_cpu/cpuN/trace_pipe_raw`` pages into a spool file, so the ring
  buffer does not overflow during long runs;
- an anchor thread writing a marker, reading the newest sample (through the run
  source's ``peek()``, irqlab.samples.source), writing a second marker: guest ticks seen between two host timestamps bound the guest->host clock offset
  (irqlab.explain.clock).

stop() turns tracing off, drains the buffers, reads per-CPU stats, restores every setting,
removes the instance (and a tracefs we mounted), then writes the gzip archive. It never
raises: problems go into metadata().

KVM's per-vCPU debugfs files (``kvm/<vmm pid>-<vm fd>/vcpu<N>/tsc-offset`` and, on hosts
with TSC scaling, ``tsc-scaling-ratio`` and ``tsc-scaling-ratio-frac-bits``; Linux
arch/x86/kvm/debugfs.c, kvm_arch_create_vcpu_debugfs()) are read at start and again every
second by the reader thread: the header keeps the start read and the last one ("end"),
because stop() runs after QEMU has exited and its VM directory is gone. debugfs is mounted
read-only in a temporary directory when it is not mounted (a per-mount flag: the shared
superblock stays as it was), and unmounted at teardown.
"""

from __future__ import annotations

from collections import deque
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from irqlab.samples.source import RingPeek
from irqlab.trace.archive import spool_chunk, trace_file_for, write_archive
from irqlab.trace.hook import CaptureHook
from irqlab.trace.tracefs import (WANTED_EVENTS, Instance, TraceError, Tracefs, find_mount,
                                  mount_private, unmount_private)

_READ_INTERVAL_S = 0.05
_DEBUGFS_EVERY = 20             # reader rounds between debugfs reads (~1 s)
# The pages kept between two windows for their live IRQ/thread columns (LiveCapture): a
# 10 s window of a native run at 1 ms here is ~15 MB; a busy host's capture can be
# 1 GB a minute, which the run flow must neither hold nor decode whole.
LIVE_MAX_BYTES = 64 << 20
_ANCHOR_INTERVAL_S = 0.01
ANCHOR_PREFIX = "irqlab-anchor"
START_MARK, STOP_MARK = "irqlab-trace-start", "irqlab-trace-stop"


def vmm_threads(pid: int) -> dict[int, str]:
    """{tid: comm} of a process (QEMU with debug-threads=on names its vCPU threads)."""
    out: dict[int, str] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            out[int(tid)] = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            continue
    return out


def _read_int(path: Path) -> int | None:
    """A debugfs number; None when the file is absent (``FileNotFoundError`` only)."""
    try:
        return int(path.read_text().strip())
    except FileNotFoundError:
        return None


class KvmDebugfs:
    """Read-only access to KVM's per-VM debugfs directories of one VMM process.

    The files are what the guest TSC is made of: KVM computes the guest TSC as
    ``tsc_offset + (host_tsc * tsc_scaling_ratio >> frac_bits)`` (arch/x86/kvm/x86.c,
    kvm_read_l1_tsc() and kvm_scale_tsc()); debugfs prints ``vcpu->arch.tsc_offset`` signed
    (``%lld``), the ratio and the fraction bits unsigned. ``tsc-scaling-ratio*`` exist only
    when the host can scale the TSC (``kvm_caps.has_tsc_control``); without them the ratio
    is 1.
    """

    def __init__(self) -> None:
        self.root: Path | None = None
        self.mounted_by_us = False
        self.why_not: str | None = None
        found = find_mount("debugfs")
        if found is not None:
            self.root = found
            return
        mnt, err = mount_private("debugfs", read_only=True)
        if mnt is None:
            self.why_not = f"debugfs not mounted and mounting it read-only failed ({err})"
            return
        self.root, self.mounted_by_us = mnt, True

    def close(self) -> None:
        """Unmount (and remove) a debugfs we mounted; a found mount is left alone."""
        if self.mounted_by_us and self.root is not None:
            unmount_private(self.root)
            self.mounted_by_us = False
        self.root = None

    def vm_dirs(self, vmm_pid: int) -> list[Path]:
        """``kvm/<pid>-<fd>`` directories of the process (one per VM it created)."""
        if self.root is None:
            return []
        kvm = self.root / "kvm"
        try:
            return sorted(p for p in kvm.iterdir() if p.name.startswith(f"{vmm_pid}-"))
        except OSError:
            return []

    def read(self, vmm_pid: int, read_at: str) -> tuple[list[dict[str, Any]], list[str]]:
        """One row per vCPU of every VM of ``vmm_pid``, and why values are missing."""
        rows: list[dict[str, Any]] = []
        why: list[str] = []
        if self.root is None:
            return rows, [self.why_not or "debugfs not available"]
        dirs = self.vm_dirs(vmm_pid)
        if not dirs:
            kvm = self.root / "kvm"
            return rows, [f"no kvm/{vmm_pid}-<fd> directory in debugfs" + (
                "" if kvm.is_dir() else " (no kvm directory at all: KVM not loaded)")
                + " (a TCG run has none; KVM removes it when the VM is destroyed)"]
        mono = time.monotonic_ns()
        for vm in dirs:
            try:
                vcpus = sorted((p for p in vm.iterdir() if p.name.startswith("vcpu")
                                and p.name[4:].isdigit()), key=lambda p: int(p.name[4:]))
            except OSError as exc:
                why.append(f"{vm}: {exc.strerror or exc}")
                continue
            for vd in vcpus:
                try:
                    off = _read_int(vd / "tsc-offset")
                    ratio = _read_int(vd / "tsc-scaling-ratio")
                    frac = _read_int(vd / "tsc-scaling-ratio-frac-bits")
                    pid = _read_int(vd / "pid")
                except (OSError, ValueError) as exc:
                    why.append(f"{vd}: {getattr(exc, 'strerror', None) or exc}")
                    continue
                if off is None:
                    why.append(f"{vd}/tsc-offset does not exist")
                    continue
                if ratio is None:
                    why.append(f"{vd.name}: no tsc-scaling-ratio (KVM creates it only when "
                               f"the host scales the TSC): ratio 1")
                rows.append({"read_at": read_at, "mono": mono, "vm": vm.name,
                             "vcpu": int(vd.name[4:]), "pid": pid, "tsc_offset": off,
                             "tsc_scaling_ratio": ratio, "frac_bits": frac})
        return rows, why


def buffer_kb_for(period_ns: int) -> int:
    """Per-CPU buffer: ~40 events of ~64 B per guest period for 2 s of reader stall."""
    per_s = 1e9 / max(period_ns, 1) * 40 * 64
    return int(min(65536, max(4096, per_s * 2 / 1024)))


def ready_pages(fd: int, page_size: int) -> Iterator[bytes]:
    """The pages a per-CPU raw trace pipe (opened non-blocking) has ready now, read one
    by one until it has none (EAGAIN) or ends."""
    while True:
        try:
            page = os.read(fd, page_size)
        except BlockingIOError:
            return
        if not page:
            return
        yield page


class TraceHook(CaptureHook):
    """RunHook: capture a private tracefs instance around the VMM (see module doc)."""

    name = "trace"
    requires = None          # any target: it traces the host around the target's process

    def __init__(self, db_path: Path, period_ns: int = 1_000_000,
                 buffer_kb: int | None = None, clock: str | None = None,
                 extra_events: tuple[tuple[str, str], ...] = (),
                 path_kind: str | None = None, kind: str | None = None) -> None:
        """``clock``: the trace clock to use instead of x86-tsc (e.g. "mono" when the
        samples are CLOCK_MONOTONIC ns: then they map onto the trace exactly);
        ``extra_events``: (system, event) pairs beyond WANTED_EVENTS; ``path_kind``:
        recorded as ``path`` (e.g. "net"); ``kind``: the capture's kind, recorded as
        ``kind`` for `irqlab explain` to pick its explainer (irqlab.explain.registry):
        "host-vcpu" (a guest's VMM, the default), "net-path" (path_kind "net"), "native"."""
        self.db_path = Path(db_path)
        self.clock = clock
        self.extra_events = tuple(extra_events)
        self.period_ns = period_ns
        self.buffer_kb = buffer_kb or buffer_kb_for(period_ns)
        self.fs: Tracefs | None = None
        self.inst: Instance | None = None
        self.meta: dict[str, Any] = {"enabled": [], "missing": [], "problems": []}
        if path_kind:
            self.meta["path"] = path_kind
        self.meta["kind"] = kind or ("net-path" if path_kind == "net" else "host-vcpu")
        self._spool = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._fds: dict[int, int] = {}
        self._lock = threading.Lock()
        self._anchors: list[list[int]] = []
        self._formats: dict[str, str] = {}
        self.path: Path | None = None
        self._debugfs: KvmDebugfs | None = None
        self._kvm_debugfs: dict[str, Any] = {}
        self._peer_pids: list[int] = []
        self._live: deque[tuple[int, bytes]] | None = None  # LiveCapture: pages read
        self._live_bytes = 0

    # -- RunHook ------------------------------------------------------------------------
    def qemu_args(self) -> list[str]:
        return []

    def before_start(self) -> None:
        # Fail the run early (before QEMU starts) when tracing cannot work at all.
        self.fs = Tracefs()
        self.meta["tracefs"] = str(self.fs.root)
        self.meta["tracefs_mounted_by_irqlab"] = self.fs.mounted_by_us

    def after_start(self, ctx: Any) -> None:
        """``ctx``: the run's RunContext (irqlab.runconfig)."""
        try:
            self._start(ctx)
        except (OSError, TraceError) as exc:
            self.meta["problems"].append(f"tracing not started: {exc}")
            self._teardown()
            raise TraceError(f"--trace: {exc}") from exc

    # -- LiveCapture (irqlab.runconfig) ------------------------------------------------
    def capture_kind(self) -> str:
        return str(self.meta["kind"])

    def keep_live(self) -> bool:
        """From now on the pages the reader spools are also kept for live_pages."""
        with self._lock:
            if self._live is None:
                self._live = deque()
        return True

    def _keep_live_page(self, cpu: int, page: bytes) -> None:
        """Keep a page for live_pages (under the lock), the oldest dropped beyond
        LIVE_MAX_BYTES (a window's columns then leave its first samples out)."""
        assert self._live is not None
        self._live.append((cpu, page))
        self._live_bytes += len(page)
        while self._live_bytes > LIVE_MAX_BYTES and len(self._live) > 1:
            self._live_bytes -= len(self._live.popleft()[1])
            self.meta["live_dropped_pages"] = self.meta.get("live_dropped_pages", 0) + 1

    def live_pages(self) -> tuple[dict[str, Any], list[tuple[int, bytes]]] | None:
        """The pages the reader spooled since the last call, with the header they decode
        with; None before the capture has started. The ring is not read here: the
        reader thread reads it every 50 ms, and the few newest samples whose events it
        has not read yet are left out of their window's columns (irqlab.explain.live)."""
        if self.inst is None or self._live is None:
            return None
        with self._lock:
            pages, self._live, self._live_bytes = list(self._live), deque(), 0
        return self._header({}, self._mono_start, 0), pages

    # -- start --------------------------------------------------------------------------
    def _start(self, ctx: Any) -> None:
        pid = ctx.process.proc.pid
        self.run_id = ctx.run_id
        threads = vmm_threads(pid)
        self.meta.update({"vmm_pid": pid, "vmm_threads": {str(t): c for t, c in threads.items()},
                          "vcpu_tids": [t for t, c in threads.items() if c.startswith("CPU ")]})
        self._peer_pids = list(ctx.process.peer_pids())
        peers = {t: c for p in self._peer_pids for t, c in vmm_threads(p).items()}
        self.meta["peer_threads"] = {str(t): c for t, c in peers.items()}
        self._debugfs_start(pid)
        self.inst = inst = Instance(self.fs, f"irqlab-{os.getpid()}-{self.run_id}")
        self.meta["instance"] = str(inst.path)
        clocks = inst.read("trace_clock")
        clock = self.clock or ("x86-tsc" if "x86-tsc" in clocks.split() or "[x86-tsc]" in clocks
                               else "mono")
        inst.write("trace_clock", clock)
        self.meta["clock"] = clock
        inst.write("tracing_on", "0")
        err = inst.try_write("buffer_size_kb", str(self.buffer_kb))
        self.meta["buffer_kb"] = self.buffer_kb if err is None else None
        if err:
            self.meta["problems"].append(f"buffer_size_kb: {err}")
        cpus = set()
        for tid in list(threads) + list(peers):
            try:
                cpus |= os.sched_getaffinity(tid)
            except OSError:
                pass
        # Our own CPUs too: markers (clock anchors) are written from this process, and a
        # CPU outside tracing_cpumask refuses them (EBADF).
        cpus |= os.sched_getaffinity(0)
        ncpu = inst.cpu_count()
        cpus = sorted(c for c in (cpus or set(range(ncpu))) if c < ncpu)
        mask = sum(1 << c for c in cpus)
        err = inst.try_write("tracing_cpumask", f"{mask:x}")
        self.meta["cpus"] = cpus if err is None else list(range(ncpu))
        if err:
            self.meta["problems"].append(f"tracing_cpumask: {err}")
        # Pid filters are not used: a filtered-out event is reserved then discarded,
        # leaving padding whose time delta readers disagree on; the CPU mask is exact.
        self.meta["filters"] = {"cpumask": f"{mask:x}", "pid": None,
                                "why_no_pid_filter": "sched_switch must show every task on "
                                "the VMM's CPUs; event filters leave discarded events"}
        wanted = list(WANTED_EVENTS) + [("irq_vectors", e) for e in inst.events_of("irq_vectors")
                                        if e.endswith(("_entry", "_exit"))] \
            + list(self.extra_events)
        for system, event in wanted:
            if not inst.has_event(system, event):
                self.meta["missing"].append(f"{system}:{event}")
                continue
            err = inst.try_write(f"events/{system}/{event}/enable", "1")
            if err:
                self.meta["missing"].append(f"{system}:{event} ({err})")
                continue
            self.meta["enabled"].append(f"{system}:{event}")
            self._formats[f"{system}:{event}"] = inst.read(f"events/{system}/{event}/format")
        # Markers land as ftrace:print events; their format is needed to decode them.
        self._formats["ftrace:print"] = self.fs.read("events/ftrace/print/format")
        self._spool = tempfile.TemporaryFile(dir=self._spool_dir())
        for cpu in self.meta["cpus"]:
            self._fds[cpu] = os.open(inst.path / f"per_cpu/cpu{cpu}/trace_pipe_raw",
                                     os.O_RDONLY | os.O_NONBLOCK)
        self.page_size = 16 + int(self._page_data_size())
        inst.write("tracing_on", "1")
        self._mono_start = time.monotonic_ns()
        inst.marker(f"{START_MARK} mono={self._mono_start}")
        self._threads = [threading.Thread(target=self._reader, daemon=True,
                                          name="irqlab-trace-reader"),
                         threading.Thread(target=self._anchor, args=(ctx.source.peek(),),
                                          daemon=True, name="irqlab-trace-anchor")]
        for t in self._threads:
            t.start()

    def _spool_dir(self) -> str:
        d = trace_file_for(self.db_path, 0).parent
        d.mkdir(parents=True, exist_ok=True)
        return str(d)

    def _page_data_size(self) -> int:
        for line in self.fs.read("events/header_page").splitlines():
            if "char data" in line:
                return int(line.split("size:")[1].split(";")[0])
        return 4080

    # -- threads ------------------------------------------------------------------------
    def _drain(self) -> int:
        got = 0
        with self._lock:
            for cpu, fd in self._fds.items():
                for page in ready_pages(fd, self.page_size):
                    spool_chunk(self._spool, cpu, page)
                    if self._live is not None:
                        self._keep_live_page(cpu, page)
                    got += 1
        return got

    def _reader(self) -> None:
        rounds = 0
        while not self._stop.wait(_READ_INTERVAL_S):
            try:
                self._drain()
            except OSError as exc:
                self.meta["problems"].append(f"reader: {exc}")
                return
            rounds += 1
            if rounds % _DEBUGFS_EVERY == 0:
                self._debugfs_refresh()
                self._threads_refresh()

    def _threads_refresh(self) -> None:
        """Add the process's threads started after the capture began (a probe may create
        its per-CPU threads after it became ready): explain follows only the threads
        listed in the header."""
        pid = self.meta.get("vmm_pid")
        if pid is None:
            return
        known = self.meta["vmm_threads"]
        for tid, comm in vmm_threads(pid).items():
            known.setdefault(str(tid), comm)
        peers = self.meta["peer_threads"]     # the net sender starts its threads late too
        for peer in self._peer_pids:
            for tid, comm in vmm_threads(peer).items():
                peers.setdefault(str(tid), comm)

    # -- KVM debugfs --------------------------------------------------------------------
    def _debugfs_start(self, pid: int) -> None:
        """First read of the VM's TSC offset/scaling (see the module doc); never raises."""
        info: dict[str, Any] = {"reads": [], "why_not": None, "missing": [],
                                "debugfs": None, "changed": False}
        self._kvm_debugfs = info
        try:
            self._debugfs = dbg = KvmDebugfs()
            info["debugfs"] = (None if dbg.root is None else
                               "mounted read-only by irqlab (temporary)" if dbg.mounted_by_us
                               else str(dbg.root))
            rows, why = dbg.read(pid, "start")
        except Exception as exc:          # debugfs is optional: record, never fail the run
            rows, why = [], [f"{type(exc).__name__}: {exc}"]
        info["reads"] = rows
        info["missing"] = why
        if not rows:
            info["why_not"] = "; ".join(why) or "no vCPU directory"
            self._debugfs_close()

    def _debugfs_refresh(self) -> None:
        """Keep the last read while the VM exists as the "end" read."""
        dbg, info = self._debugfs, self._kvm_debugfs
        if dbg is None or not info.get("reads"):
            return
        try:
            rows, _why = dbg.read(self.meta["vmm_pid"], "end")
        except Exception:
            return
        if not rows:
            return                       # the VM is gone: the previous read is the last
        keep = [r for r in info["reads"] if r["read_at"] == "start"]
        start = {(r["vm"], r["vcpu"]): r for r in keep}
        for r in rows:
            s0 = start.get((r["vm"], r["vcpu"]))
            if s0 is not None and any(s0[k] != r[k] for k in
                                      ("tsc_offset", "tsc_scaling_ratio", "frac_bits")):
                info["changed"] = True
        info["reads"] = keep + rows

    def _debugfs_close(self) -> None:
        if self._debugfs is not None:
            self._debugfs.close()
            self._debugfs = None

    def _anchor(self, peek: RingPeek | None) -> None:
        """Bracket reads of the newest sample with two markers (see irqlab.explain.clock)."""
        if peek is None:
            self.meta["problems"].append("anchors: the samples do not sit in shared memory "
                                         "(console sink): no ring-read anchors")
            return
        try:
            marker = os.open(self.inst.path / "trace_marker", os.O_WRONLY)
        except OSError as exc:
            self.meta["problems"].append(f"anchors: cannot open the marker ({exc})")
            peek.close()
            return
        n = 0
        try:
            while not self._stop.wait(_ANCHOR_INTERVAL_S):
                os.write(marker, f"{ANCHOR_PREFIX} a {n}".encode())
                head, entry = peek.latest()     # entry 0: being overwritten, no bound
                os.write(marker, f"{ANCHOR_PREFIX} b {n}".encode())
                self._anchors.append([n, head, entry])
                n += 1
        except OSError as exc:
            self.meta["problems"].append(f"anchors: stopped after {n} ({exc})")
        finally:
            os.close(marker)
            peek.close()

    # -- stop ---------------------------------------------------------------------------
    def _finish(self) -> None:
        if self.inst is None:
            return
        inst = self.inst
        mono_stop = time.monotonic_ns()
        try:
            inst.marker(f"{STOP_MARK} mono={mono_stop}")
        except OSError:
            pass
        self._threads_refresh()         # the probe may still run (a stop at a break)
        self._stop.set()
        for t in self._threads:
            t.join(5)
        self._debugfs_refresh()          # QEMU has exited by now: usually finds nothing
        self._debugfs_close()
        inst.write("tracing_on", "0")
        self._collect()
        stats = {}
        for cpu in self._fds:
            stats[str(cpu)] = _parse_stats(inst.read(f"per_cpu/cpu{cpu}/stats"))
        self.meta["stats"] = stats
        self.meta["lost_events"] = sum(s.get("overrun", 0) + s.get("dropped events", 0)
                                       for s in stats.values())
        header = self._header(stats, self._mono_start, mono_stop)
        self.meta["kvm_debugfs"] = {k: v for k, v in self._kvm_debugfs.items() if k != "reads"}
        self.meta["kvm_debugfs"]["reads"] = len(self._kvm_debugfs.get("reads", []))
        self._close_fds()
        self.meta["problems"] += inst.close()
        self.inst = None
        self.meta["anchors"] = len(self._anchors)
        self._keep(header)

    def _collect(self) -> None:
        """Tracing is off: read what the buffers still hold (here: into the spool)."""
        self._drain()

    def _keep(self, header: dict[str, Any]) -> None:
        """The instance is gone: keep the capture (here: the whole run's archive)."""
        self.path = trace_file_for(self.db_path, self.run_id)
        self.meta["file"] = str(self.path)
        self.meta["bytes"] = write_archive(self.path, header, self._spool)
        self.meta["trace_dat"] = ("not written: irqlab's reader drains the instance during "
                                  "the run (so `trace-cmd extract` finds it empty, and "
                                  "`trace-cmd record` fails on this kind of host); "
                                  "`irqlab explain RUN --text F` exports the events as text")

    def _header(self, stats: dict[str, Any], mono_start: int, mono_stop: int
                ) -> dict[str, Any]:
        """The archive's header (docs/formats.md section 9)."""
        return {"version": 1, "run_id": self.run_id, "clock": self.meta["clock"],
                "header_page": self.fs.read("events/header_page"),
                "header_event": self.fs.read("events/header_event"),
                "formats": self._formats, "cpus": self.meta["cpus"], "stats": stats,
                "vmm_pid": self.meta["vmm_pid"], "vmm_threads": self.meta["vmm_threads"],
                "vcpu_tids": self.meta["vcpu_tids"],
                "peer_threads": self.meta.get("peer_threads", {}), "anchors": self._anchors,
                "enabled": self.meta["enabled"], "missing": self.meta["missing"],
                "mono_start": mono_start, "mono_stop": mono_stop,
                "kernel": os.uname().release, "kvm_debugfs": self._kvm_debugfs}

    def _close_fds(self) -> None:
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()

    def _teardown(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
        self._threads = []
        self._debugfs_close()
        self._close_fds()
        if self.inst is not None:
            self.meta["problems"] += self.inst.close()
            self.inst = None
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        if self.fs is not None:
            self.fs.close()
            self.fs = None


def _parse_stats(text: str) -> dict[str, float]:
    """per_cpu/cpuN/stats: "entries: 12", "oldest event ts: 123.4" ... as numbers."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        key, _, val = line.partition(":")
        try:
            num = float(val.strip())
        except ValueError:
            continue
        out[key.strip()] = int(num) if num.is_integer() else num
    return out
