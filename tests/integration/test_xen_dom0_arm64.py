"""Xen 4.17 arm64 + Debian's arm64 Linux as dom0 with xl, the arm64 probe as an
xl-created domU (`irqlab run --target xen --xen-dom0 linux --arch arm64`), under QEMU TCG.
dom0 forwards the domU's ring to the host through ivshmem on virt's PCIe: every sample
must arrive (0 lost). Two pCPUs, the domU pinned to the second and its credit2 weight set
through xl, both read back. Functional evidence only: the latencies are emulated.

Needs the cached arm64 Xen (scripts/fetch-xen.sh) and arm64 dom0 (scripts/fetch-xen-dom0.sh
arm64). One run, ~6 s here.
"""

from __future__ import annotations


import pytest

from irqlab.store import Store
from tests.conftest import run_cli
from tests.integration._helpers import need_arm64_xen_dom0

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

SAMPLES = 1000


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    need_arm64_xen_dom0()
    db = tmp_path_factory.mktemp("xen-dom0-arm64") / "irqlab.duckdb"
    res = run_cli(["run", "--target", "xen", "--xen-dom0", "linux", "--arch", "arm64",
                   "--period", "1ms", "--samples", str(SAMPLES), "--xen-pcpus", "2",
                   "--pin", "1", "--knob", "credit2_weight=512", "--name", "a64",
                   "--json"], db, timeout=150)
    assert res.code == 0, res.stderr
    with Store(db, read_only=True) as st:
        meta = st.resolve("a64").metadata
        stored = sum(b.num_rows for b in st.iter_samples(res.summary["run_id"]))
    return res.summary, meta, stored


def test_arm64_domu_delivers_every_sample(run) -> None:
    summary, meta, stored = run
    assert (summary["status"], summary["arch"], summary["accel"]) == ("ok", "arm64", "tcg")
    assert summary["samples"] == SAMPLES and summary["lost"] == 0 and stored == SAMPLES
    xen = meta["xen"]
    assert (xen["arch"], xen["dom0_os"], xen["qemu_cpus"]) == ("arm64", "linux", 2)
    assert xen["dom0"]["domu"]["domid"] == "1" and xen["sched_in_use"] == "credit2"
    # dom0 ready ~2.3 s and the domU created ~3.1 s after QEMU starts on a quiet host;
    # how long is TCG's pace, not a property of the run: recorded, in order
    assert 0 < xen["boot_s"]["dom0_ready"] < xen["boot_s"]["domu_created"], xen["boot_s"]


def test_arm64_pin_and_credit2_weight_read_back_from_xl(run) -> None:
    _summary, meta, _stored = run
    # xl vcpu-list: Name ID VCPU CPU State Time Affinity(hard / soft): on pCPU 1, hard 1
    vcpu_list = meta["xen"]["dom0"]["vcpu_list"].split()
    name, domid, vcpu, cpu, _state, _time, hard, *_ = vcpu_list
    assert (name, domid, vcpu, cpu, hard) == ("irqlab-probe", "1", "0", "1", "1")
    weight = meta["hooks"]["knob:credit2_weight"]
    assert weight["status"] == "applied" and "irqlab-probe 1 512 " in weight["xl_reports"]
