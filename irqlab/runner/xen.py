"""The arm64 probe as a Xen guest, Xen running in QEMU ``virt`` (``--target xen``).

QEMU boots the hypervisor (``-M virt,virtualization=on``: Xen at EL2) with a device tree
made from QEMU's own plus Xen's ``/chosen`` nodes (irqlab.runner.fdt): the probe is either
dom0 (a ``multiboot,kernel`` module directly under /chosen) or a dom0less domU (a
``xen,domain`` node; Xen's docs/misc/arm/dom0less.md), and an optional neighbour is a
second dom0less domU on the same physical CPU (QEMU gets one CPU: "2 vCPUs on 1 pCPU").
Modules are loaded by ``-device loader`` at the addresses the tree names.

The host cannot map a Xen guest's RAM, so samples come back through the probe's console
sink (docs/arm64.md): dom0 writes with ``HYPERVISOR_console_io`` (lines appear as is),
a dom0less domU through its vpl011 (Xen prints them as ``(XEN) DOMn: ...``). The serial
stream carries Xen's own lines and the neighbour's too, so :meth:`XenGuest.serial_read`
passes on only the measured domain's lines; nothing else reaches the frame decoder.

x86-64 (``--arch x86_64``, dom0 only): QEMU ``q35`` with an emulated Intel IOMMU (Xen
4.17 refuses a PVH dom0 without one) boots Debian's amd64 Xen through multiboot, and the
x86 probe ELF, passed as the first multiboot module, becomes a **PVH dom0** (``dom0=pvh``;
no dom0 Linux). The probe finds Xen by its CPUID leaves and writes its frames with
``HYPERVISOR_console_io`` through the hypercall page; Xen prints them unprefixed on COM1.
Xen lets dom0 reach QEMU's isa-debug-exit port, so the probe ends the run itself (QEMU
exits 33 as without Xen). TCG only: Xen needs VT-x/AMD-V in its VM (nested
virtualisation), which this machine's KVM does not offer.

x86-64 with a Linux dom0 (``--xen-dom0 linux``): Xen boots Debian's kernel as a PV dom0
with irqlab's initramfs (irqlab.runner.xen_dom0), which ``xl create``s the probe as a
PVH domU and forwards its ring to the host through an ivshmem-plain device backed by a
host memfd (:attr:`XenGuest.mem_path`). dom0's status lines (``irqlab-dom0: ...``) are
collected from the console as they pass (:meth:`XenGuest.dom0_metadata`).
arm64 with a Linux dom0: the same on ``virt`` with Debian's arm64 kernel and dom0 as
``guest-loader`` boot modules (irqlab.runner.xen_dom0_arm64), ivshmem on virt's PCIe.

A MeasuredProcess (irqlab.runner.process) like QemuGuest, with its ``config``, so
irqlab.measure runs it like any target.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from irqlab.runner.accel import AccelPlan
from irqlab.runner.fdt import Domain, FdtError, Module, xen_tree
from irqlab.runner.machines import DEBUG_EXIT_PORT
from irqlab.runner.process import MeasuredProcess
from irqlab.runner.qemu import GuestConfig, base_argv, memfd_backend, probe_cmdline
from irqlab.runner import xen_dom0_arm64 as arm64_dom0
from irqlab.runner.xen_dom0 import (REPORT_MARK, TRACE_SHM_BYTES, Dom0Plan,
                                    Dom0TraceChannel, build_dom0_initramfs, dom0_kernel,
                                    reports_metadata)

XEN_SCHEDS = ("credit", "credit2", "rtds", "null")
XEN_DOMAINS = ("dom0", "domU", "dom0less")
NEIGHBOURS = ("none", "cpu", "console", "idle")
XEN_SERIES = "4.17"
BINARY_ENV = "IRQLAB_XEN"          # a default --xen-binary

# QEMU machine for Xen: 1 GiB (Xen, dom0 64 MiB, domUs 64 MiB each, modules), one CPU so
# the measured domain and its neighbour share a physical CPU as in seed 000.
QEMU_MEMORY_MIB = 1024
QEMU_CPUS = 1
CONSOLE_ARGS = "console=dtuart dtuart=/pl011@9000000"   # QEMU virt's PL011 (its DT path)
# x86: q35 + intel-iommu (a PVH dom0 needs an IOMMU); interrupt remapping off, as Xen
# 4.17 under TCG was only seen to boot that way. COM1 is Xen's console.
X86_QEMU_MEMORY_MIB = 512
X86_CONSOLE_ARGS = "console=com1 com1=115200,8n1"
X86_MACHINE = ["-M", "q35", "-device", "intel-iommu,intremap=off"]
# -smap,-smep: QEMU's TCG `max` CPU with them crashes PVH/PV dom0s (environment notes).
X86_TCG_CPU = ["-accel", "tcg", "-cpu", "max,-smap,-smep"]
# Debian architecture names and hypervisor image names in the cache (scripts/fetch-xen.sh).
DEB_ARCH = {"arm64": "arm64", "x86_64": "amd64"}
XEN_IMAGE = {"arm64": f"xen-{XEN_SERIES}-arm64", "amd64": f"xen-{XEN_SERIES}-amd64.elf"}
DOM0_MEM = "64M"
LINUX_DOM0_MEM = "384M"             # Debian's kernel + busybox + xl: ~9 s to a shell
LINUX_DOM0_SLACK_MIB = 256          # Xen itself, the probe domU, rounding
DOM0_CMDLINE = "console=hvc0 earlyprintk=xen quiet"
# With --trace, how long the host waits after the last sample for dom0 to finish the
# capture (xentrace copies what Xen still holds, then trcfwd ends the channel) before it
# stops QEMU: a few hundred ms when quiet; CI once saw a busy TCG host need more.
TRACE_END_WAIT_S = 30.0
SHM_BYTES = 4 << 20                 # ivshmem BAR: the probe's 2 MiB + 4 KiB ring, pow2
# Modules in guest-physical RAM, clear of Xen (QEMU loads its Image near RAM base) and of
# the tree QEMU places at the top of RAM; 2 MiB apart (the probe is ~22 KiB).
MODULE_BASE = 0x4A000000
MODULE_STRIDE = 0x200000

# Neighbour noise modes: the probe itself with other boot parameters (it has no
# dedicated noise modes; a hypercall loop would need one, see docs/xen.md).
NEIGHBOUR_ARGS = {
    # Busy polling between its own 1 ms ticks: the vCPU never blocks, burns its pCPU.
    "cpu": probe_cmdline(1_000_000, "poll"),
    # The console sink at a 50 us period: a frame (~100 bytes, one vpl011 trap per
    # byte) every 16 samples, as fast as Xen's console takes them.
    "console": probe_cmdline(50_000, "wfi", sink="console"),
    # A domain that only sleeps: a scheduled-but-idle vCPU (1 s ticks).
    "idle": probe_cmdline(1_000_000_000, "wfi"),
}

# Xen console lines that end a run at once: the hypervisor died or ignored the request.
# (Xen falls back to its default scheduler when the requested one is not built in: the
# figures would then not be what was asked for.)
_FATAL = (re.compile(rb"Panic on CPU \d+:[^\n]*\n[^\r\n]*"),
          re.compile(rb"Could not find scheduler[^\r\n]*"))
_VERSION_RE = re.compile(r"\(XEN\) Xen version (\S+) ([^\r\n]*)")
_SCHED_RE = re.compile(r"\(XEN\) Using scheduler: ([^\r\n]*?)\s*\((\w+)\)")
_CONFIG_SCHED_RE = re.compile(r"^CONFIG_SCHED_(CREDIT2|CREDIT|RTDS|NULL|ARINC653)=y$", re.M)


def xen_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "irqlab" / "xen"


@dataclass(frozen=True)
class XenBinary:
    """A hypervisor image and what we know of its build before booting it."""

    path: Path
    config: Path | None            # the Kconfig .config it was built with, if known
    package_version: str | None    # Debian version (cache directory), if known

    def schedulers(self) -> list[str] | None:
        """Schedulers built in (from the .config), None when unknown."""
        if self.config is None or not self.config.is_file():
            return None
        names = _CONFIG_SCHED_RE.findall(self.config.read_text(errors="replace"))
        return sorted({n.lower() for n in names})

    def metadata(self) -> dict[str, Any]:
        data = self.path.read_bytes() if self.path.is_file() else b""
        return {"path": str(self.path), "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data), "config": str(self.config) if self.config else None,
                "package_version": self.package_version,
                "schedulers_built": self.schedulers()}


def _sibling_config(path: Path) -> Path | None:
    """Debian ships ``xen-4.17-arm64.config`` beside the image; a build tree has
    ``.config`` beside ``xen``."""
    for cand in (path.with_name(path.name + ".config"),
                 path.with_name(path.name.split(".")[0] + ".config"),
                 path.with_name(path.name.removesuffix(".elf") + ".config"),
                 path.with_name(".config")):
        if cand.is_file():
            return cand
    return None


def binary_from_path(path: Path) -> XenBinary:
    version = None
    parts = path.resolve().parts
    if "xen" in parts:          # ~/.cache/irqlab/xen/<version>/<arch>/boot/...
        i = len(parts) - 1 - parts[::-1].index("xen")
        if i + 1 < len(parts):
            version = parts[i + 1]
    return XenBinary(path, _sibling_config(path), version)


def cached_binaries(arch: str = "arm64") -> list[XenBinary]:
    """Hypervisors in the cache: the Debian package first, then local rebuilds.
    ``arch`` is Debian's name (arm64, amd64)."""
    root = xen_cache_dir()
    if not root.is_dir():
        return []
    out = []
    for vdir in sorted(root.iterdir()):
        img = vdir / arch / "boot" / XEN_IMAGE.get(arch, f"xen-{XEN_SERIES}-{arch}")
        if vdir.is_symlink() or not (vdir / arch / ".complete").exists() or not img.is_file():
            continue
        out.append(binary_from_path(img))
    out.sort(key=lambda b: (b.package_version or "").endswith("-rtds"))
    return out


def find_xen(sched: str, arch: str = "arm64") -> XenBinary | None:
    """The hypervisor for ``sched``: $IRQLAB_XEN, else the cached Debian build when it has
    the scheduler, else a cached rebuild that has it (scripts/build-xen-rtds.sh)."""
    env = os.environ.get(BINARY_ENV)
    if env:
        return binary_from_path(Path(env))
    cands = cached_binaries(arch)
    for b in cands:
        scheds = b.schedulers()
        if scheds is None or sched in scheds:
            return b
    return cands[0] if cands else None


def fetch_hint(arch: str = "arm64") -> str:
    return ("run scripts/fetch-xen.sh (./setup.sh --install-only does) to fetch Debian's "
            f"xen-hypervisor-4.17-{arch} into " + str(xen_cache_dir()) + ", or pass "
            "--xen-binary PATH")


def parse_opts(items: list[str]) -> dict[str, str]:
    """``--xen-opt K=V`` (or a bare flag K) -> ordered dict; ValueError on junk."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, val = item.partition("=")
        bad_val = any(c.isspace() for c in val)
        if not key or not re.fullmatch(r"[A-Za-z0-9_.\-]+", key) or bad_val:
            raise ValueError(f"--xen-opt {item!r}: expected KEY=VALUE (no spaces), e.g. "
                             f"vwfi=native")
        out[key] = val if sep else ""
    return out


def xen_cmdline(domain: str, sched: str, opts: dict[str, str], arch: str = "arm64",
                linux_dom0: bool = False) -> str:
    """Xen's command line: console, scheduler, dom0 memory; --xen-opt last (and wins).
    On x86 the probe as dom0 is a PVH one (the probe ELF), which needs ``dom0=pvh``; a
    Linux dom0 is PV (Xen's default)."""
    base: dict[str, str] = {}
    if arch == "x86_64" and not linux_dom0:
        base["dom0"] = "pvh"
    for word in (X86_CONSOLE_ARGS if arch == "x86_64" else CONSOLE_ARGS).split():
        k, _, v = word.partition("=")
        base[k] = v
    base["sched"] = sched
    # Xen scrubs free RAM in its idle loop after boot: under TCG that takes ~2.5 s for
    # QEMU's 1 GiB and adds ~3 ms to every tick meanwhile (measured here). A board has
    # finished that long before anyone measures; --xen-opt bootscrub=idle brings it back.
    base["bootscrub"] = "false"
    if linux_dom0:
        # Arm's dom0_mem is a size only (no max:): Xen allocates it 1:1 at boot.
        base["dom0_mem"] = (f"{LINUX_DOM0_MEM},max:{LINUX_DOM0_MEM}" if arch == "x86_64"
                            else LINUX_DOM0_MEM)
        base["dom0_max_vcpus"] = "1"
    elif domain == "dom0":
        base["dom0_mem"] = f"{DOM0_MEM},max:{DOM0_MEM}" if arch == "x86_64" else DOM0_MEM
        base["dom0_max_vcpus"] = "1"
    base.update(opts)
    return " ".join(f"{k}={v}" if v != "" else k for k, v in base.items())


@dataclass
class XenOptions:
    """What ``--target xen`` adds to a run (cmd_run's --xen-* and --neighbour)."""

    domain: str = "domU"
    sched: str = "credit2"
    opts: dict[str, str] = field(default_factory=dict)
    binary: Path | None = None
    neighbour: str = "none"


def _keep_domain(domid: int) -> Callable[[bytes], bool]:
    """Predicate: does a console line belong to domain ``domid``?"""
    if domid == 0:
        # dom0's console_io writes reach the UART unprefixed; Xen's own and domUs' lines
        # carry "(XEN)" or "(dN)".
        return lambda line: not (line.startswith(b"(XEN)") or re.match(rb"\(d\d+\)", line))
    tags = (b"DOM%d: " % domid, b"(d%d) " % domid)
    return lambda line: any(t in line for t in tags)


_FACTS = {"version": b"(XEN) Xen version ", "scheduler": b"(XEN) Using scheduler: "}


class _DomainStream:
    """A console stream reduced to one domain's lines (what ConsoleReader reads)."""

    def __init__(self, raw: Callable[[int], tuple[bytes, int, int]], domid: int,
                 neighbour: int | None = None) -> None:
        self._raw = raw
        self._keep = _keep_domain(domid)
        # The neighbour's lines are counted (proof it ran, and how much it printed).
        self._theirs = _keep_domain(neighbour) if neighbour is not None else None
        self.neighbour_lines = 0
        self.neighbour_bytes = 0
        # Boot facts, caught as they pass (the kept console tail is bounded: a console
        # flood pushes Xen's banner out of it).
        self.facts: dict[str, str] = {}
        self.started = time.monotonic()
        self.first_xen_s: float | None = None      # QEMU start -> first "(XEN)" line
        self.first_frame_s: float | None = None    # QEMU start -> the probe's first frame
        self._raw_pos = 0
        self._partial = b""
        self._out = 0
        self.reports: list[str] = []       # dom0's "irqlab-dom0:" lines, all of them
        self.dom0_s: dict[str, float] = {}  # QEMU start -> dom0 ready, domU created

    def read(self, _pos: int) -> tuple[bytes, int, int]:
        data, self._raw_pos, dropped = self._raw(self._raw_pos)
        if dropped:
            self._partial = b""
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()[-4096:]
        out = b"".join(line + b"\n" for line in lines if self._keep(line))
        if lines:
            self._note(lines, out)
        if self._theirs is not None:
            theirs = [line for line in lines if self._theirs(line)]
            self.neighbour_lines += len(theirs)
            self.neighbour_bytes += sum(len(line) + 1 for line in theirs)
        self._out += len(out)
        return out, self._out, dropped

    def _note(self, lines: list[bytes], out: bytes) -> None:
        now = time.monotonic() - self.started
        if self.first_xen_s is None and any(ln.startswith(b"(XEN)") for ln in lines):
            self.first_xen_s = now
        if self.first_frame_s is None and b"~IQH" in out:
            self.first_frame_s = now
        mark0 = REPORT_MARK.encode()
        for line in lines:
            if mark0 in line and len(self.reports) < 5000:
                self.reports.append(line.decode("utf-8", "replace").strip())
                for key, mark in ((b"dom0_ready", b" ready "), (b"domu_created", b" domu ")):
                    if mark in line:
                        self.dom0_s.setdefault(key.decode(), now)
            for key, mark in _FACTS.items():
                if key not in self.facts and line.startswith(mark):
                    self.facts[key] = line.decode("utf-8", "replace").strip()
            if (self._theirs is not None and "neighbour" not in self.facts
                    and self._theirs(line) and b"irqlab-probe" in line):
                self.facts["neighbour"] = line.decode("utf-8", "replace").strip()


@dataclass
class XenGuest(MeasuredProcess, Dom0TraceChannel):
    """QEMU running Xen with the probe (dom0 or a dom0less domU) and a neighbour."""

    config: GuestConfig
    plan: AccelPlan
    xen: XenOptions
    name: str = "irqlab"
    binary: XenBinary | None = None
    cmdline: str = ""
    tree_dts: str = ""
    fatal: str | None = None
    dom0: Dom0Plan | None = None        # a Linux dom0 (--xen-dom0 linux)
    pcpus: int = 1
    _stream: _DomainStream | None = None
    _trace_fd: int = -1                 # the xentrace channel's memfd (dom0 plan.trace)

    @property
    def x86(self) -> bool:
        return self.config.arch == "x86_64"

    @property
    def xl_probe(self) -> bool:
        """dom0 creates the probe's domain with xl (after the dom0less ones)."""
        return self.dom0 is not None and self.dom0.probe_domid is None

    @property
    def measured_domid(self) -> int:
        """dom0less domains are numbered from 1 in /chosen order, the probe's first; an
        xl-created one comes after them (dom0 reports its actual domid)."""
        if self.xen.domain == "dom0":
            return 0
        return 1 + (self.xen.neighbour != "none") if self.xl_probe else 1

    @property
    def neighbour_domid(self) -> int | None:
        if self.xen.neighbour == "none":
            return None
        return 1 if self.xen.domain == "dom0" or self.xl_probe else 2

    def _base_argv(self) -> list[str]:
        """QEMU's common options (irqlab.runner.qemu.base_argv) and this machine's: the
        start of the run's argv, and what QEMU is asked to dump its device tree for."""
        memory = X86_QEMU_MEMORY_MIB if self.x86 else QEMU_MEMORY_MIB
        base = base_argv(self.config.machine.qemu, self.name, memory, smp=QEMU_CPUS)
        if self.x86:
            # SeaBIOS (QEMU's default): qboot does not boot a multiboot Xen on q35.
            return base + X86_MACHINE + X86_TCG_CPU
        return base + self._arm64_machine()

    def _arm64_machine(self) -> list[str]:
        """virt with EL2 for Xen, and the accelerator and CPU."""
        base = ["-M", f"virt,virtualization=on,gic-version={self.config.gic or 3}"]
        if self.plan.accel == "kvm":
            # Xen needs EL2 in the guest: KVM with nested virtualisation (arm64 host).
            return base + ["-accel", "kvm", "-cpu", "host"]
        return base + ["-accel", "tcg", "-cpu", "cortex-a57"]

    def _modules(self, base: int = MODULE_BASE, dom0_os: list[Module] | None = None
                 ) -> tuple[list[Module], list[Domain], list[tuple[Path, int]]]:
        """dom0's modules, the dom0less domains and the images QEMU loads (path,
        address), from ``base`` up. ``dom0_os``: a Linux dom0's kernel and ramdisk (the
        caller loads them); the probe is then a dom0less domU only with --xen-domain
        dom0less, and waits at its start gate for dom0's ringfwd."""
        probe = self.config.probe_path
        size = probe.stat().st_size
        module = Module(base, size, self.config.cmdline())
        if dom0_os is not None:
            module.bootargs += " gate=1"
        loads = [] if self.xl_probe else [(probe, base)]
        dom0 = dom0_os or ([module] if self.xen.domain == "dom0" else [])
        domains = [] if self.xen.domain == "dom0" or self.xl_probe else [
            Domain("domU1", module, memory_kib=self.domu_memory_kib)]
        if self.xen.neighbour != "none":
            addr = base + MODULE_STRIDE
            loads.append((probe, addr))
            name = f"domU{len(domains) + 1}"
            domains.append(Domain(name, Module(addr, size, NEIGHBOUR_ARGS[self.xen.neighbour])))
        return dom0, domains, loads

    @property
    def domu_memory_kib(self) -> int:
        """The probe's domU memory: dom0's plan's (xl's memory=), else Domain's."""
        return (self.dom0.domu_memory_mib << 10 if self.dom0 is not None
                else Domain.memory_kib)

    def build(self, workdir: Path) -> list[str]:
        """Resolve the hypervisor, write the tree, return QEMU's argv."""
        deb_arch = DEB_ARCH.get(self.config.arch, self.config.arch)
        if self.xen.binary is not None:
            self.binary = binary_from_path(self.xen.binary)
        else:
            self.binary = find_xen(self.xen.sched, deb_arch)
        if self.binary is None or not self.binary.path.is_file():
            raise FileNotFoundError(f"no Xen hypervisor: {fetch_hint(deb_arch)}")
        self.cmdline = xen_cmdline(self.xen.domain, self.xen.sched, self.xen.opts,
                                   self.config.arch, linux_dom0=self.dom0 is not None)
        if self.dom0 is not None:
            return self._build_linux_dom0(workdir)
        if self.x86:
            return self._build_x86(workdir)
        dom0, domains, loads = self._modules()
        return self._tree_argv(self._base_argv(), workdir, dom0, domains, loads)

    def _tree_argv(self, base: list[str], workdir: Path, dom0: list[Module],
                   domains: list[Domain], loads: list[tuple[Path, int]],
                   devices: tuple[str, ...] = ()) -> list[str]:
        """QEMU's argv booting Xen with a device tree of our own (QEMU drops its
        guest-loader nodes then): the modules under /chosen, loaded where it says.
        ``devices`` (PCI devices on our memfds) are not in the tree: QEMU dumps it
        without them, as it could not open the memfds."""
        try:
            dtb, self.tree_dts = xen_tree(base, workdir, self.cmdline, dom0, domains)
        except FdtError as exc:
            raise OSError(str(exc)) from None
        argv = (base + list(devices) + self.config.extra_qemu_args
                + ["-kernel", str(self.binary.path), "-dtb", str(dtb)])
        for path, addr in loads:
            argv += ["-device", f"loader,file={path},addr={addr:#x},force-raw=on"]
        return argv

    def _build_x86(self, workdir: Path) -> list[str]:
        """QEMU's argv for x86: Xen by multiboot, the probe ELF as dom0's module."""
        if self.xen.domain != "dom0" or self.xen.neighbour != "none":
            raise OSError("x86 Xen runs the probe as a PVH dom0 only (a domU or a "
                          "neighbour needs xl in a dom0 Linux)")
        # QEMU's multiboot -initrd takes "file cmdline" and splits modules on commas:
        # a copy under a plain name keeps any probe path working.
        probe = workdir / "irqlab-probe.elf"
        shutil.copyfile(self.config.probe_path, probe)
        module = f"{probe} {self.config.cmdline()}"
        if "," in module:
            raise OSError(f"probe command line {self.config.cmdline()!r} has a comma, "
                          f"which QEMU's multiboot -initrd cannot pass")
        return (self._base_argv()
                + ["-device", f"isa-debug-exit,iobase={DEBUG_EXIT_PORT:#x},iosize=0x04"]
                + self.config.extra_qemu_args
                + ["-kernel", str(self.binary.path), "-append", self.cmdline,
                   "-initrd", module])

    def qemu_memory_mib(self) -> int:
        """dom0 + the probe domU + any domain dom0 creates + Xen's slack."""
        assert self.dom0 is not None
        big = max((ld.params.get("size_bytes", 0) for ld in self.dom0.loads), default=0)
        neighbour_mib = Domain.memory_kib >> 10 if self.xen.neighbour != "none" else 0
        return (int(LINUX_DOM0_MEM.rstrip("M")) + self.dom0.domu_memory_mib
                + neighbour_mib + (big >> 20) + LINUX_DOM0_SLACK_MIB)

    def _build_linux_dom0(self, workdir: Path) -> list[str]:
        """QEMU's argv for Xen + Debian's Linux dom0 + irqlab's initramfs, with the
        ivshmem-plain device dom0 forwards the probe's ring into."""
        assert self.dom0 is not None
        self.dom0.neighbour_domid = self.neighbour_domid
        initrd = build_dom0_initramfs(workdir / "dom0.cpio", self.dom0,
                                      self.config.probe_path)
        base = base_argv(self.config.machine.qemu, self.name, self.qemu_memory_mib(),
                         smp=self.pcpus)
        shm = (memfd_backend("irqlab-shm", str(SHM_BYTES), self.mem_fd)
               + ["-device", "ivshmem-plain,memdev=irqlab-shm"])
        if self._trace_fd >= 0:
            # --trace: a second ivshmem-plain device, xentrace's channel to the host
            # (trcfwd in dom0 writes it; irqlab.xen.capture reads the memfd).
            shm += (memfd_backend("irqlab-xtr", str(TRACE_SHM_BYTES), self._trace_fd)
                    + ["-device", "ivshmem-plain,memdev=irqlab-xtr"])
        if not self.x86 and (self.xen.neighbour != "none" or not self.xl_probe):
            # arm64 with dom0less domains beside dom0 (the probe, a neighbour): one tree
            # holds them all, dom0's kernel and ramdisk included.
            kernel = arm64_dom0.dom0_kernel().resolve()
            os_modules, end = arm64_dom0.dom0_modules(kernel, DOM0_CMDLINE, initrd)
            dom0, domains, loads = self._modules(end, os_modules)
            loads = [(kernel, os_modules[0].addr), (initrd, os_modules[1].addr)] + loads
            return self._tree_argv(base + self._arm64_machine(), workdir, dom0, domains,
                                   loads, tuple(shm))
        if not self.x86:
            # arm64: Xen is the Image QEMU boots; dom0's kernel and initramfs are boot
            # modules described under /chosen (irqlab.runner.xen_dom0_arm64).
            return (base + self._arm64_machine() + shm + self.config.extra_qemu_args
                    + ["-kernel", str(self.binary.path), "-append", self.cmdline]
                    + arm64_dom0.module_argv(arm64_dom0.dom0_kernel().resolve(),
                                             DOM0_CMDLINE, initrd))
        kernel = dom0_kernel().resolve()
        return (base + X86_MACHINE + X86_TCG_CPU + shm + self.config.extra_qemu_args
                + ["-kernel", str(self.binary.path), "-append", self.cmdline,
                   "-initrd", f"{kernel} {DOM0_CMDLINE},{initrd}"])

    def start(self) -> None:
        """Build the tree and start QEMU; raises OSError with the reason."""
        if not self.config.probe_path.exists():
            raise FileNotFoundError(
                f"{self.config.arch} probe {self.config.probe_path} is not built: run "
                f"`make -C probes/guest` (or the README's set-up command)")
        if shutil.which(self.config.machine.qemu) is None:
            raise FileNotFoundError(f"{self.config.machine.qemu} not found: "
                                    f"{self.config.machine.install_hint}")
        if self.dom0 is not None:
            self._create_memfd("irqlab-xen-ring", SHM_BYTES)
            if self.dom0.trace is not None:
                self._trace_fd = os.memfd_create("irqlab-xentrace", 0)
                os.ftruncate(self._trace_fd, TRACE_SHM_BYTES)
        self._spawn(self.build(self._workdir("irqlab-xen-")),
                    (self._trace_fd,) if self._trace_fd >= 0 else ())
        self._stream = _DomainStream(self._child.stdout.read_from, self.measured_domid,
                                     self.neighbour_domid)

    @property
    def trace_mem_path(self) -> str:
        if self._trace_fd < 0:
            raise OSError("this Xen run has no xentrace channel (a Linux dom0 with "
                          "--trace has one)")
        return f"/proc/self/fd/{self._trace_fd}"

    def trace_clock_hz(self) -> int | None:
        khz = ((self.dom0_metadata() or {}).get("xentrace_started") or {}).get("cpu_khz")
        return int(khz) * 1000 if khz and khz.isdigit() else None

    def stop(self, timeout_s: float = 5.0) -> int | None:
        if self._trace_fd >= 0:
            self._await_trace_end()
        code = super().stop(timeout_s)
        if self._trace_fd >= 0:
            os.close(self._trace_fd)
            self._trace_fd = -1
        return code

    def _await_trace_end(self) -> None:
        """Let dom0 finish the xentrace capture before QEMU stops (else Xen's last
        buffers, and ``complete``, are lost): only when the probe finished (its ring,
        as dom0 forwards it, says done) and QEMU still runs, until dom0 reports the
        capture's end, at most TRACE_END_WAIT_S. A run stopped early does not wait."""
        def said_done() -> bool:
            meta = self.dom0_metadata() or {}
            return "xentrace" in meta or "fatal" in meta
        self._await_after_done(said_done, TRACE_END_WAIT_S)

    # -- the MeasuredProcess interface, where Xen differs ----------------------------------

    @property
    def mem_path(self) -> str:
        if self.dom0 is not None and self.mem_fd >= 0:
            return f"/proc/self/fd/{self.mem_fd}"     # dom0's copy of the probe's ring
        raise OSError("a Xen guest's RAM is not mapped by the host: use the console sink")

    def dom0_metadata(self) -> dict[str, Any] | None:
        """What the Linux dom0 reported doing (None without one): the hooks' proof."""
        if self.dom0 is None:
            return None
        if self._stream is not None and self._child is not None:
            self._stream.read(0)
        return reports_metadata("\n".join(self._stream.reports if self._stream else []))

    def exit_code(self) -> int | None:
        if self.dom0 is not None and self._stream is not None and self._child is not None:
            # Nobody reads the console for samples here: keep dom0's reports flowing.
            self._stream.read(0)
            if self.fatal is None:
                bad = next((r for r in self._stream.reports if "irqlab-dom0: fatal" in r),
                           None)
                if bad is not None:
                    self.fatal = bad
                    return self.stop()
        code = super().exit_code()
        if code is None and self._child is not None and self.fatal is None:
            self.fatal = self._fatal_line()
            if self.fatal is not None:
                # Xen panicked or refused the request: stop now, not at the watchdog.
                code = self.stop()
        return code

    def _fatal_line(self) -> str | None:
        text = self._child.stdout.data if self._child else b""
        for pat in _FATAL:
            m = pat.search(text)
            if m:
                return m.group(0).decode("utf-8", "replace")
        return None

    def exited_done(self, code: int) -> bool:
        # arm64: dom0's SYSTEM_OFF halts Xen and QEMU exits 0 whether the probe finished
        # or failed; the console's T frame (done/error) is authoritative, as on bare
        # arm64. x86: the probe's isa-debug-exit status, as without Xen.
        if self.x86:
            return self.fatal is None and code in self.config.machine.done_exit_codes
        return code == 0 and self.fatal is None

    def exited_error(self, code: int) -> bool:
        if self.x86 and code in self.config.machine.error_exit_codes:
            return True
        return self.fatal is not None

    def serial_read(self, pos: int) -> tuple[bytes, int, int]:
        """The measured domain's console lines after ``pos`` (see _DomainStream)."""
        if self._stream is None:
            return b"", pos, 0
        return self._stream.read(pos)

    def stderr(self) -> str:
        """QEMU's stderr, then Xen's last console lines: every error irqlab prints about
        this target then shows what Xen said last."""
        qemu = super().stderr()
        return (qemu.strip() + "\n" if qemu.strip() else "") + self.console_summary()

    # -- diagnostics and metadata --------------------------------------------------------

    def console_summary(self, lines: int = 6) -> str:
        text = self.serial()
        xen_lines = [ln for ln in text.splitlines() if ln.strip()]
        if not xen_lines:
            return "Xen printed nothing on its console (it never started: check --xen-binary)"
        head = f"Xen stopped the run: {self.fatal}; " if self.fatal else ""
        if not any(ln.startswith("(XEN)") for ln in xen_lines):
            head += "no (XEN) line: the image is not a Xen that prints here; "
        return head + "Xen console, last lines: " + " | ".join(xen_lines[-lines:])

    def _neighbour_started(self) -> bool | None:
        """The neighbour printed its probe banner (it runs the probe, idle=poll or not)."""
        if self.neighbour_domid is None:
            return None
        if self._stream is not None and "neighbour" in self._stream.facts:
            return True
        return f"DOM{self.neighbour_domid}: irqlab-probe" in self.serial()

    def metadata(self) -> dict[str, Any]:
        """Xen version, build, schedulers and the full command line (run metadata)."""
        facts = self._stream.facts if self._stream else {}
        text = "\n".join(facts.values()) + "\n" + self.serial()
        version = _VERSION_RE.search(text)
        sched = _SCHED_RE.search(text)
        return {
            "arch": self.config.arch,
            "domain": self.xen.domain, "measured_domid": self.measured_domid,
            "sched_requested": self.xen.sched,
            "sched_in_use": sched.group(2) if sched else None,
            "sched_banner": sched.group(1) if sched else None,
            "version": version.group(1) if version else None,
            "version_line": version.group(0)[6:] if version else None,
            "cmdline": self.cmdline, "options": dict(self.xen.opts),
            "binary": self.binary.metadata() if self.binary else None,
            "neighbour": self.xen.neighbour,
            "neighbour_bootargs": NEIGHBOUR_ARGS.get(self.xen.neighbour),
            "neighbour_domid": self.neighbour_domid,
            "neighbour_console_lines": self._stream.neighbour_lines if self._stream else 0,
            "neighbour_console_bytes": self._stream.neighbour_bytes if self._stream else 0,
            "neighbour_started": self._neighbour_started(),
            "qemu_cpus": self.pcpus if self.dom0 is not None else QEMU_CPUS,
            "chosen_dts": self.tree_dts,
            "dom0_os": "linux" if self.dom0 is not None else "none",
            "dom0": self.dom0_metadata(),
            "fatal": self.fatal,
            "boot_s": {"first_xen_line": self._stream.first_xen_s if self._stream else None,
                       "first_probe_frame": (self._stream.first_frame_s if self._stream
                                             else None),
                       **(self._stream.dom0_s if self._stream else {})},
        }
