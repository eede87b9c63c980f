"""Xen 4.17 + Debian's Linux as dom0 with xl, the x86 probe as an xl-created PVH domU
(`irqlab run --target xen --xen-dom0 linux`), under QEMU TCG. dom0 forwards the domU's
sample ring to the host through ivshmem: every sample must arrive (0 lost). Functional
evidence only: the latencies are emulated.

Needs the cached Xen (scripts/fetch-xen.sh), Linux kernel (setup.sh) and dom0 toolstack
(scripts/fetch-xen-dom0.sh). Three boots: idle (credit2), busy (with RTDS cached: RTDS and a
null pool for the domU), RTDS parameters; ~25 s each here.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from irqlab.runner.machines import MACHINES
from irqlab.runner.xen import cached_binaries
from irqlab.runner.xen_dom0 import dom0_cache_dir
from irqlab.store import Store
from tests.conftest import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

X86 = MACHINES["x86_64"]
SAMPLES = 1500


@pytest.fixture(scope="module")
def ready():
    if shutil.which(X86.qemu) is None:
        pytest.skip("qemu-system-x86_64 missing: run ./setup.sh --install-only")
    if not cached_binaries("amd64"):
        pytest.skip("no amd64 Xen hypervisor cached: run scripts/fetch-xen.sh")
    if not (dom0_cache_dir() / ".complete").exists():
        pytest.skip("no dom0 toolstack cached: run scripts/fetch-xen-dom0.sh")
    subprocess.run(["make", "-s", "-C", str(X86.probe.parents[2]), "ARCH=x86_64"],
                   check=True)
    return True


def _rtds_xen() -> bool:
    return any("rtds" in (b.schedulers() or []) for b in cached_binaries("amd64"))


@pytest.fixture(scope="module")
def runs(ready, tmp_path_factory):
    db = tmp_path_factory.mktemp("xen-dom0") / "irqlab.duckdb"
    base = ["run", "--target", "xen", "--xen-dom0", "linux", "--period", "1ms",
            "--samples", str(SAMPLES), "--window", "10s", "--json"]
    idle = run_cli(base + ["--name", "idle", "--knob", "rtds_period=100us",
                           "--knob", "credit2_weight=512", "--knob", "credit2_ratelimit=1ms",
                           "--knob", "credit_tslice=5ms"], db, timeout=150)
    busy_args = base + ["--name", "busy", "--load", "dom0-cpu",
                        "--load", "hypercall:kind=sysctl"]
    if _rtds_xen():
        # One boot for the loads and seed 000/002's isolation: the measured domain alone
        # on a pCPU under null, dom0 (burning CPU, looping hypercalls) on the other
        # under RTDS (test_cpupool_holds_the_measured_domain_alone). Alone on its pCPU
        # the domU is not delayed: at 1 ms it could finish before dom0's load had run
        # long (0.21 s of dom0 CPU measured), so its samples are spread over 6 s.
        busy_args += ["--xen-sched", "rtds", "--xen-pcpus", "2", "--knob", "cpupool=null",
                      "--period", "4ms"]
    busy = run_cli(busy_args, db, timeout=150)
    out = {}
    for name, res in (("idle", idle), ("busy", busy)):
        assert res.code == 0, res.stderr
        with Store(db, read_only=True) as st:
            meta = st.resolve(name).metadata
            stored = sum(b.num_rows for b in st.iter_samples(res.summary["run_id"]))
        out[name] = (res.summary, meta, stored)
    return out


def test_domu_probe_delivers_every_sample(runs) -> None:
    for name, (summary, meta, stored) in runs.items():
        assert (summary["status"], summary["accel"], summary["emulated"]) == (
            "ok", "tcg", True)
        assert summary["samples"] == SAMPLES and summary["lost"] == 0
        assert stored == SAMPLES
        xen = meta["xen"]
        pooled = name == "busy" and _rtds_xen()
        assert xen["dom0_os"] == "linux"
        assert xen["sched_in_use"] == ("rtds" if pooled else "credit2")
        assert xen["dom0"]["domu"]["domid"] == "1"
        # boot to the domU's creation: ~17-24 s on a quiet host (goal <= 30 s). How long
        # is TCG's pace, not a property of the run: only that it was recorded, in order.
        assert 0 < xen["boot_s"]["dom0_ready"] < xen["boot_s"]["domu_created"], xen["boot_s"]


def test_rtds_knob_recorded_not_applicable_under_credit2(runs) -> None:
    hooks = runs["idle"][1]["hooks"]
    assert hooks["knob:rtds_period"]["status"].startswith("not applicable here: the "
                                                          "scheduler is credit2")
    assert hooks["knob:credit_tslice"]["status"].startswith("not applicable here: the "
                                                            "scheduler is credit2")


def test_credit2_parameters_applied_and_read_back_from_xl(runs) -> None:
    hooks = runs["idle"][1]["hooks"]
    weight, ratelimit = hooks["knob:credit2_weight"], hooks["knob:credit2_ratelimit"]
    assert weight["status"] == "applied" and "irqlab-probe 1 512 " in weight["xl_reports"]
    assert ratelimit["status"] == "applied" and "ratelimit=1000us" in ratelimit["xl_reports"]


def test_dom0_cpu_load_and_hypercalls_ran(runs) -> None:
    idle, busy = runs["idle"][0], runs["busy"][0]
    load = runs["busy"][1]["hooks"]["load:dom0-cpu"]
    # dom0's load processes were charged CPU time (from /proc, in 1/100 s): how much is
    # TCG's pace and when the load began against the probe (0.21-0.87 s in the pooled
    # run, > 1 s when the domU shares dom0's pCPU), not the load's.
    assert "error" not in load and load["dom0_cpu_s"] > 0
    # The domU was unpaused only once both loads ran: its first sample is under them.
    said = [r.split()[0] for r in runs["busy"][1]["xen"]["dom0"]["reports"]]
    assert said.index("unpaused") > max(said.index("load:dom0-cpu"),
                                        said.index("load:hypercall")), said
    hyper = runs["busy"][1]["hooks"]["load:hypercall"]
    assert hyper["command"] == "xl info" and hyper["loops"] > 0  # 37 in a 1500-sample run
    # Whether the load *delays* the domU is not asserted here: under TCG the idle run's
    # dom0 (its kernel and the ring forwarder, emulated as slowly as the rest) already
    # holds the one pCPU for most of the domU's latency. Traced (explain, xentrace): idle
    # "runnable/blocked while d0v0 ran" 4.8 of 6.4 s of latency (77 %), busy 8.2 of 9.8 s
    # (84 %); means idle/busy 0.5/9.5 ms p50 quiet, but 5.0/6.2 ms mean at host load 6
    # and 5.2/9.6 ms p50 in CI: how much the load adds is the host's load's business.
    # What the load did is shown per sample by `irqlab explain` (tests/integration/
    # test_xen_explain.py checks that attribution); here both runs are recorded whole.
    # (With RTDS cached the busy run also isolates the domU in a null pool of its own.)
    assert idle["samples"] == busy["samples"] == SAMPLES


@pytest.mark.skipif(not _rtds_xen(), reason="no amd64 Xen with RTDS cached: run "
                                             "scripts/build-xen-rtds.sh amd64")
def test_rtds_parameters_applied_and_read_back(ready, tmp_path) -> None:
    from irqlab.models.rtds import rtds_bound
    res = run_cli(["run", "--target", "xen", "--xen-dom0", "linux", "--xen-sched", "rtds",
                   "--period", "10ms", "--samples", "300", "--json",
                   "--knob", "rtds_period=2ms", "--knob", "rtds_budget=1ms"],
                  tmp_path / "rtds.duckdb", timeout=150)
    assert res.code == 0, res.stderr
    assert res.summary["samples"] == 300 and res.summary["lost"] == 0
    with Store(tmp_path / "rtds.duckdb", read_only=True) as st:
        meta = st.resolve(str(res.summary["run_id"])).metadata
    assert meta["xen"]["sched_in_use"] == "rtds"
    for key in ("knob:rtds_period", "knob:rtds_budget"):
        assert meta["hooks"][key]["status"] == "applied", meta["hooks"][key]
    # xl sched-rtds -v all read back: name, domid, vCPU, period (us), budget (us), ...
    assert meta["xen"]["dom0"]["rtds"].split()[1:6] == ["irqlab-probe", "1", "0", "2000",
                                                        "1000"]
    # The model's bound, 2(P-B) = 2 ms, is what RTDS alone may add; the emulated
    # figures carry TCG's own delays on top, so the run's max is recorded, not compared.
    assert rtds_bound(2_000_000, 1_000_000).bound_ns == 2_000_000


@pytest.mark.skipif(not _rtds_xen(), reason="no amd64 Xen with RTDS and null cached: run "
                                             "scripts/build-xen-rtds.sh amd64")
def test_cpupool_holds_the_measured_domain_alone(runs) -> None:
    # Seed 000/002's isolation: the measured domain alone on a pCPU under null, dom0
    # (burning CPU) on the other under RTDS — the busy run (see ``runs``).
    meta = runs["busy"][1]
    assert meta["hooks"]["knob:cpupool"]["status"] == "applied", meta["hooks"]
    # xl cpupool-list after xl create: name, CPUs, scheduler, active, domains.
    pools = {p.split()[0]: p.split()[1:] for p in meta["xen"]["dom0"]["cpupool"].split(";")
             if p.strip()}
    assert pools["irqlab-pool"] == ["1", "null", "y", "1"], pools
    assert pools["Pool-0"][:2] == ["1", "rtds"], pools
