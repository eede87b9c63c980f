"""arm64's Linux dom0 (`--target xen --xen-dom0 linux --arch arm64`) without booting it:
the layout (ring address, libraries from the cache), Xen's command line, the boot
modules' addresses, the target's choice of layout, and the real initramfs and QEMU argv
built from the cache (skipped, with the fix, when the cache lacks the pieces)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from irqlab.runner import xen_dom0 as d0
from irqlab.runner import xen_dom0_arm64 as a64
from irqlab.runner.xen import cached_binaries, xen_cmdline
from irqlab.runner.xen_dom0 import Dom0Plan
from irqlab.targets.xen import DOM0_ARCH
from tests.unit.runner.test_xen_dom0 import _members

ELF_MACHINE_AARCH64 = 183


def test_ring_is_at_xen_guest_ram_base_plus_the_probes_offset() -> None:
    # Xen's GUEST_RAM0_BASE (public/arch-arm.h) + 4 MiB (docs/arm64.md), not x86's 4 MiB
    assert a64.ARM64_DOM0.ring_gpa == 0x40400000
    assert DOM0_ARCH["arm64"] is a64.ARM64_DOM0 and DOM0_ARCH["x86_64"] is d0.X86_64_DOM0
    s = d0.init_script(Dom0Plan(probe_cmdline="x", arch=a64.ARM64_DOM0))
    assert "ringfwd $domid 0x40400000 $shm" in s and "0x400000 $shm" not in s


def test_arm64_takes_nothing_from_the_hosts_x86_libraries() -> None:
    arch = a64.ARM64_DOM0
    assert arch.host_lib_dirs == () and arch.interp_in_cache
    assert arch.interp == "/lib/ld-linux-aarch64.so.1"
    assert arch.cc == "aarch64-linux-gnu-gcc"


def test_xen_cmdline_arm64_linux_dom0() -> None:
    words = xen_cmdline("domU", "credit2", {}, "arm64", linux_dom0=True).split()
    # Arm's dom0_mem takes a size only; x86's ",max:" would be rejected there
    assert "dom0_mem=384M" in words and "dom0_max_vcpus=1" in words
    assert "console=dtuart" in words and "dom0=pvh" not in words


def test_boot_modules_clear_of_qemus_tree_and_of_each_other(tmp_path: Path) -> None:
    kernel = tmp_path / "vm,linuz"
    kernel.write_bytes(b"\0" * (3 * 1024 * 1024 + 1))      # 3 MiB + 1 byte
    argv = a64.module_argv(kernel, "console=hvc0 a=1,2", tmp_path / "i.cpio")
    assert argv[0] == argv[2] == "-device"
    # QEMU's tree sits at RAM + 128 MiB (0x48000000): the kernel starts 16 MiB above it
    assert argv[1] == (f"guest-loader,addr=0x49000000,kernel={tmp_path}/vm,,linuz,"
                       f"bootargs=console=hvc0 a=1,,2")
    # the initramfs at the next 2 MiB boundary after the kernel's end
    assert argv[3] == f"guest-loader,addr=0x49400000,initrd={tmp_path}/i.cpio"


needs_cache = pytest.mark.skipif(
    not (d0.dom0_cache_dir("arm64") / ".complete").exists() or not cached_binaries("arm64")
    or shutil.which("aarch64-linux-gnu-gcc") is None,
    reason="no arm64 dom0 cached: run scripts/fetch-xen.sh and "
           "scripts/fetch-xen-dom0.sh arm64 (./setup.sh --install-only runs both)")


@needs_cache
def test_real_initramfs_and_argv_from_the_cache(tmp_path: Path) -> None:
    from irqlab.runner.accel import AccelPlan
    from irqlab.runner.qemu import GuestConfig
    from irqlab.runner.xen import XenGuest, XenOptions

    probe = tmp_path / "probe.bin"
    probe.write_bytes(b"probe")
    plan = Dom0Plan(probe_cmdline="period_ns=1000000 samples=10", arch=a64.ARM64_DOM0,
                    pcpus=2)
    cfg = GuestConfig(period_ns=1_000_000, samples=10, arch="arm64", probe=probe,
                      sink="ring")
    guest = XenGuest(cfg, AccelPlan("tcg", "tcg", True), XenOptions(domain="domU"),
                     dom0=plan, pcpus=2)
    argv = guest.build(tmp_path)
    assert argv[0] == "qemu-system-aarch64" and argv[argv.index("-smp") + 1] == "2"
    assert "virt,virtualization=on,gic-version=3" in argv and "cortex-a57" in argv
    assert "ivshmem-plain,memdev=irqlab-shm" in argv
    assert argv[argv.index("-kernel") + 1] == str(guest.binary.path)
    assert "dom0_mem=384M" in argv[argv.index("-append") + 1].split()
    loaders = [a for a in argv if a.startswith("guest-loader,")]
    assert len(loaders) == 2 and "kernel=" in loaders[0] and "initrd=" in loaders[1]
    members = _members(tmp_path / "dom0.cpio")
    for name in ("lib/ld-linux-aarch64.so.1", "lib/aarch64-linux-gnu/libc.so.6",
                 "lib/aarch64-linux-gnu/libfdt.so.1", "lib/aarch64-linux-gnu/libgcc_s.so.1",
                 "lib/aarch64-linux-gnu/libxenlight.so.4.17", "usr/lib/xen-4.17/bin/xl",
                 "usr/lib/xen-4.17/bin/ringfwd", "lib/modules/xen-privcmd.ko"):
        assert name in members, name
    assert not any("x86_64" in name for name in members)
    # ringfwd was cross-compiled: an AArch64 ELF
    ringfwd = d0.build_ringfwd(d0.dom0_cache_dir("arm64"), a64.ARM64_DOM0)
    assert struct.unpack_from("<H", ringfwd.read_bytes(), 18)[0] == ELF_MACHINE_AARCH64


@needs_cache
def test_dom0less_probe_and_neighbour_beside_dom0_in_one_tree(tmp_path: Path) -> None:
    """--xen-domain dom0less --neighbour cpu: dom0's kernel and ramdisk and both domUs
    under /chosen of a tree QEMU loads (-dtb), each image loaded where its node says; the
    probe waits at its start gate; dom0 neither creates nor unpauses it, pins both."""
    from irqlab.runner.accel import AccelPlan
    from irqlab.runner.qemu import GuestConfig
    from irqlab.runner.xen import XenGuest, XenOptions

    probe = tmp_path / "probe.bin"
    probe.write_bytes(b"probe")
    plan = Dom0Plan(probe_cmdline="period_ns=1000000 samples=10", arch=a64.ARM64_DOM0,
                    pcpus=2, probe_domid=1, pin="1")
    cfg = GuestConfig(period_ns=1_000_000, samples=10, arch="arm64", probe=probe,
                      sink="ring")
    guest = XenGuest(cfg, AccelPlan("tcg", "tcg", True),
                     XenOptions(domain="dom0less", neighbour="cpu"), dom0=plan, pcpus=2)
    assert (guest.measured_domid, guest.neighbour_domid) == (1, 2)
    argv = guest.build(tmp_path)
    assert "-dtb" in argv and not any(a.startswith("guest-loader,") for a in argv)
    dts = guest.tree_dts
    assert dts.count('"multiboot,kernel", "multiboot,module"') == 3   # dom0 + 2 domUs
    assert dts.count('"multiboot,ramdisk", "multiboot,module"') == 1
    assert "gate=1" in dts.split("domU1 {")[1].split("domU2 {")[0]
    assert "gate=1" not in dts.split("domU2 {")[1]
    loads = {int(a.split("addr=")[1].split(",")[0], 16): a.split("file=")[1].split(",")[0]
             for a in argv if a.startswith("loader,")}
    for addr in loads:                           # every image where the tree says
        assert f"module@{addr:x} {{" in dts
    assert sorted(loads) == sorted(set(loads)) and len(loads) == 4
    assert "ivshmem-plain,memdev=irqlab-shm" in argv
    init = d0.init_script(plan)
    assert "xl create" not in init and "xl unpause" not in init
    assert "domid=1" in init and "xl vcpu-pin $domid all 1" in init
    assert "xl vcpu-pin 2 all 1" in init and "say neighbour" in init
    assert init.index("xl vcpu-pin 2 all 1") < init.index("ringfwd $domid")
