"""A nested arm64 KVM host under QEMU TCG (`--target kvm-arm64`, issue 42): the probe as
the KVM guest of Debian's arm64 kernel, its ring copied out by irqvmm, the L1 kernel's
ftrace streamed out by gtrace, and irqlab-hog spinning 5 ms every 37 ms at SCHED_FIFO on
the vCPU thread's CPU (`--load kvm-host-hog`). One run, 300 samples at 10 ms.

Asserted: the samples are stored with none lost; the run is marked emulated; the L1
capture came back with its vCPU thread and counter offset; explain names the hog as what
delayed a host-side stage on >= 90 % of the hog's spikes (judged by the hog's own
stamps, tests/unit/explain/test_kvm_arm64.judge); every explained sample's stages follow
arm64 KVM's timer path in time order; `irqlab explain --sample` prints one spike's whole
stage list. Emulation speed is never asserted."""

from __future__ import annotations

import shutil

import pytest

from irqlab.explain.kvm_arm64 import HOST_STAGES, STAGE_ORDER, explain_kvm_arm64
from irqlab.explain.seam import Request, Silent
from irqlab.runner.kvm_arm64 import l1_busybox, l1_kernel
from irqlab.store import Store
from tests.conftest import call_cli, run_cli
from tests.unit.explain.test_kvm_arm64 import hog_spins, judge

pytestmark = [pytest.mark.integration, pytest.mark.emulated]

SAMPLES = 300


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    try:
        l1_kernel()
        l1_busybox()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    for tool in ("qemu-system-aarch64", "aarch64-linux-gnu-gcc", "dtc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: ./setup.sh --install-only installs it")
    db = tmp_path_factory.mktemp("kvm-arm64") / "irqlab.duckdb"
    r = run_cli(["run", "--target", "kvm-arm64", "--period", "10ms", "--samples",
                 str(SAMPLES), "--trace", "--load",
                 "kvm-host-hog:spin=5ms,every=37ms,start=300ms", "--json", "--name",
                 "nested"], db, timeout=600)
    assert r.code == 0, r.stderr[-3000:]
    with Store(db, read_only=True) as st:
        row = st.resolve("nested")
        js, res = explain_kvm_arm64(st, row, Request(threshold_ns=0), Silent())
    return {"db": db, "run": r, "row": row, "js": js, "res": res}


def test_samples_are_stored_with_none_lost_and_marked_emulated(nested) -> None:
    s = nested["run"].summary
    assert s["samples"] == SAMPLES and s["lost"] == 0 and s["status"] == "ok"
    assert s["emulated"] is True and s["arch"] == "arm64"
    assert s["accel"].startswith("kvm (nested")


def test_the_kvm_host_reported_and_its_capture_came_back(nested) -> None:
    meta = nested["row"].metadata
    host = meta["kvm_host"]
    assert host["vmm"]["rc"] == "0" and host["ring"]["records"] == str(SAMPLES)
    assert host["exit"]["reason"] == "system_event"         # the probe's PSCI SYSTEM_OFF
    assert "mode_initialized" in host["ready"]["kvm"]          # KVM started at EL2
    tr = meta["hooks"]["trace"]
    assert tr["kind"] == "kvm-arm64" and tr["status"] == "ok" and tr["dropped_pages"] == 0
    assert tr["vcpu_tids"] and tr["vcpu_cpu"] == 1 and "guest_voffset_tick" in tr
    assert "kvm:kvm_entry" in tr["enabled"] and "kvm:kvm_timer_update_irq" in tr["enabled"]
    assert meta["hooks"]["load:kvm-host-hog"]["status"] == "ok"


def test_the_hog_is_named_on_the_host_side_stage_of_its_spikes(nested) -> None:
    res = nested["res"]
    spins = hog_spins(res.trace)
    judged, named = judge(res.samples, res.explainer.delays, spins)
    print(f"\nhog spikes named on a host-side stage: {len(named)} of {len(judged)} "
          f"({len(spins)} spins); clock error bound "
          f"{nested['js']['clock']['error_bound_ns']} ns")
    assert len(judged) >= 10, (len(judged), len(spins))
    assert len(named) >= 0.9 * len(judged), \
        [(a.seq, res.explainer.delays[a.seq]) for a in judged if a not in named]


def test_stages_follow_the_timer_path_and_causes_add_up(nested) -> None:
    atts = [a for a in nested["res"].samples if a.status == "explained"]
    assert len(atts) >= 0.95 * SAMPLES
    full = 0
    for a in atts:
        assert sum(a.causes.values()) == a.latency_tick
        names = [s for s, _t in a.stages]
        assert names[0] == "deadline" and names[-1] == "ISR entry"
        assert set(names) <= set(STAGE_ORDER)
        assert [t for _s, t in a.stages] == sorted(t for _s, t in a.stages)
        full += set(HOST_STAGES) <= set(names)
    assert full >= 0.9 * len(atts), full


def test_explain_prints_one_spikes_full_stage_list(nested) -> None:
    worst = max(nested["js"]["samples"], key=lambda s: s["latency_ns"])
    r = call_cli(["explain", "nested", "--sample", str(worst["seq"]), "--wide"], nested["db"])
    assert r.code == 0, r.stderr
    print("\n" + r.stdout)
    stages = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("stages:"))
    assert stages.index("deadline") < stages.index("guest entry") < stages.index("ISR entry")
    assert "step 1, deadline -> " in r.stdout
