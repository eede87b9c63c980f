"""The one builder of QEMU's common options and of the probe's boot line, and the VMs
that use it (guest, Linux guest, neighbour VMs): argv only, no QEMU started."""

from __future__ import annotations

from pathlib import Path

import pytest

from irqlab.loads.vm import probe_vm_argv, rom_vm_argv
from irqlab.runner.accel import AccelPlan
from irqlab.runner.linux_guest import LinuxGuest
from irqlab.runner.machines import machine_for
from irqlab.runner.qemu import GuestConfig, QemuGuest, base_argv, probe_cmdline
from irqlab.runner.xen import NEIGHBOUR_ARGS

TCG = AccelPlan("tcg", "tcg", True)
COMMON = ["-nodefaults", "-display", "none", "-no-reboot"]


def test_base_argv():
    assert base_argv("qemu", "vm", 16, serial="null") == (
        ["qemu", "-name", "vm,debug-threads=on", "-m", "16M"] + COMMON
        + ["-serial", "null", "-monitor", "none"])
    shared = base_argv("qemu", "vm", 64, ram_fd=7, smp=2)
    assert shared[3:9] == [
        "-m", "64M", "-object",
        "memory-backend-file,id=irqlab-mem,size=64M,mem-path=/proc/self/fd/7,share=on",
        "-machine", "memory-backend=irqlab-mem"]
    assert shared[9:11] == ["-smp", "2"] and shared[-4:] == ["-serial", "stdio",
                                                             "-monitor", "none"]


def test_probe_cmdline():
    assert probe_cmdline(1_000_000, "poll") == "period_ns=1000000 idle=poll samples=0"
    assert probe_cmdline(50_000, "wfi", 5, inject_irqoff_ns=0, inject_every=0,
                         timer="auto", sink="console", extra="x=1") == (
        "period_ns=50000 idle=wfi inject_irqoff_ns=0 inject_every=0 samples=5 timer=auto "
        "sink=console x=1")
    assert NEIGHBOUR_ARGS["console"] == "period_ns=50000 idle=wfi samples=0 sink=console"


def test_guest_config_writes_every_setting():
    assert GuestConfig(1_000_000).cmdline() == (
        "period_ns=1000000 idle=hlt inject_irqoff_ns=0 inject_every=0 samples=0 timer=auto")


def test_guest_argv_starts_with_the_base():
    guest = QemuGuest(GuestConfig(1_000_000, memory_mib=32), TCG, name="run1")
    guest.mem_fd = 5
    argv = guest.build_argv()
    base = base_argv("qemu-system-x86_64", "run1", 32, ram_fd=5)
    assert argv[:len(base)] == base
    assert argv[-2:] == ["-append", guest.config.cmdline()]


def test_linux_guest_argv_and_its_cpu_lists():
    guest = LinuxGuest(1_000_000, TCG, cpus=[1, 2, 3], name="lg")
    guest.mem_fd = 9
    argv = guest.build_argv(Path("/k"), Path("/i"), 1 << 20)
    base = base_argv("qemu-system-x86_64", "lg", 256, smp=4)
    assert argv[:len(base)] == base
    assert "irqlab.args=--cpus;1-3;--priority" in argv[-1]
    assert ("memory-backend-file,id=irqlab-shm,size=1048576,mem-path=/proc/self/fd/9,"
            "share=on") in argv
    # irqlab-init splits irqlab.args on ';', so a CPU list keeps its commas.
    lg = LinuxGuest(1_000_000, TCG, cpus=[0, 2])
    args = lg.build_argv(Path("/k"), Path("/i"), 4096)[-1].split("irqlab.args=")[1]
    assert args.split(";")[:2] == ["--cpus", "0,2"]


def test_an_arm64_linux_guest_boots_debians_arm64_kernel_on_virt():
    """--arch arm64: qemu-system-aarch64 -M virt,gic-version=3, Cortex-A57 under TCG, the
    PL011 console, kpti=0 (irqlab.runner.linux_arch), no x86 parameter, the same ivshmem
    device on virt's PCIe; the guest programs from probes/native/build/arm64."""
    guest = LinuxGuest(1_000_000, TCG, name="lg", arch="arm64")
    guest.mem_fd = 9
    argv = guest.build_argv(Path("/k"), Path("/i"), 1 << 20)
    assert argv[:len(base_argv("qemu-system-aarch64", "lg", 256, smp=1))] == \
        base_argv("qemu-system-aarch64", "lg", 256, smp=1)
    assert argv[argv.index("-M") + 1] == "virt,gic-version=3"
    assert argv[argv.index("-cpu") + 1] == "cortex-a57"
    assert "ivshmem-plain,memdev=irqlab-shm" in argv and "-bios" not in argv
    cmdline = argv[-1]
    assert cmdline.startswith("console=ttyAMA0 quiet panic=-1 kpti=0 irqlab.args=")
    assert "tsc=reliable" not in cmdline
    assert guest.guest.program("irqlab-init").parent.name == "arm64"
    x86 = LinuxGuest(1_000_000, TCG).build_argv(Path("/k"), Path("/i"), 4096)
    assert x86[-1].startswith("console=ttyS0 quiet panic=-1 tsc=reliable irqlab.args=")


def test_the_arm64_kernel_is_cached_apart_and_overridden_by_its_own_variable(
        tmp_path, monkeypatch):
    from irqlab.runner.linux_guest import find_kernel, kernel_cache_dir
    from irqlab.runner.net import net_modules_dir
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for var in ("IRQLAB_LINUX_KERNEL", "IRQLAB_LINUX_KERNEL_ARM64",
                "IRQLAB_LINUX_NET_MODULES", "IRQLAB_LINUX_NET_MODULES_ARM64"):
        monkeypatch.delenv(var, raising=False)
    assert kernel_cache_dir("arm64") == tmp_path / "irqlab/linux/arm64"
    assert kernel_cache_dir() == tmp_path / "irqlab/linux"
    assert find_kernel("arm64") is None
    (tmp_path / "irqlab/linux/arm64").mkdir(parents=True)
    (tmp_path / "irqlab/linux/arm64/vmlinuz-6.1.0-9-arm64").write_bytes(b"Image")
    (tmp_path / "irqlab/linux/arm64/vmlinuz").symlink_to("vmlinuz-6.1.0-9-arm64")
    kernel = find_kernel("arm64")
    assert kernel == tmp_path / "irqlab/linux/arm64/vmlinuz" and find_kernel() is None
    assert net_modules_dir(kernel, "arm64") == \
        tmp_path / "irqlab/linux/arm64/net-modules-6.1.0-9-arm64"
    monkeypatch.setenv("IRQLAB_LINUX_KERNEL_ARM64", "/x/Image")
    assert find_kernel("arm64") == Path("/x/Image") and find_kernel() is None


@pytest.mark.skipif(not machine_for("x86_64").probe.exists(),
                    reason="x86-64 guest probe not built")
def test_neighbour_vms():
    argv = probe_vm_argv("pv", TCG, 64, "poll", prealloc=True)
    base = base_argv("qemu-system-x86_64", "pv", 64, serial="null")
    assert argv[:len(base)] == base
    assert argv[argv.index("-append") + 1] == "period_ns=1000000 idle=poll samples=0"
    assert "-mem-prealloc" in argv


def test_flood_vm():
    assert rom_vm_argv("rv", TCG, "/r.rom", "file:/x") == base_argv(
        "qemu-system-x86_64", "rv", 16, serial="file:/x") + [
        "-M", "pc", "-bios", "/r.rom", "-accel", "tcg"]
