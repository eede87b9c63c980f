"""Xen runner pieces that need no QEMU: command line, options, console demultiplexing,
device-tree text, cached binaries."""

from __future__ import annotations

import pytest

from irqlab.runner.fdt import Domain, Module, chosen_block
from irqlab.runner.xen import (_DomainStream, binary_from_path, parse_opts, xen_cmdline)


def test_cmdline_defaults_and_overrides():
    line = xen_cmdline("dom0", "credit", {"vwfi": "native", "bootscrub": "idle"})
    words = line.split()
    assert "sched=credit" in words and "dom0_mem=64M" in words and "vwfi=native" in words
    assert "bootscrub=idle" in words and "bootscrub=false" not in words
    assert "dom0_mem=64M" not in xen_cmdline("domU", "credit2", {}).split()


def test_parse_opts():
    assert parse_opts(["vwfi=native", "noreboot"]) == {"vwfi": "native", "noreboot": ""}
    for bad in ["=x", "a b=c", "k=has space"]:
        with pytest.raises(ValueError):
            parse_opts([bad])


def _stream(chunks: list[bytes], domid: int, neighbour: int | None = None):
    pos = {"i": 0}
    total = {"n": 0}

    def raw(_p):
        if pos["i"] >= len(chunks):
            return b"", total["n"], 0
        c = chunks[pos["i"]]
        pos["i"] += 1
        total["n"] += len(c)
        return c, total["n"], 0
    return _DomainStream(raw, domid, neighbour)


CONSOLE = [b"(XEN) Xen version 4.17.7 (Debian) debug=n\n(XEN) Using scheduler: ",
           b"SMP Credit Scheduler (credit)\n~IQH,0,dom0 frame*0\n(XEN) DOM1: ~IQS,",
           b"1,neighbour*0\n(d2) ~IQS,2,other*0\n(XEN) DOM2: ~IQS,3,probe*0\n"]


def test_dom0_lines_are_the_unprefixed_ones():
    s = _stream(CONSOLE, 0, neighbour=1)
    out = b"".join(s.read(0)[0] for _ in CONSOLE)
    assert out == b"~IQH,0,dom0 frame*0\n"
    assert s.neighbour_lines == 1
    assert s.facts["scheduler"].endswith("(credit)")
    assert s.facts["version"].startswith("(XEN) Xen version 4.17.7")


def test_domU_lines_by_prefix():
    s = _stream(CONSOLE, 2)
    out = b"".join(s.read(0)[0] for _ in CONSOLE)
    assert out == b"(d2) ~IQS,2,other*0\n(XEN) DOM2: ~IQS,3,probe*0\n"


def test_chosen_block():
    mod = Module(0x4A000000, 21372, 'period_ns=1000000 sink=console')
    quiet = Domain("domU2", Module(0x4A200000, 10, "x"), vpl011=False)
    dts = chosen_block('console=dtuart sched=credit2', [], [Domain("domU1", mod), quiet])
    assert 'xen,xen-bootargs = "console=dtuart sched=credit2";' in dts
    assert "reg = <0x0 0x4a000000 0x0 0x6000>;" in dts
    assert dts.count('compatible = "xen,domain";') == 2 and dts.count("vpl011;") == 1
    assert dts.index("xen,xen-bootargs") < dts.index("domU1 {")   # props before nodes


def test_chosen_block_with_a_linux_dom0_beside_dom0less_domains():
    kernel = Module(0x49000000, 0x2000000, "console=hvc0")
    ramdisk = Module(0x4B000000, 0x1800123, None)
    probe = Domain("domU1", Module(0x4D000000, 21372, "period_ns=1000000 gate=1"),
                   memory_kib=32 << 10)
    dts = chosen_block("sched=credit2", [kernel, ramdisk], [probe])
    head, domu = dts.split("domU1 {")
    assert head.count('"multiboot,kernel", "multiboot,module"') == 1
    # the ramdisk: its own compatible, its size rounded up to 4 KiB, no bootargs
    assert ('module@4b000000 {\n\t\t\tcompatible = "multiboot,ramdisk", "multiboot,module";'
            '\n\t\t\treg = <0x0 0x4b000000 0x0 0x1801000>;\n\t\t}') in head
    assert head.count("\tbootargs") == 1 and 'bootargs = "console=hvc0";' in head
    assert "memory = <0x0 0x8000>;" in domu and 'bootargs = "period_ns=1000000 gate=1";' in domu


def test_binary_config_and_version(tmp_path):
    boot = tmp_path / "irqlab" / "xen" / "4.17.7-1" / "arm64" / "boot"
    boot.mkdir(parents=True)
    img = boot / "xen-4.17-arm64"
    img.write_bytes(b"x")
    (boot / "xen-4.17-arm64.config").write_text(
        "CONFIG_SCHED_CREDIT=y\nCONFIG_SCHED_CREDIT2=y\n# CONFIG_SCHED_RTDS is not set\n")
    b = binary_from_path(img)
    assert b.package_version == "4.17.7-1" and b.schedulers() == ["credit", "credit2"]
    assert binary_from_path(tmp_path / "elsewhere").schedulers() is None


def test_x86_cmdline_is_a_pvh_dom0_on_com1():
    words = xen_cmdline("dom0", "credit2", {"loglvl": "all"}, arch="x86_64").split()
    assert words[0] == "dom0=pvh" and "console=com1" in words and "loglvl=all" in words
    assert "dom0_mem=64M,max:64M" in words and not any("dtuart" in w for w in words)


def test_x86_argv_boots_xen_by_multiboot_with_the_probe_as_dom0(tmp_path):
    from irqlab.runner.accel import AccelPlan
    from irqlab.runner.qemu import GuestConfig
    from irqlab.runner.xen import XenGuest, XenOptions

    xen = tmp_path / "xen-4.17-amd64.elf"
    xen.write_bytes(b"x")
    (tmp_path / "xen-4.17-amd64.config").write_text("CONFIG_SCHED_CREDIT2=y\n")
    probe = tmp_path / "probe dir,odd.elf"
    probe.write_bytes(b"p")
    cfg = GuestConfig(period_ns=1_000_000, samples=10, arch="x86_64", probe=probe,
                      sink="console")
    tcg = AccelPlan("tcg", "tcg", True)
    guest = XenGuest(cfg, tcg, XenOptions(domain="dom0", binary=xen))
    argv = guest.build(tmp_path)
    assert guest.binary.schedulers() == ["credit2"]
    assert argv[0] == "qemu-system-x86_64" and "q35" in argv
    assert "intel-iommu,intremap=off" in argv and "isa-debug-exit,iobase=0xf4,iosize=0x04" in argv
    module = argv[argv.index("-initrd") + 1]
    assert module == f"{tmp_path / 'irqlab-probe.elf'} {cfg.cmdline()}"    # a plain copy
    assert argv[argv.index("-append") + 1].startswith("dom0=pvh ")
    assert guest.exited_done(33) and not guest.exited_done(0) and guest.exited_error(35)
    with pytest.raises(OSError, match="PVH dom0 only"):
        XenGuest(cfg, tcg, XenOptions(domain="domU", binary=xen)).build(tmp_path)
