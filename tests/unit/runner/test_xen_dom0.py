"""The Linux-dom0 pieces of `--target xen --xen-dom0 linux`: ELF/library resolution,
dom0's init and xl configuration, the initramfs, Xen's command line, QEMU's argv, the
dom0 report parser, and the target's option checks (exit 2)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from irqlab.runner import xen_dom0 as d0
from irqlab.runner.xen import xen_cmdline
from irqlab.runner.xen_dom0 import Dom0Load, Dom0Plan


def test_elf_needed_reads_dynamic_section() -> None:
    needed = d0.elf_needed(Path(sys.executable).resolve().read_bytes())
    assert any(n.startswith("libc.so") for n in needed) or needed == []
    assert d0.elf_needed(b"not an elf") == []


def test_xl_config_pvh_with_pin_and_pool() -> None:
    plan = Dom0Plan(probe_cmdline="period_ns=1000000 idle=hlt samples=10")
    cfg = d0.xl_config(plan, pin="1", pool="irqlab-pool")
    assert 'type = "pvh"' in cfg and 'kernel = "/irqlab/probe.elf"' in cfg
    assert 'cmdline = "period_ns=1000000 idle=hlt samples=10"' in cfg
    assert 'cpus = "1"' in cfg and 'pool = "irqlab-pool"' in cfg
    assert "memory = 32" in cfg


def test_init_script_has_toolstack_knobs_and_loads() -> None:
    plan = Dom0Plan(probe_cmdline="x", rtds_period_ns=100_000, rtds_budget_ns=50_000,
                    cpupool_sched="null",
                    loads=[Dom0Load("dom0-cpu", "load:dom0-cpu", {"workers": 2}),
                           Dom0Load("dom0-console", "load:dom0-console",
                                    {"bytes_per_s": 5000}),
                           Dom0Load("domain-create", "load:domain-create",
                                    {"size_bytes": 2 << 30, "delay_ns": 10**10,
                                     "every_ns": 15 * 10**9})])
    s = d0.init_script(plan)
    for step in ("xenstored", "xen-init-dom0", "xenconsoled",
                 "xl create -p -q /irqlab/probe.cfg",
                 "xl sched-rtds -d irqlab-probe -v all -p 100 -b 50 -e 0", "sched=\\\"null\\\"",
                 "ringfwd $domid 0x400000 $shm"):
        assert step in s, step
    # Created paused; unpaused once the settings hold and every load runs: the probe's
    # first sample is measured under them. ringfwd after (it waits for the ring's magic).
    unpause = s.index("xl unpause $domid")
    assert s.index("xl create -p") < s.index("xl sched-rtds") < unpause
    assert max(s.index("say load:dom0-cpu start"), s.index("say load:domain-create start"),
               s.index("sleep 0.5; report_loads")) < unpause < s.index("ringfwd $domid")
    assert s.count("while :; do :; done") == 2            # two CPU burners
    assert "head -c 499 /dev/zero" in s                     # 5000 B/s in 500 B chunks
    assert "size_mib=2048" in s and "sleep 10.000" in s and "sleep 15.000" in s


def test_parse_reports_and_metadata() -> None:
    text = ("junk\n(XEN) x\nirqlab-dom0: ready uptime_cs=900\n"
            "irqlab-dom0: domu created domid=1 create_cs=150\n"
            "irqlab-dom0: loads cpu_ticks=10 console_bytes=0 uptime_cs=1\n"
            "irqlab-dom0: loads cpu_ticks=250 console_bytes=4000 uptime_cs=2\n"
            "irqlab-dom0: rtds ok irqlab-probe 1 100 50 0 0\n"
            "irqlab-dom0: unpaused uptime_cs=1210\n")
    meta = d0.reports_metadata(text)
    assert meta["domu"] == {"domid": "1", "create_cs": "150"}
    assert meta["unpaused_uptime_cs"] == "1210"
    assert meta["loads"]["cpu_ticks"] == "250"          # the latest report wins
    assert meta["rtds"].startswith("ok")
    assert len(meta["reports"]) == 6


def test_xen_cmdline_linux_dom0_is_pv() -> None:
    line = xen_cmdline("domU", "credit", {"vwfi": "native"}, "x86_64", linux_dom0=True)
    assert "dom0=pvh" not in line
    assert "dom0_mem=384M,max:384M" in line and "sched=credit" in line
    assert line.endswith("vwfi=native")


needs_cache = pytest.mark.skipif(not (d0.dom0_cache_dir() / ".complete").exists(),
                                 reason="run scripts/fetch-xen-dom0.sh")


def _members(path: Path) -> dict[str, tuple[int, int]]:
    """name -> (mode, size) of a newc archive."""
    data, out, pos = path.read_bytes(), {}, 0
    while True:
        head = data[pos:pos + 110]
        mode, size, namesize = (int(head[14:22], 16), int(head[54:62], 16),
                                int(head[94:102], 16))
        name = data[pos + 110:pos + 110 + namesize - 1].decode()
        pos = (pos + 110 + namesize + 3) & ~3
        pos = (pos + size + 3) & ~3
        if name == "TRAILER!!!":
            return out
        out[name] = (mode, size)


@needs_cache
def test_initramfs_holds_everything_dom0_runs(tmp_path: Path) -> None:
    probe = tmp_path / "probe.elf"
    probe.write_bytes(b"\x7fELF-not-really")
    plan = Dom0Plan(probe_cmdline="x", loads=[
        Dom0Load("domain-create", "load:domain-create", {"size_bytes": 1 << 30})])
    members = _members(d0.build_dom0_initramfs(tmp_path / "i.cpio", plan, probe))
    for name in ("init", "bin/busybox", "etc/xen/xl.conf", "irqlab/probe.elf",
                 "irqlab/probe.cfg", "irqlab/big.cfg", "lib64/ld-linux-x86-64.so.2",
                 "lib/x86_64-linux-gnu/libxenlight.so.4.17",
                 "lib/x86_64-linux-gnu/libgcc_s.so.1", "lib/modules/xen-privcmd.ko",
                 "lib/modules/xenfs.ko", "usr/lib/xen-4.17/bin/xl",
                 "usr/lib/xen-4.17/bin/ringfwd", "dev/console"):
        assert name in members, name
    assert stat.S_ISCHR(members["dev/console"][0])
    assert members["init"][0] & 0o111


@pytest.mark.slow
def test_target_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    from tests.conftest import run_cli
    db = tmp_path / "t.duckdb"
    for args, words in (
            (["--target", "guest", "--load", "dom0-cpu"], "xen-dom0 linux"),
            (["--target", "xen", "--load", "domain-create:size=1G"], "this --target xen run has no such thing"),
            (["--target", "xen", "--xen-dom0", "linux", "--arch", "arm64", "--accel", "kvm"],
             "TCG only"),
            (["--target", "xen", "--xen-pcpus", "2"], "needs --xen-dom0 linux"),
            (["--target", "xen", "--xen-dom0", "linux", "--load", "domain-create"],
             "needs size="),
            (["--target", "xen", "--xen-dom0", "linux", "--xen-domain", "dom0"],
             "drop --xen-domain dom0"),
            (["--target", "xen", "--xen-dom0", "linux", "--xen-domain", "dom0less"],
             "are arm64 only"),
            (["--target", "xen", "--xen-dom0", "linux", "--neighbour", "cpu"],
             "are arm64 only"),
            (["--target", "xen", "--arch", "x86_64", "--xen-domain", "dom0less"],
             "PVH dom0 only")):
        res = run_cli(["run", *args, "--samples", "10"], db)
        assert res.code == 2, (args, res.stderr)
        assert words in res.stderr, (args, res.stderr)
