"""A Linux dom0 with Xen's toolstack for ``--target xen --xen-dom0 linux`` (x86_64;
arm64's differences are in irqlab.runner.xen_dom0_arm64).

Xen boots Debian's Linux kernel as a PV dom0 with an initramfs irqlab writes per run
(uncompressed newc, irqlab.runner.linux_guest's writer): busybox-static, Debian's Xen
tools and libraries (xen-utils-4.17 ..., unpacked by scripts/fetch-xen-dom0.sh into
``~/.cache/irqlab/xen-dom0/amd64``), the Xen driver modules of the same kernel, the
probe ELF and ``ringfwd`` (probes/xen-dom0/ringfwd.c). Its ``/init`` (a busybox shell
script generated here with the run's settings baked in) starts xenstored, xen-init-dom0
and xenconsoled, ``xl create``s the probe as a PVH domU (paused), applies the scheduler
knobs, starts the dom0-side loads, unpauses it, and runs ringfwd, which maps the domU's
sample ring (privcmd foreign mapping) and copies it into QEMU's ivshmem-plain BAR, a host
memfd the host reads with its ordinary ring reader.

Why not the console: Xen refuses ``HYPERVISOR_console_io`` from a domU unless it is
built with CONFIG_VERBOSE_DEBUG (xsm/dummy.h), which Debian's is not; the x86 probe then
falls back to COM1 port writes, which a PVH domU has no device for. A PV console would
need a xenconsole ring driver in the probe. And a console per sample is what seed 000
shows ruining latency: the ring costs the domU nothing per sample.

dom0 reports what it did as ``irqlab-dom0: KEY VALUE...`` lines on its console (hvc0,
which Xen prints unprefixed on COM1): :func:`parse_reports` turns them into metadata.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import struct
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irqlab.runner.linux_guest import kernel_cache_dir, write_newc
from irqlab.runner.process import marked_lines

DEB_LIB_DIR = "usr/lib/x86_64-linux-gnu"
XEN_BIN_DIR = "usr/lib/xen-4.17/bin"
HOST_LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu")
INTERP = "/lib64/ld-linux-x86-64.so.2"
DLOPENED = ("libgcc_s.so.1",)
# Toolstack programs dom0 runs (all from Debian's xen-utils-4.17 / xenstore-utils).
XEN_TOOLS = ("xl", "xenstored", "xenconsoled", "xen-init-dom0")
# Modules, in load order: Debian builds the dom0 drivers the toolstack needs as modules.
XEN_MODULES = ("xen-evtchn", "xen-gntdev", "xen-gntalloc", "xen-privcmd", "xenfs")
RINGFWD_SRC = Path(__file__).resolve().parents[2] / "probes" / "xen-dom0" / "ringfwd.c"
TRCFWD_SRC = RINGFWD_SRC.with_name("trcfwd.c")
# The xentrace channel's BAR (a second ivshmem-plain device, --trace): a power of two as
# ivshmem wants, and the size dom0's init tells it from the ring's (SHM_BYTES, 4 MiB).
TRACE_SHM_BYTES = 16 << 20
REPORT_MARK = "irqlab-dom0:"
DOMU_NAME = "irqlab-probe"
RING_GPA = 0x400000                    # the x86 probe's ring (probes/guest/x86_64/main.c)
RTDS_DEFAULT_PERIOD_NS = 10_000_000   # Xen's RTDS defaults (xen/common/sched/rt.c)
RTDS_DEFAULT_BUDGET_NS = 4_000_000
# ringfwd's poll: each poll is a dom0 wake-up on the pCPU the probe may share; the
# probe's 65536-record ring holds 65 s at 1 ms, so 20 ms polls lose nothing.
RINGFWD_POLL_US = 20000
DOM0_LOAD_KINDS = ("dom0-cpu", "dom0-console", "domain-create", "hypercall")
# --load hypercall:kind=…: what dom0's toolstack loops on, and the hypercalls each issues
# (Xen 4.17 tools): xl info -> XEN_SYSCTL_physinfo, getcpuinfo, sched_id ...; xl list ->
# XEN_SYSCTL_getdomaininfolist and a domctl per domain; xenstore-write -> an event-channel
# send to xenstored (EVTCHNOP_send) per write.
HYPERCALL_LOOPS = {"sysctl": "xl info", "domctl": "xl list",
                   "evtchn": "xenstore-write /irqlab/hcall $n"}
HYPERCALL_KINDS = tuple(HYPERCALL_LOOPS)
# Scheduler parameters the toolstack sets at run time (irqlab.knobs.xen): key ->
# (scheduler it belongs to, xl arguments with {value} and {domu}, read-back arguments).
# credit2 weight and cap are the measured domain's; the ratelimits and credit's timeslice
# are the pool's (-s).
XL_SCHED_SETTINGS: dict[str, tuple[str, str, str]] = {
    "credit2_weight": ("credit2", "sched-credit2 -d {domu} -w {value}",
                       "sched-credit2 -d {domu}"),
    "credit2_cap": ("credit2", "sched-credit2 -d {domu} -c {value}",
                    "sched-credit2 -d {domu}"),
    "credit2_ratelimit": ("credit2", "sched-credit2 -s -r {value}", "sched-credit2 -s"),
    "credit_tslice": ("credit", "sched-credit -s -t {value}", "sched-credit -s"),
    "credit_ratelimit": ("credit", "sched-credit -s -r {value}", "sched-credit -s"),
}
XL_SCHED_KEYS = tuple(XL_SCHED_SETTINGS)     # dom0 parameters are integers: the index


@dataclass(frozen=True)
class Dom0Arch:
    """Where one architecture's dom0 pieces come from and go (x86_64 here, arm64 in
    irqlab.runner.xen_dom0_arm64): the cache, the host, the initramfs, the probe's ring."""

    deb_arch: str                    # Debian's name, the cache directory (amd64, arm64)
    lib_dirs: tuple[str, ...]        # library directories under the cache's root/
    host_lib_dirs: tuple[str, ...]   # host directories searched after them
    image_lib_dir: str               # where the libraries go in the initramfs
    interp: str                      # the ELF interpreter's path (host and initramfs)
    interp_in_cache: bool            # interp taken from the cache's root/, not the host
    cc: str                          # the compiler ringfwd is built with
    ring_gpa: int                    # the probe's ring, guest-physical, in the domU


X86_64_DOM0 = Dom0Arch("amd64", (DEB_LIB_DIR,), HOST_LIB_DIRS, "lib/x86_64-linux-gnu",
                       INTERP, False, "gcc", RING_GPA)


def dom0_cache_dir(arch: str = "amd64") -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "irqlab" / "xen-dom0" / arch


def fetch_hint(arch: str = "amd64") -> str:
    return (f"run scripts/fetch-xen-dom0.sh {arch} (./setup.sh --install-only does) to "
            f"fetch Debian's xen-utils-4.17, busybox-static and Xen modules into "
            f"{dom0_cache_dir(arch)}")


def elf_needed(data: bytes) -> list[str]:
    """DT_NEEDED names of a 64-bit little-endian ELF (empty for a static one)."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return []
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _fl, off, vaddr, _pa, filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            loads.append((vaddr, off, filesz))
        elif p_type == 2:
            dynamic = (off, filesz)
    if dynamic is None:
        return []
    needed, strtab = [], None
    for j in range(dynamic[1] // 16):
        tag, val = struct.unpack_from("<qQ", data, dynamic[0] + 16 * j)
        if tag == 0:
            break
        if tag == 1:
            needed.append(val)
        elif tag == 5:
            strtab = val
    if strtab is None:
        return []
    base = next((off + strtab - va for va, off, sz in loads if va <= strtab < va + sz),
                strtab)
    out = []
    for n in needed:
        end = data.index(b"\0", base + n)
        out.append(data[base + n:end].decode())
    return out


def resolve_libs(binaries: list[Path], search: list[Path]) -> dict[str, Path]:
    """Every shared library the binaries need, transitively: soname -> file."""
    found: dict[str, Path] = {}
    todo = [b for b in binaries]
    while todo:
        for name in elf_needed(todo.pop().read_bytes()):
            if name in found:
                continue
            path = next((d / name for d in search if (d / name).exists()), None)
            if path is None:
                raise FileNotFoundError(f"dom0 initramfs: library {name} not found in "
                                        f"{', '.join(map(str, search))}")
            found[name] = path.resolve()
            todo.append(found[name])
    return found


def build_dom0_tool(cache: Path, arch: Dom0Arch, src_path: Path,
                    libs: tuple[str, ...] = ()) -> Path:
    """A dom0 helper from probes/xen-dom0/ compiled (against the cached Xen libraries
    ``libs``), kept in the cache and rebuilt when the source changes; cross-compiled for
    arm64."""
    src = src_path.read_bytes()
    # the headers beside it (ringcopy.h) are part of what is built
    headers = b"".join(h.read_bytes() for h in sorted(src_path.parent.glob("*.h")))
    digest = hashlib.sha256(src + headers).hexdigest()[:16]
    out = cache / f"{src_path.stem}-{digest}"
    if out.exists():
        return out
    gcc = shutil.which(arch.cc)
    if gcc is None:
        raise FileNotFoundError(f"{arch.cc} not found (needed once to build "
                                f"{src_path.stem}): run ./setup.sh --install-only")
    tmp = out.with_suffix(".tmp")
    link = ([f"-L{cache / 'root' / arch.lib_dirs[0]}"] + [f"-l:{lib}" for lib in libs]
            + ["-Wl,--allow-shlib-undefined"]) if libs else []
    proc = subprocess.run([gcc, "-O2", "-Wall", "-o", str(tmp), str(src_path)] + link,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise OSError(f"building {src_path.stem} failed: {proc.stderr.strip()[-500:]}")
    tmp.rename(out)
    return out


def build_ringfwd(cache: Path, arch: Dom0Arch = X86_64_DOM0) -> Path:
    """probes/xen-dom0/ringfwd.c against the cached libxenforeignmemory."""
    return build_dom0_tool(cache, arch, RINGFWD_SRC, ("libxenforeignmemory.so.1",))


class InDom0Load(ABC):
    """A run hook whose work dom0's init does (irqlab.loads.dom0): the Xen target finds
    these among the run's hooks and bakes them into dom0's init."""

    @abstractmethod
    def dom0_load(self) -> tuple[str, str, dict[str, int]]:
        """(kind, hook name, parameters in ns, bytes, counts)."""


class InDom0Setting(ABC):
    """A knob dom0 applies with xl (irqlab.knobs.xen), or marks not applicable."""

    @abstractmethod
    def dom0_setting(self) -> tuple[str, Any]:
        """(knob key, parsed value)."""

    @abstractmethod
    def not_applicable(self, reason: str) -> None:
        """Record why this Xen cannot honour it."""


@dataclass(frozen=True)
class Dom0Trace:
    """xentrace in dom0 for the whole run (``--trace``, irqlab.xen.capture): its event
    mask, per-CPU buffer (pages; Xen cannot resize it later) and poll interval."""

    evt_mask: int
    buffer_pages: int
    poll_ms: int


class InDom0Trace(ABC):
    """A run hook that records xentrace in dom0 (irqlab.xen.capture.XentraceHook): the Xen
    target finds it among the run's hooks and has dom0's init start xentrace."""

    @abstractmethod
    def dom0_trace(self) -> Dom0Trace:
        """What dom0 runs xentrace with."""


class Dom0TraceChannel(ABC):
    """The process side of that capture: where the host reads what dom0 forwards."""

    @property
    @abstractmethod
    def trace_mem_path(self) -> str:
        """A path the host opens to map the xentrace channel (the second ivshmem BAR)."""

    @abstractmethod
    def trace_clock_hz(self) -> int | None:
        """The records' cycle rate as dom0 reported it (None if it did not)."""


@dataclass
class Dom0Load:
    """A dom0-side load (``--load dom0-cpu`` ...), as dom0's init runs it."""

    kind: str
    name: str                        # the hook's name, so its report finds it back
    params: dict[str, int] = field(default_factory=dict)   # ns, bytes, counts


@dataclass
class Dom0Plan:
    """Everything dom0's init does in one run."""

    probe_cmdline: str
    domu_memory_mib: int = 32
    pcpus: int = 1
    arch: Dom0Arch = X86_64_DOM0
    pin: str | None = None             # xl cpus= of the measured vCPU
    rtds_period_ns: int | None = None
    rtds_budget_ns: int | None = None
    cpupool_sched: str | None = None    # a cpupool holding only the measured domain
    # Scheduler parameters set with xl after the domU exists: (report key, xl arguments,
    # xl arguments that read it back), e.g. ("credit2_weight", "sched-credit2 -d … -w 512",
    # "sched-credit2 -d …"); dom0 says `KEY ok <read-back>` or `KEY failed <why>`.
    xl_settings: list[tuple[str, str, str]] = field(default_factory=list)
    loads: list[Dom0Load] = field(default_factory=list)
    trace: Dom0Trace | None = None      # xentrace recorded with the run (--trace)
    # The probe as a dom0less domU Xen created at boot with this domid (arm64, before
    # dom0 runs; it waits for ringfwd's start gate); None: dom0 creates it with xl.
    probe_domid: int | None = None
    # A dom0less neighbour domU (its domid): pinned with the probe by --pin, since a
    # neighbour is the probe's pCPU's other tenant by definition.
    neighbour_domid: int | None = None

    @property
    def domu_ref(self) -> str:
        """How xl names the probe's domain: its xl name, or a dom0less one's domid."""
        return DOMU_NAME if self.probe_domid is None else str(self.probe_domid)


def xl_config(plan: Dom0Plan, name: str = DOMU_NAME, memory_mib: int | None = None,
              cmdline: str | None = None, pool: str | None = None,
              pin: str | None = None) -> str:
    """The xl domain configuration of the probe (PVH: the probe ELF has a PVH note)."""
    lines = [f'name = "{name}"', 'type = "pvh"', 'kernel = "/irqlab/probe.elf"',
             f'cmdline = "{cmdline if cmdline is not None else plan.probe_cmdline}"',
             f"memory = {memory_mib or plan.domu_memory_mib}", "vcpus = 1",
             'on_poweroff = "preserve"', 'on_crash = "preserve"']
    if pin:
        lines.append(f'cpus = "{pin}"')
    if pool:
        lines.append(f'pool = "{pool}"')
    return "\n".join(lines) + "\n"


def _us(ns: int) -> int:
    return max(1, round(ns / 1000))


def _load_script(load: Dom0Load) -> str:
    """Shell of one load, run in the background; it reports with `say`."""
    p = load.params
    delay = f"sleep {p.get('delay_ns', 0) / 1e9:.3f}; " if p.get("delay_ns") else ""
    if load.kind == "dom0-cpu":
        # Busy shell loops; their CPU time (from /proc) is reported at the end.
        return "\n".join(
            f"( {delay}while :; do :; done ) & echo $! >> /irqlab/cpu-pids"
            for _ in range(p.get("workers", 1)))
    if load.kind == "dom0-console":
        # dom0 writing through Xen's console (hvc0 -> console_io -> COM1), in chunks of
        # a tenth of the rate every 100 ms.
        chunk = max(1, p.get("bytes_per_s", 10000) // 10)
        return (f"( {delay}line=$(head -c {max(1, chunk - 1)} /dev/zero | tr '\\0' x); "
                f"n=0; while :; do echo \"$line\" > /dev/console; n=$((n + {chunk})); "
                f"echo $n > /irqlab/console-bytes; usleep 100000; done ) & "
                f"echo $! >> /irqlab/cpu-pids")
    if load.kind == "hypercall":
        # The toolstack command of the kind in a loop; every iteration counted.
        cmd = HYPERCALL_LOOPS[HYPERCALL_KINDS[p.get("kind", 0)]]
        return (f"( {delay}n=0; while :; do {cmd} >/dev/null 2>&1; n=$((n + 1)); "
                f"echo $n > /irqlab/hcall-count; done ) & echo $! >> /irqlab/cpu-pids")
    if load.kind == "domain-create":
        # xl create of a domain of `size` (seed 000 #3: populate_physmap of its memory
        # in alloc_heap_pages is not preemptible), once or every `every`; destroyed after.
        mib = p["size_bytes"] >> 20
        every = p.get("every_ns")
        one = (f"t0=$(uptime_cs); xl create -q /irqlab/big.cfg >/irqlab/big.log 2>&1; "
               f"rc=$?; t1=$(uptime_cs); xl destroy irqlab-big >/dev/null 2>&1; "
               f"t2=$(uptime_cs); i=$((i + 1)); say {load.name} create n=$i rc=$rc "
               f"size_mib={mib} create_cs=$((t1 - t0)) destroy_cs=$((t2 - t1)) "
               f"at_cs=$t0")
        loop = (f"while :; do {one}; sleep {every / 1e9:.3f}; done" if every
                else one)
        return f"( {delay}i=0; {loop} ) &"
    raise ValueError(f"unknown dom0 load {load.kind}")


def init_script(plan: Dom0Plan) -> str:
    """dom0's /init: bring up the toolstack, create the probe domU, apply the settings,
    start the loads, forward the ring; every step reported as `irqlab-dom0:` lines."""
    mods = " ".join(XEN_MODULES)
    pool = "irqlab-pool" if plan.cpupool_sched else None
    s = [
        "#!/bin/busybox sh",
        "/bin/busybox --install -s /bin",
        f"export PATH=/bin:/{XEN_BIN_DIR}",
        f"say() {{ echo \"{REPORT_MARK} $*\" > /dev/console; }}",
        "uptime_cs() { read u _ < /proc/uptime; echo ${u%.*}${u#*.}; }",
        "fail() { say fatal \"$*\"; sleep 1; poweroff -f; }",
        "mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev",
        "mkdir -p /tmp /run /var/run/xen /var/run/xenstored /var/lib/xen /var/lib/xenstored "
        "/var/log/xen /dev/pts; mount -t devpts devpts /dev/pts",
        f"for m in {mods}; do insmod /lib/modules/$m.ko || fail insmod $m; done",
        "mount -t xenfs xenfs /proc/xen || fail mount xenfs",
        "xenstored --pid-file /var/run/xenstored.pid || fail xenstored",
        "xen-init-dom0 >/dev/null || fail xen-init-dom0",
        "xenconsoled --pid-file=/var/run/xenconsoled.pid || fail xenconsoled",
        "say ready uptime_cs=$(uptime_cs)",
        "say xl_info $(xl info | grep -E '^(xen_version|xen_scheduler|nr_cpus|free_memory)'"
        " | tr -s ' ' | tr '\\n' ';')",
        # the ivshmem-plain devices (1af4:1110): QEMU's view of the host memfds, the
        # probe's ring and (with --trace) the xentrace channel, told apart by size
        "shm=''; tshm=''; for d in /sys/bus/pci/devices/*; do",
        "  if [ \"$(cat $d/vendor)\" = 0x1af4 ] && [ \"$(cat $d/device)\" = 0x1110 ]; then",
        f"    echo 1 > $d/enable; if [ $(stat -c %s $d/resource2) = {TRACE_SHM_BYTES} ]; "
        "then tshm=$d/resource2; else shm=$d/resource2; fi; fi; done",
        "[ -n \"$shm\" ] || fail no ivshmem-plain device",
    ]
    if plan.trace is not None:
        # xentrace from before the domU exists to the end, its stdout through a fifo into
        # trcfwd, which copies it into the channel (never Xen's console).
        t = plan.trace
        s += ["[ -n \"$tshm\" ] || fail no ivshmem-plain device for xentrace",
              "mkfifo /irqlab/xentrace.fifo",
              "trcfwd $tshm < /irqlab/xentrace.fifo 2> /irqlab/trcfwd.log & "
              "echo $! > /irqlab/trcfwd.pid",
              # (xentrace wants its output file named: it opens the fifo)
              f"xentrace -D -e {t.evt_mask:#x} -S {t.buffer_pages} -s {t.poll_ms} "
              "/irqlab/xentrace.fifo > /irqlab/xentrace.log 2>&1 & echo $! > "
              "/irqlab/xentrace.pid",
              # the records' clock: xl's cpu_mhz is Xen's cpu_khz (x86: the TSC; Arm:
              # the generic timer), printed %d.%03d
              "say xentrace started uptime_cs=$(uptime_cs) cpu_khz=$(xl info | "
              "sed -n 's/^cpu_mhz *: *//p' | tr -d .)"]
    if pool:
        # A pool with the last pCPU only, under the requested scheduler.
        s += [f"last=$(( $(xl info | sed -n 's/^nr_cpus *: //p') - 1 ))",
              "xl cpupool-cpu-remove Pool-0 $last || fail cpupool-cpu-remove",
              f"xl cpupool-create name=\\\"{pool}\\\" sched=\\\"{plan.cpupool_sched}\\\" "
              f"cpus=\\\"$last\\\" || fail cpupool-create",
              "say cpupool $(xl cpupool-list | tail -n +2 | tr -s ' ' | tr '\\n' ';')"]
    # The domU is created paused and unpaused once its settings hold and the loads run:
    # its probe starts sampling at boot, and a run's first samples are to be measured
    # under what the run says (before 2026-11-27 they were taken while xl applied the
    # settings and before any load had started).
    if plan.probe_domid is None:
        s += [
            "t0=$(uptime_cs)",
            f"xl create -p -q /irqlab/probe.cfg > /irqlab/create.log 2>&1 || "
            f"fail xl create: $(cat /irqlab/create.log)",
            f"domid=$(xl domid {DOMU_NAME})",
            "say domu created domid=$domid create_cs=$(( $(uptime_cs) - t0 ))",
        ]
    else:
        # Xen built it from the device tree and it waits at its start gate: what xl's
        # configuration would have said is applied to the running domain instead.
        s += [f"domid={plan.probe_domid}", "say domu created domid=$domid dom0less=1"]
        if plan.pin:
            s += [f"xl vcpu-pin $domid all {plan.pin} || fail xl vcpu-pin"]
        if pool:
            s += [f"xl cpupool-migrate $domid {pool} || fail xl cpupool-migrate"]
    if plan.neighbour_domid is not None:
        if plan.pin:
            s += [f"xl vcpu-pin {plan.neighbour_domid} all {plan.pin} || "
                  f"fail xl vcpu-pin neighbour"]
        if pool:
            s += [f"xl cpupool-migrate {plan.neighbour_domid} {pool} || "
                  f"fail xl cpupool-migrate neighbour"]
        s += [f"say neighbour $(xl vcpu-list {plan.neighbour_domid} | tail -n 1 | "
              f"tr -s ' ')"]
    if pool:
        # Read back again now that the domU exists: its pool should count one domain.
        s += ["say cpupool $(xl cpupool-list | tail -n +2 | tr -s ' ' | tr '\\n' ';')"]
    for key, args, readback in plan.xl_settings:
        s += [f"if xl {args} > /irqlab/{key}.log 2>&1; then say {key} ok "
              f"$(xl {readback} | tr -s ' ' | tr '\\n' ';'); else say {key} "
              f"failed $(cat /irqlab/{key}.log | tr '\\n' ' '); fi"]
    if plan.rtds_period_ns or plan.rtds_budget_ns:
        # xl sets RTDS per vCPU and wants both values; a missing one is Xen's default
        # (period 10 ms, budget 4 ms), the budget capped at the period.
        period = plan.rtds_period_ns or RTDS_DEFAULT_PERIOD_NS
        budget = min(plan.rtds_budget_ns or RTDS_DEFAULT_BUDGET_NS, period)
        # extratime off: a strict periodic server, the one `irqlab model rtds` bounds.
        args = f" -v all -p {_us(period)} -b {_us(budget)} -e 0"
        s += [f"if xl sched-rtds -d {plan.domu_ref}{args} > /irqlab/rtds.log 2>&1; then "
              f"say rtds ok $(xl sched-rtds -d {plan.domu_ref} -v all | tail -n 1 | "
              f"tr -s ' '); else say rtds failed $(cat /irqlab/rtds.log | tr '\\n' ' '); fi"]
    s += [f"say vcpu $(xl vcpu-list {plan.domu_ref} | tail -n 1 | tr -s ' ')",
          ": > /irqlab/cpu-pids"]
    # CPU time of dom0's load processes (utime + stime, clock ticks of 1/100 s) and the
    # console load's bytes: reported every 0.5 s, since the host stops QEMU as soon as
    # it has the probe's last record (the last report before that is the one kept).
    # Every 2 s was too seldom: a 1,500-sample run at 1 ms could end before the first
    # report (dom0_cpu_s 0 though dom0 burned CPU, twice at host load 6).
    s += ["report_loads() { ticks=0; for p in $(cat /irqlab/cpu-pids); do "
          "set -- $(sed 's/.*) //' /proc/$p/stat 2>/dev/null); "
          "[ $# -gt 13 ] && ticks=$((ticks + ${12} + ${13})); done; "
          "say loads cpu_ticks=$ticks console_bytes=$(cat /irqlab/console-bytes "
          "2>/dev/null || echo 0) hypercall_loops=$(cat /irqlab/hcall-count 2>/dev/null "
          "|| echo 0) uptime_cs=$(uptime_cs); }"]
    for load in plan.loads:
        s += [f"say {load.name} start", _load_script(load)]
    if plan.loads:
        s += ["( while :; do sleep 0.5; report_loads; done ) &"]
    if plan.probe_domid is None:
        s += ["xl unpause $domid || fail xl unpause"]
    s += [
        "say unpaused uptime_cs=$(uptime_cs)",
        f"ringfwd $domid {plan.arch.ring_gpa:#x} $shm {RINGFWD_POLL_US} 2> /irqlab/ringfwd.log || "
        "fail ringfwd: $(tail -n 2 /irqlab/ringfwd.log | tr '\\n' ' ')",
        "say ringfwd $(tail -n 1 /irqlab/ringfwd.log)",
    ]
    if plan.trace is not None:
        # SIGINT: xentrace copies what Xen still holds, then exits; trcfwd sees EOF.
        # (The host may stop QEMU first, once it has the probe's last record: the
        # capture then ends at the channel's last bytes.)
        s += ["kill -INT $(cat /irqlab/xentrace.pid); wait $(cat /irqlab/trcfwd.pid)",
              "say xentrace $(tail -n 1 /irqlab/trcfwd.log) "
              "$(tail -n 1 /irqlab/xentrace.log | tr -s ' ')"]
    s += [
        "report_loads",
        "say end uptime_cs=$(uptime_cs)",
        # The host stops QEMU once it has the last record; idle until then.
        "while :; do sleep 3600; done",
    ]
    return "\n".join(s) + "\n"


def parse_reports(text: str) -> list[tuple[str, str]]:
    """``irqlab-dom0: KEY REST`` console lines -> [(key, rest)], in order."""
    return marked_lines(text, REPORT_MARK)


def kv(rest: str) -> dict[str, str]:
    """'a=1 b=2 junk' -> {'a': '1', 'b': '2'}."""
    return dict(w.split("=", 1) for w in rest.split() if "=" in w)


def build_dom0_initramfs(dest: Path, plan: Dom0Plan, probe: Path,
                         cache: Path | None = None) -> Path:
    """Write dom0's initramfs (uncompressed newc); FileNotFoundError names the fix."""
    arch = plan.arch
    cache = cache or dom0_cache_dir(arch.deb_arch)
    root = cache / "root"
    if not (cache / ".complete").exists():
        raise FileNotFoundError(f"no dom0 toolstack cached: {fetch_hint(arch.deb_arch)}")
    ringfwd = build_ringfwd(cache, arch)
    helpers = {"ringfwd": ringfwd}
    names = XEN_TOOLS
    if plan.trace is not None:
        helpers["trcfwd"] = build_dom0_tool(cache, arch, TRCFWD_SRC)
        names += ("xentrace",)
    tools = [root / XEN_BIN_DIR / t for t in names] + list(helpers.values())
    search = [root / d for d in arch.lib_dirs] + [Path(d) for d in arch.host_lib_dirs]
    libs = resolve_libs(tools, search)
    # glibc dlopen()s libgcc_s for pthread_cancel, which xl uses: not a DT_NEEDED.
    libs.update({n: p.resolve() for n in DLOPENED for p in
                 [next((d / n for d in search if (d / n).exists()), None)] if p})
    members: list[tuple[str, int, bytes]] = []
    dirs = ["bin", "dev", "proc", "sys", "tmp", "lib", "lib64", "lib/modules",
            arch.image_lib_dir, "usr", "usr/lib", "usr/lib/xen-4.17", XEN_BIN_DIR,
            "irqlab", "etc", "etc/xen", "var", "run"]
    for d in dirs:
        members.append((d, stat.S_IFDIR | 0o755, b""))
    members.append(("dev/console", stat.S_IFCHR | 0o600, b""))

    def add(name: str, data: bytes, mode: int = 0o755) -> None:
        members.append((name, stat.S_IFREG | mode, data))

    add("init", init_script(plan).encode())
    add("etc/xen/xl.conf", b"# irqlab: xl's defaults\n", 0o644)
    add("bin/busybox", (root / "bin/busybox").read_bytes())
    helper_names = {path: name for name, path in helpers.items()}
    for t in tools:
        add(f"{XEN_BIN_DIR}/{helper_names.get(t, t.name)}", t.read_bytes())
    for soname, path in libs.items():
        add(f"{arch.image_lib_dir}/{soname}", path.read_bytes())
    interp = (root / arch.interp.lstrip("/")) if arch.interp_in_cache else Path(arch.interp)
    add(arch.interp.lstrip("/"), interp.resolve().read_bytes())
    for m in XEN_MODULES:
        found = sorted((cache / "modules").rglob(f"{m}.ko"))
        if not found:
            raise FileNotFoundError(f"module {m}.ko missing in {cache / 'modules'}: "
                                    f"{fetch_hint(arch.deb_arch)}")
        add(f"lib/modules/{m}.ko", found[0].read_bytes(), 0o644)
    add("irqlab/probe.elf", probe.read_bytes(), 0o644)
    add("irqlab/probe.cfg", xl_config(plan, pin=plan.pin,
                                      pool="irqlab-pool" if plan.cpupool_sched else None)
        .encode(), 0o644)
    big = next((ld for ld in plan.loads if ld.kind == "domain-create"), None)
    if big is not None:
        # The created domain runs the probe sleeping (1 s ticks): its cost is the
        # creation (memory population), not what it runs.
        add("irqlab/big.cfg", xl_config(plan, "irqlab-big", big.params["size_bytes"] >> 20,
                                        "period_ns=1000000000 idle=hlt samples=0")
            .encode(), 0o644)
    return write_newc(dest, members)


def dom0_kernel() -> Path:
    """Debian's amd64 kernel, the one whose modules scripts/fetch-xen-dom0.sh took."""
    path = kernel_cache_dir() / "vmlinuz"
    if not path.exists():
        raise FileNotFoundError(f"no Linux kernel in {kernel_cache_dir()}: run "
                                f"./setup.sh --install-only")
    return path


def reports_metadata(text: str) -> dict[str, Any]:
    """What dom0 said it did, for the run's metadata (``xen.dom0``)."""
    reps = parse_reports(text)
    out: dict[str, Any] = {"reports": [f"{k} {r}".strip() for k, r in reps][-200:]}
    for key, rest in reps:
        if key == "domu":
            out["domu"] = kv(rest)
        elif key == "rtds":
            out["rtds"] = rest
        elif key == "vcpu":
            out["vcpu_list"] = rest
        elif key == "neighbour":
            out["neighbour_vcpu_list"] = rest
        elif key in ("cpupool", *XL_SCHED_KEYS):
            out[key] = rest
        elif key == "xl_info":
            out["xl_info"] = rest
        elif key == "fatal":
            out["fatal"] = rest
        elif key == "ready":
            out["ready_uptime_cs"] = kv(rest).get("uptime_cs")
        elif key == "unpaused":
            out["unpaused_uptime_cs"] = kv(rest).get("uptime_cs")
        elif key == "loads":
            out["loads"] = kv(rest)
        elif key == "ringfwd":
            out["ringfwd"] = rest
        elif key == "xentrace" and rest.startswith("started"):
            out["xentrace_started"] = kv(rest)
        elif key == "xentrace":
            out["xentrace"] = rest
    return out
