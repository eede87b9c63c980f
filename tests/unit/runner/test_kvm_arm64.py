"""The nested arm64 KVM host's pieces (irqlab.runner.kvm_arm64, irqlab.trace.kvm_host):
the probe's device tree, the L1's init, its reports and what the capture keeps of them."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from irqlab.runner.kvm_arm64 import (KVM_EVENTS, REPORT_MARK, TRACE_BYTES, guest_dts,
                                     init_script, parse_reports, reports_metadata)
from irqlab.trace.kvm_host import host_header

CONSOLE = f"""[    3.1] random noise
{REPORT_MARK} ready uptime=3.50 kvm=kvm_[1]:_VHE_mode_initialized_successfully
{REPORT_MARK} trace started pid=103
{REPORT_MARK} hog started pid=104 args=1,95,2000000,100000000,1000000000
{REPORT_MARK} clock voffset_tick=308043641 bound_tick=212
{REPORT_MARK} vcpu tid=106 cpu=1 prio=0
irqlab-probe: done{REPORT_MARK} ring done records=300
{REPORT_MARK} vmm rc=0
{REPORT_MARK} trace done rc=0
"""


@pytest.mark.skipif(shutil.which("dtc") is None, reason="needs dtc")
def test_the_guest_tree_compiles_and_holds_what_the_probe_looks_for(tmp_path) -> None:
    src = guest_dts('period_ns=10000000 samples=5 x="q"', 64)
    dtb = tmp_path / "g.dtb"
    subprocess.run(["dtc", "-q", "-I", "dts", "-O", "dtb", "-o", str(dtb), "-"],
                   input=src, text=True, check=True)
    back = subprocess.run(["dtc", "-q", "-I", "dtb", "-O", "dts", str(dtb)],
                          capture_output=True, text=True, check=True).stdout
    for needle in ('"arm,gic-v3"', '"arm,armv8-timer"', '"arm,psci-0.2"', '"hvc"',
                   '"arm,pl011\\0arm,primecell"',
                   'bootargs = "period_ns=10000000 samples=5 x=\\"q\\""',
                   "reg = <0x00 0x40000000 0x00 0x4000000>"):
        assert needle in back, needle


def test_init_runs_the_tracer_and_the_hog_only_when_asked() -> None:
    plain = init_script(["-c", "1"], None, [])
    assert "irqlab-gtrace" not in plain and "irqlab-hog" not in plain
    assert "irqvmm /irqlab/probe.bin /irqlab/guest.dtb $shm -c 1" in plain
    full = init_script(["-c", "1"], KVM_EVENTS, ["1", "95", "2", "3", "4"])
    assert f"irqlab-gtrace $tshm 3 {','.join(KVM_EVENTS)}" in full
    assert "irqlab-hog 1 95 2 3 4" in full and str(TRACE_BYTES) in full
    # the tracer drains after irqvmm, before the end is reported
    assert full.index("irqvmm ") < full.index("kill -USR1 $gpid") < full.index("say end")


def test_reports_are_read_back_even_glued_to_other_output() -> None:
    reps = dict(parse_reports(CONSOLE))
    assert reps["ring"] == {"done": "", "records": "300"}
    meta = reports_metadata(CONSOLE)
    assert meta["vcpu"]["tid"] == "106" and meta["clock"]["bound_tick"] == "212"
    assert set(meta["trace"]) == {"started", "done"} and "started" in meta["hog"]
    assert "fatal" not in meta
    assert reports_metadata(f"{REPORT_MARK} fatal no /dev/kvm\n")["fatal"] == "no /dev/kvm"


def test_the_capture_header_takes_the_vcpu_thread_and_the_counter_offset() -> None:
    h = host_header(reports_metadata(CONSOLE))
    assert h["vcpu_tids"] == [106] and h["vmm_threads"] == {"106": "irqvmm-vcpu0"}
    assert h["vcpu_cpu"] == 1
    assert (h["guest_voffset_tick"], h["guest_voffset_bound_tick"]) == (308043641, 212)
    assert host_header({}) == {"layer": "kvm-host", "vcpu_tids": [], "vmm_threads": {},
                               "vcpu_cpu": None}
