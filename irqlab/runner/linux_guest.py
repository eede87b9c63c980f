"""A stock Debian Linux kernel in QEMU running the native probe (``--target linux-guest``).

The kernel is Debian's linux-image that ``setup.sh`` downloads with apt and extracts with
dpkg-deb into ``$XDG_CACHE_HOME/irqlab/linux`` (default ~/.cache/irqlab/linux;
``$IRQLAB_LINUX_KERNEL`` overrides), amd64's there and arm64's in ``linux/arm64``
(``$IRQLAB_LINUX_KERNEL_ARM64``; what differs per architecture is
irqlab.runner.linux_arch). irqlab writes the initramfs itself (cpio "newc"): ``/init`` is
probes/native's irqlab-init, ``/irqlab-native`` the static probe, both built for the
guest's architecture.

Samples cross through ivshmem-plain (docs/design.md, "Linux guest: ivshmem"): irqlab
creates a memfd, QEMU exposes it as the device's BAR 2, the probe in the guest maps
``/sys/bus/pci/devices/<bdf>/resource2`` and writes the same directory + per-CPU rings as
on the host. The host reads them in place; the guest never exits to report a sample.
"""

from __future__ import annotations

import shutil
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from irqlab.runner.accel import AccelPlan
from irqlab.runner.linux_arch import LinuxGuestArch, linux_arch
from irqlab.runner.machines import Machine, machine_for
from irqlab.runner.native import NATIVE_INIT, NATIVE_PROBE, no_layout, probe_args
from irqlab.runner.process import MeasuredProcess
from irqlab.runner.qemu import base_argv, memfd_backend

GUEST_CAPACITY = 16384            # records per ring: 16 s at 1 ms, ample for 20 ms polls
# The guest's programs (probes/native), each built for the guest's architecture.
INIT, PROBE, GTRACE, HOG = "irqlab-init", "irqlab-native", "irqlab-gtrace", "irqlab-hog"


def kernel_cache_dir(arch: str = "x86_64") -> Path:
    return linux_arch(arch).kernel_cache_dir()


def find_kernel(arch: str = "x86_64") -> Path | None:
    """The guest kernel of ``arch``: its $IRQLAB_LINUX_KERNEL*, else the cached vmlinuz."""
    return linux_arch(arch).find_kernel()


def check_built(guest: LinuxGuestArch, names: Sequence[str]) -> None:
    """FileNotFoundError naming the fix when a guest program is not built."""
    for name in names:
        part = guest.program(name)
        if not part.exists():
            raise FileNotFoundError(f"{part} is not built: run `make -C probes/native`"
                                    + (" (it needs gcc-aarch64-linux-gnu)"
                                       if guest.arch == "arm64" else ""))


def _newc_entry(name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0),
                ino: int = 1) -> bytes:
    """One cpio "newc" member: 110-byte ASCII header, name, data, 4-byte padding."""
    raw_name = name.encode() + b"\0"
    fields = [0x070701, ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1],
              len(raw_name), 0]
    head = b"070701" + b"".join(b"%08X" % f for f in fields[1:])
    out = head + raw_name
    out += b"\0" * (-len(out) % 4)
    out += data
    out += b"\0" * (-len(out) % 4)
    return out


def write_newc(dest: Path, members: Sequence[tuple[str, int, bytes]]) -> Path:
    """Write ``members`` (name, mode, data), in order, as an uncompressed newc archive
    (an initramfs); ``dev/console`` is the console's character device (5, 1)."""
    with open(dest, "wb") as f:
        for ino, (name, mode, data) in enumerate(members, start=1):
            rdev = (5, 1) if name == "dev/console" else (0, 0)
            f.write(_newc_entry(name, mode, data, rdev, ino))
        f.write(_newc_entry("TRAILER!!!", 0, ino=0))
    return dest


def build_initramfs(dest: Path, init: Path = NATIVE_INIT, probe: Path = NATIVE_PROBE,
                    extra: Sequence[tuple[str, int, bytes]] = ()) -> Path:
    """Write the initramfs (uncompressed newc) with irqlab-init and irqlab-native, and
    ``extra`` members (name, mode, data) after them: directories before their files."""
    return write_newc(dest, [
        ("dev", stat.S_IFDIR | 0o755, b""),
        ("dev/console", stat.S_IFCHR | 0o600, b""),
        ("proc", stat.S_IFDIR | 0o755, b""),
        ("sys", stat.S_IFDIR | 0o755, b""),
        ("init", stat.S_IFREG | 0o755, init.read_bytes()),
        ("irqlab-native", stat.S_IFREG | 0o755, probe.read_bytes()),
        *extra])


class InGuestHog(ABC):
    """A load the Linux guest's init runs beside the probe (irqlab.loads.guest_hog)."""

    @abstractmethod
    def hog_args(self) -> list[str]:
        """irqlab-hog's arguments (probes/native/hog.c)."""


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass
class LinuxGuest(MeasuredProcess):
    """QEMU running Debian's kernel + irqlab's initramfs; rings in an ivshmem memfd."""

    period_ns: int
    plan: AccelPlan
    cpus: list[int] | None = None       # guest CPUs to measure (default: CPU 0)
    priority: int = 90
    rt_fallback: bool = False
    samples: int = 0
    capacity: int = GUEST_CAPACITY
    memory_mib: int = 256
    icount: bool = False
    kernel: Path | None = None
    extra_qemu_args: list[str] = field(default_factory=list)
    name: str = "irqlab"
    hog_args: list[str] = field(default_factory=list)   # irqlab-hog's, when a guest-hog
    # Bytes the ring directory + rings take, (rings, capacity) -> bytes: the ring
    # format belongs to the samples layer, which the runner does not import.
    layout_bytes: Callable[[int, int], int] = no_layout
    arch: str = "x86_64"

    @property
    def machine(self) -> Machine:
        return machine_for(self.arch)

    @property
    def guest(self) -> LinuxGuestArch:
        return linux_arch(self.arch)

    def guest_cpus(self) -> list[int]:
        return list(self.cpus) if self.cpus else [0]

    def build_argv(self, kernel: Path, initrd: Path, shm_bytes: int) -> list[str]:
        cpus = self.guest_cpus()
        per_cpu = -(-self.samples // len(cpus)) if self.samples else 0
        args = probe_args(self.period_ns, cpus, self.priority, self.rt_fallback, per_cpu,
                          self.capacity)
        # irqlab-init splits irqlab.args on ';' (probes/native/init.c): a value may be
        # a CPU list with commas.
        cmdline = f"{self.guest.cmdline()} irqlab.args={';'.join(args)}"
        if self.hog_args:
            cmdline += f" irqlab.hog={';'.join(self.hog_args)}"
        return (base_argv(self.machine.qemu, self.name, self.memory_mib, smp=max(cpus) + 1)
                + self.machine.argv(self.plan, self.icount)
                + memfd_backend("irqlab-shm", str(shm_bytes), self.mem_fd)
                + ["-device", "ivshmem-plain,memdev=irqlab-shm"]
                + self.extra_qemu_args
                + ["-kernel", str(kernel), "-initrd", str(initrd), "-append", cmdline])

    def start(self) -> None:
        """Build the initramfs, create the ring memory, start QEMU; OSError on failure."""
        guest = self.guest
        kernel = self.kernel or guest.find_kernel()
        if kernel is None or not kernel.exists():
            raise FileNotFoundError(guest.missing_kernel())
        check_built(guest, (PROBE, INIT) + ((HOG,) if self.hog_args else ()))
        if shutil.which(self.machine.qemu) is None:
            raise FileNotFoundError(f"{self.machine.qemu} not found: "
                                    f"{self.machine.install_hint}")
        # irqlab-gtrace runs only when --trace gives the guest its trace device
        # (irqlab.trace.guest); without it the initramfs is as before.
        extra = [(name, stat.S_IFREG | 0o755, guest.program(name).read_bytes())
                 for name in (GTRACE,) + ((HOG,) if self.hog_args else ())
                 if guest.program(name).exists()]
        initrd = build_initramfs(self._workdir("irqlab-linux-") / "initramfs.cpio",
                                 init=guest.program(INIT), probe=guest.program(PROBE),
                                 extra=extra)
        # ivshmem BARs are a power of two in size.
        shm_bytes = _pow2_at_least(self.layout_bytes(len(self.guest_cpus()), self.capacity))
        self._create_memfd("irqlab-ivshmem", shm_bytes)
        self._spawn(self.build_argv(kernel, initrd, shm_bytes))

    @property
    def mem_paths(self) -> list[str]:
        return [self.mem_path]

    def exited_done(self, code: int) -> bool:
        return code in self.machine.done_exit_codes

    def exited_error(self, code: int) -> bool:
        return code in self.machine.error_exit_codes
