"""arm64's Linux dom0 (``--target xen --xen-dom0 linux --arch arm64``): what differs from
x86_64 (irqlab.runner.xen_dom0 builds the same init, xl configuration and initramfs).

Debian's arm64 Xen boots Debian's arm64 kernel (``vmlinuz`` is a raw ``Image``) as dom0
on QEMU ``virt`` with EL2 (``virtualization=on``). The kernel and dom0's initramfs are
boot modules QEMU's ``guest-loader`` devices load and describe under ``/chosen``
(``multiboot,kernel`` with dom0's command line, ``multiboot,ramdisk``); Xen's own command
line is ``-append``. dom0 then ``xl create``s the arm64 probe (its ``Image``) as a plain
arm64 domU. Nothing is taken from the host's libraries: the toolstack, glibc, libfdt
(which arm64's libxenguest needs) and busybox are Debian's arm64 packages unpacked by
``scripts/fetch-xen-dom0.sh arm64`` into ``~/.cache/irqlab/xen-dom0/arm64``, with the
kernel's Xen modules and its ``vmlinuz``; ringfwd is cross-compiled.

The ring reaches the host as on x86: ringfwd maps the domU's ring (privcmd foreign
mapping) and copies it into an ivshmem-plain BAR on the virt machine's PCIe, which dom0's
kernel enumerates itself (Xen gives dom0 the host bridge); no Xen console on the way.

Measured under TCG here (docs/xen.md): dom0 shell ~2.3 s, domU created ~3.2 s after QEMU
starts.
"""

from __future__ import annotations

from pathlib import Path

from irqlab.runner.fdt import Module
from irqlab.runner.xen_dom0 import Dom0Arch, dom0_cache_dir, fetch_hint
from irqlab.samples.layout import RING_OFFSET

# Xen's guest RAM starts at GUEST_RAM0_BASE (xen/include/public/arch-arm.h) and the
# probe puts its ring at its RAM bank's base + RING_OFFSET (docs/arm64.md).
XEN_GUEST_RAM0_BASE = 0x40000000

ARM64_DOM0 = Dom0Arch(
    deb_arch="arm64",
    lib_dirs=("usr/lib/aarch64-linux-gnu", "lib/aarch64-linux-gnu"),
    host_lib_dirs=(),                # the host's libraries are x86's: all from the cache
    image_lib_dir="lib/aarch64-linux-gnu",
    interp="/lib/ld-linux-aarch64.so.1",
    interp_in_cache=True,
    cc="aarch64-linux-gnu-gcc",
    ring_gpa=XEN_GUEST_RAM0_BASE + RING_OFFSET)

# Boot modules in the virt machine's RAM (base 0x40000000). QEMU puts its device tree at
# RAM base + 128 MiB (0x48000000, the initrd slot of its own loader, when RAM >= 256 MiB):
# a module there is overwritten and Xen panics "Could not set up DOM0 guest OS". So the
# kernel (~33 MB) goes 16 MiB above it and the initramfs after the kernel.
KERNEL_ADDR = 0x49000000
MODULE_ALIGN = 2 << 20


def dom0_kernel() -> Path:
    """Debian's arm64 kernel Image, unpacked beside its Xen modules."""
    path = dom0_cache_dir(ARM64_DOM0.deb_arch) / "vmlinuz"
    if not path.exists():
        raise FileNotFoundError(f"no arm64 dom0 kernel: {fetch_hint(ARM64_DOM0.deb_arch)}")
    return path


def dom0_modules(kernel: Path, dom0_cmdline: str, initrd: Path) -> tuple[list[Module], int]:
    """dom0's kernel and initramfs as /chosen modules of a tree of our own (dom0less
    domains beside dom0), where module_argv's loader would put them; and the first
    2 MiB-aligned address after them."""
    initrd_addr = _align(KERNEL_ADDR + kernel.stat().st_size)
    size = initrd.stat().st_size
    return ([Module(KERNEL_ADDR, kernel.stat().st_size, dom0_cmdline),
             Module(initrd_addr, size, None)], _align(initrd_addr + size))


def _align(addr: int) -> int:
    return (addr + MODULE_ALIGN - 1) & -MODULE_ALIGN


def _prop(value: str) -> str:
    """A -device property value: QEMU's option parser takes ',,' for a comma."""
    return value.replace(",", ",,")


def module_argv(kernel: Path, dom0_cmdline: str, initrd: Path) -> list[str]:
    """The guest-loader devices that load dom0's kernel and initramfs and describe them
    to Xen under /chosen (QEMU's docs/system/guest-loader.rst)."""
    initrd_addr = _align(KERNEL_ADDR + kernel.stat().st_size)
    return ["-device", f"guest-loader,addr={KERNEL_ADDR:#x},kernel={_prop(str(kernel))},"
                       f"bootargs={_prop(dom0_cmdline)}",
            "-device", f"guest-loader,addr={initrd_addr:#x},initrd={_prop(str(initrd))}"]

