"""What differs between architectures for a Linux guest (``--target linux-guest`` and
``--target net``, ``--arch x86_64|arm64``): the kernel and where it is cached, its
console and per-architecture parameters, where the guest's programs are built, and the
host trace clock the guest's counter maps onto. The QEMU machine itself is
irqlab.runner.machines' (``machine_for(arch)``); everything else about the guest (init,
initramfs, ivshmem, the responder) is the same on both.

x86_64: Debian's amd64 kernel (``setup.sh`` caches it in ``~/.cache/irqlab/linux``), the
guest's TSC read by the trace, the host capture on x86-tsc (under TCG the guest reads the
host's TSC).

arm64: Debian's arm64 kernel (a raw ``Image``) on QEMU ``virt`` with GICv3,
``scripts/fetch-linux-net.sh arm64`` caches it with its virtio modules in
``~/.cache/irqlab/linux/arm64``. The guest's clock runs on the generic timer's virtual
counter (CNTVCT_EL0), which under TCG is QEMU's virtual clock divided by the counter
period (QEMU target/arm/helper.c gt_get_countervalue(): 62.5 MHz, 16 ns a tick), and
QEMU's virtual clock is the host's CLOCK_MONOTONIC plus a constant set when the VM
starts (softmmu/cpu-timers.c cpu_get_clock_locked(): get_clock() + cpu_clock_offset).
So the host capture runs on ``mono`` and the guest counter maps onto it by one offset,
the rate exactly 1 (irqlab.explain.linux_guest). ``kpti=0``: QEMU's virt machine hands
the kernel a ``kaslr-seed``, and KASLR forces kernel page-table isolation on a
Cortex-A57 (no E0PD; "KPTI forced ON by KASLR" in its log), which switches TTBR1 on
every kernel entry and exit; under TCG each switch flushes QEMU's soft TLB. Off, the
fastest net round trip fell from 460-480 to 310-340 us here (TCG, shared host), and the
guest no longer fell behind a 1 ms packet stream as often.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from irqlab.runner.native import NATIVE_BUILD


@dataclass(frozen=True)
class LinuxGuestArch:
    """One architecture's Linux guest (see the module doc)."""

    arch: str                    # irqlab's --arch
    deb_arch: str                # Debian's name for it
    console: str                 # the kernel's serial console device
    params: str                  # per-architecture kernel parameters
    build: Path                  # probes/native's build directory of the guest's programs
    kernel_env: str              # the variable that overrides the cached kernel
    modules_env: str             # ... and the net guest's cached virtio modules
    cache_subdir: str            # below ~/.cache/irqlab/linux ("" for amd64)
    host_trace_clock: str | None  # the host capture's trace clock (None: x86-tsc)
    fetch: str                   # the command that caches the kernel and its modules

    def kernel_cache_dir(self) -> Path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        out = Path(base) / "irqlab" / "linux"
        return out / self.cache_subdir if self.cache_subdir else out

    def find_kernel(self) -> Path | None:
        """The guest kernel: ``$<kernel_env>``, else the cached Debian vmlinuz."""
        env = os.environ.get(self.kernel_env)
        if env:
            return Path(env)
        path = self.kernel_cache_dir() / "vmlinuz"
        return path if path.exists() else None

    def program(self, name: str) -> Path:
        """One of the guest's programs (irqlab-init, irqlab-native, irqlab-echo ...)."""
        return self.build / name

    def cmdline(self) -> str:
        """The kernel parameters every irqlab Linux guest of this architecture gets."""
        return f"console={self.console} quiet panic=-1" + (f" {self.params}"
                                                           if self.params else "")

    def missing_kernel(self) -> str:
        """The one line saying the kernel is missing, with the fix."""
        return (f"no {self.arch} Linux guest kernel: run {self.fetch} (it fetches "
                f"Debian's linux-image-*-{self.deb_arch} into {self.kernel_cache_dir()}; "
                f"nothing is installed) or set ${self.kernel_env}")


LINUX_ARCHES: dict[str, LinuxGuestArch] = {
    "x86_64": LinuxGuestArch(
        arch="x86_64", deb_arch="amd64", console="ttyS0", params="tsc=reliable",
        build=NATIVE_BUILD, kernel_env="IRQLAB_LINUX_KERNEL",
        modules_env="IRQLAB_LINUX_NET_MODULES", cache_subdir="",
        host_trace_clock=None, fetch="./setup.sh --install-only"),
    "arm64": LinuxGuestArch(
        arch="arm64", deb_arch="arm64", console="ttyAMA0", params="kpti=0",
        build=NATIVE_BUILD / "arm64", kernel_env="IRQLAB_LINUX_KERNEL_ARM64",
        modules_env="IRQLAB_LINUX_NET_MODULES_ARM64", cache_subdir="arm64", host_trace_clock="mono",
        fetch="scripts/fetch-linux-net.sh arm64 (./setup.sh --install-only runs it)"),
}


def linux_arch(arch: str) -> LinuxGuestArch:
    try:
        return LINUX_ARCHES[arch]
    except KeyError:
        raise ValueError(f"no Linux guest for arch {arch!r}; known: "
                         f"{', '.join(sorted(LINUX_ARCHES))}") from None
