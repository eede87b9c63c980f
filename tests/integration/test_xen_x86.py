"""Xen 4.17 on x86-64 under QEMU TCG (q35 + intel-iommu) with the x86 probe as a PVH dom0
(`irqlab run --target xen --arch x86_64`): samples come back as console frames through
HYPERVISOR_console_io. Functional evidence only: the latencies are emulated.

Needs Debian's amd64 hypervisor in the cache (scripts/fetch-xen.sh, run by setup.sh).
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from irqlab.runner.machines import MACHINES
from irqlab.runner.xen import cached_binaries
from irqlab.samples.record import FLAG_INJECTED
from irqlab.store import Store
from tests.conftest import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

X86 = MACHINES["x86_64"]


@pytest.fixture(scope="session")
def xen_x86_ready():
    if shutil.which(X86.qemu) is None:
        pytest.skip("qemu-system-x86_64 missing: run ./setup.sh --install-only")
    if not cached_binaries("amd64"):
        pytest.skip("no amd64 Xen hypervisor cached: run scripts/fetch-xen.sh")
    subprocess.run(["make", "-s", "-C", str(X86.probe.parents[2]), "ARCH=x86_64"],
                   check=True)
    return True


def _run(db, *args: str):
    return run_cli(["run", "--target", "xen", "--arch", "x86_64", "--json", *args], db,
                   timeout=120)


def _stored(db, run_id: int) -> tuple[dict, dict[str, np.ndarray]]:
    with Store(db, read_only=True) as st:
        meta = st.resolve(str(run_id)).metadata
        batches = list(st.iter_samples(run_id))
    raw = {n: np.concatenate([b.column(n).to_numpy() for b in batches])
           for n in ("seq", "deadline_tick", "entry_tick", "flags")}
    return meta, raw


def test_pvh_dom0_console_sink_counts_and_injections(xen_x86_ready, db):
    res = _run(db, "--period", "2ms", "--samples", "600", "--inject-irqoff", "500us",
               "--inject-every", "20")
    assert res.code == 0, res.stderr
    s = res.summary
    assert (s["status"], s["target"], s["arch"], s["accel"], s["emulated"]) == (
        "ok", "xen", "x86_64", "tcg", True)
    assert s["samples"] == 600 and s["lost"] == 0
    meta, raw = _stored(db, s["run_id"])
    assert np.array_equal(raw["seq"], np.arange(600))
    # Real time under TCG (no -icount with Xen): a wake-up a few ms late now and then can
    # let the ISR of an injection target run before the probe masks interrupts; the probe
    # then skips that injection and flags nothing. So: every flagged sample is a target
    # and shows the delay (30 of 30 targets flagged in 3 runs on a quiet host; how many
    # are skipped is the host's load, as in test_xen_explain: at least a fifth must hit).
    injected = (raw["flags"] & FLAG_INJECTED) != 0
    flagged = np.flatnonzero(injected) + 1
    assert np.all(flagged % 20 == 0) and len(flagged) >= 600 // 20 // 5, flagged
    assert s["injected"] == len(flagged)
    lat = raw["entry_tick"].astype(np.int64) - raw["deadline_tick"].astype(np.int64)
    assert np.all(lat[injected] > s["tick_hz"] * 500e-6)   # D: a strict lower bound
    xen = meta["xen"]
    assert (xen["arch"], xen["domain"], xen["measured_domid"]) == ("x86_64", "dom0", 0)
    assert xen["version"].startswith("4.17") and xen["sched_in_use"] == "credit2"
    assert "dom0=pvh" in xen["cmdline"].split() and xen["fatal"] is None
    assert xen["boot_s"]["first_probe_frame"] is not None
    assert meta["probe"]["tick_method"] == "xen-leaf-0x40000x03"
    assert meta["console_sink"]["bad_frames"] == 0
    assert meta["console_sink"]["missing_frames"] == 0


def test_credit_scheduler(xen_x86_ready, db):
    res = _run(db, "--xen-sched", "credit", "--period", "10ms", "--samples", "100")
    assert res.code == 0, res.stderr
    s = res.summary
    assert (s["status"], s["samples"], s["lost"]) == ("ok", 100, 0)
    meta, _ = _stored(db, s["run_id"])
    assert meta["xen"]["sched_in_use"] == "credit"
