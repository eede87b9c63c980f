"""Xen on Arm explained (issue 42): `irqlab run --target xen --xen-dom0 linux --arch arm64
--trace` then `irqlab explain`, under QEMU TCG, two runs.

1. The probe an xl-created domU on dom0's pCPU, a dom0 CPU load, the probe disabling
   interrupts for 2 ms across every 50th deadline. Checked: explain maps every sample
   through the probe's own CNTPCT - CNTVCT offset (xentrace stamps Xen on Arm's records
   with CNTPCT_EL0) with a bound under 1 us, every mapped handler entry falls inside a
   running interval of the probe's vCPU (the check explain makes itself), the injected
   2 ms are charged to the probe's own code, and the dom0 load's spikes to dom0.
2. The probe a dom0less domU (built by Xen at boot, waiting at its start gate until dom0's
   ringfwd forwards its ring), a busy dom0less neighbour pinned with it on pCPU 1, dom0 on
   pCPU 0: the spikes are charged to the neighbour.

Emulated latencies: functional evidence only; nothing here depends on TCG's pace.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from irqlab.explain.xen import PROBE_RUNNING
from irqlab.samples.record import RECORD_DTYPE
from irqlab.store import Store
from irqlab.xen.capture import read_xentrace
from tests.conftest import run_cli
from tests.console_frames import console_log
from tests.integration._helpers import need_arm64_xen_dom0

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

INJECT_EVERY = 50
INJECT_IRQOFF_NS = 2_000_000
SPIKE_NS = 1_000_000           # a spike: over a period late


def _run(tmp_path_factory, name: str, args: list[str]) -> tuple:
    need_arm64_xen_dom0()
    db = tmp_path_factory.mktemp(f"xen-explain-arm64-{name}") / "irqlab.duckdb"
    res = run_cli(["run", "--target", "xen", "--xen-dom0", "linux", "--arch", "arm64",
                   "--period", "1ms", "--trace", "--name", name, "--json", *args], db,
                  timeout=240)
    assert res.code == 0, res.stderr[-2000:]
    assert res.summary["lost"] == 0, res.summary
    with Store(db, read_only=True) as st:
        run = st.resolve(name)
        flags = {int(q): int(f) for b in st.iter_samples(run.run_id)
                 for q, f in zip(b.column("seq").to_pylist(), b.column("flags").to_pylist())}
    ex = run_cli(["explain", name, "--threshold", "0", "--json"], db)
    assert ex.code == 0, ex.stderr[-2000:]
    (js,) = ex.lines
    return res.summary, run.metadata, flags, js, db


@pytest.fixture(scope="module")
def xl_domu(tmp_path_factory):
    return _run(tmp_path_factory, "xl", [
        "--samples", "800", "--load", "dom0-cpu",
        "--inject-irqoff", f"{INJECT_IRQOFF_NS // 1_000_000}ms",
        "--inject-every", str(INJECT_EVERY)])


@pytest.fixture(scope="module")
def dom0less(tmp_path_factory):
    return _run(tmp_path_factory, "dl", [
        "--samples", "400", "--xen-domain", "dom0less", "--neighbour", "cpu",
        "--xen-pcpus", "2", "--pin", "1", "--xen-opt", "dom0_vcpus_pin"])


def _top(sample: dict) -> str:
    return sample["causes"][0]["cause"]


def _assert_charged_to(spikes: list[dict], vcpu: str) -> None:
    """The interferer ``vcpu`` ran in nearly every spike's window and is charged there,
    and comes first on >= 90 % of the spikes the probe's own code does not lead: under TCG
    the path from Xen's switch to the handler is emulated, slowly when the host is busy
    (the neighbour's run: 40 of 798 spikes on a quiet host, 122 of 490 beside
    stress-ng)."""
    assert len(spikes) >= 20, len(spikes)
    ran = [s for s in spikes if any(vcpu in c["cause"] and c["ns"] for c in s["causes"])]
    assert len(ran) >= 0.9 * len(spikes), Counter(_top(s) for s in spikes)
    others = [s for s in spikes if _top(s) != PROBE_RUNNING]
    theirs = [s for s in others if vcpu in _top(s)]
    assert len(others) >= 0.5 * len(spikes), Counter(_top(s) for s in spikes)
    assert len(theirs) >= 0.9 * len(others), Counter(_top(s) for s in others)


def test_every_sample_is_mapped_through_the_probes_counter_offset(xl_domu) -> None:
    summary, meta, _flags, js, _db = xl_domu
    ref = meta["probe"]["ref_counter"]
    assert ref["counter"] == "arm64-cntpct" and 0 <= ref["error_tick"] <= 62, ref
    clock = js["clock"]
    assert clock["method"].startswith("the probe's CNTPCT - CNTVCT offset")
    assert clock["offset_tick"] == ref["offset_tick"]
    assert clock["error_bound_ns"] <= 1000, clock
    explained = [s for s in js["samples"] if s["status"] == "explained"]
    assert len(explained) >= 0.99 * summary["samples"], (js["not_traced"], js["incomplete"])
    # every handler entry inside a running interval of the probe's vCPU
    assert clock["causality"]["checked"] == len(explained)
    assert clock["causality"]["violations"] == 0, clock["causality"]
    # Xen 4.17 on Arm traces nothing of the IRQ path: said, not guessed
    assert {"physical timer interrupt in Xen", "vGIC injection", "guest entered"} == set(
        js["stages_not_traced"])
    steps = {(st["from"], st["to"]) for st in js["stage_summary"]}
    assert ("probe vCPU woken (runnable)", "probe vCPU switched in (running)") in steps


def test_injected_irq_off_is_charged_to_the_probe(xl_domu) -> None:
    summary, _meta, flags, js, _db = xl_domu
    recorded = sorted(q for q, f in flags.items() if f & 1)
    assert all((q + 1) % INJECT_EVERY == 0 for q in recorded), recorded
    assert len(recorded) == summary["injected"] >= 4, recorded
    injected = [s for s in js["samples"] if flags.get(s["seq"], 0) & 1
                and s["status"] == "explained"]
    assert len(injected) == len(recorded)
    # The probe spins with interrupts masked for 2 ms past the deadline, on its own
    # counter, which is the trace's up to ~80 ns: that span was the probe running, or
    # preempted by dom0 (its load) while it spun, which the trace then shows. So its own
    # code carries the 2 ms less any preemption, on every injected sample.
    for s in injected:
        own = sum(c["ns"] for c in s["causes"] if c["cause"] == PROBE_RUNNING)
        preempted = sum(c["ns"] for c in s["causes"] if c["cause"].startswith(
            "runnable while d0"))
        assert own + preempted >= 0.95 * INJECT_IRQOFF_NS, s["causes"][:4]
    first = [s for s in injected if _top(s) == PROBE_RUNNING]
    alone = [s for s in injected if all(not c["cause"].startswith("runnable while d0")
                                        for c in s["causes"] if c["ns"])]
    assert all(_top(s) == PROBE_RUNNING for s in alone), [s["causes"][:2] for s in alone]
    assert len(first) >= 0.5 * len(injected), Counter(_top(s) for s in injected)


def test_dom0_load_spikes_are_charged_to_dom0(xl_domu) -> None:
    _summary, meta, flags, js, _db = xl_domu
    assert meta["hooks"]["load:dom0-cpu"]["dom0_cpu_s"] > 0, meta["hooks"]["load:dom0-cpu"]
    spikes = [s for s in js["samples"] if s["status"] == "explained"
              and s["latency_ns"] > SPIKE_NS and not flags.get(s["seq"], 0) & 1]
    _assert_charged_to(spikes, "d0v0")


def test_dom0less_neighbour_spikes_are_charged_to_the_neighbour(dom0less) -> None:
    summary, meta, _flags, js, _db = dom0less
    xen = meta["xen"]
    assert xen["domain"] == "dom0less" and xen["neighbour"] == "cpu"
    assert (xen["measured_domid"], xen["neighbour_domid"]) == (1, 2)
    assert xen["dom0"]["domu"] == {"domid": "1", "dom0less": "1"}, xen["dom0"]["domu"]
    # both domUs pinned on pCPU 1 (xl vcpu-list: Name ID VCPU CPU State Time Affinity;
    # a dom0less domain has no name in xenstore)
    for key, domid in (("vcpu_list", "1"), ("neighbour_vcpu_list", "2")):
        words = xen["dom0"][key].split()
        assert (words[1], words[3], words[6]) == (domid, "1", "1"), (key, words)
    assert js["clock"]["causality"]["violations"] == 0 and js["not_traced"] == 0
    spikes = [s for s in js["samples"] if s["latency_ns"] > SPIKE_NS]
    _assert_charged_to(spikes, "d2v0")
    # dom0 has pCPU 0 to itself (dom0_vcpus_pin): it never ran where the probe waited
    assert not any("d0v0" in c["cause"] for s in spikes for c in s["causes"] if c["ns"])
    assert summary["samples"] == 400


def test_a_boards_console_log_and_xentrace_import_and_explain_as_the_run(
        xl_domu, tmp_path) -> None:
    """docs/arm64.md's board path on files made here: the probe's console log (the run's
    own records, framed as the probe frames them) and dom0's xentrace file as xentrace
    writes it; imported, explain gives each sample the live run's causes."""
    _summary, meta, _flags, js, db = xl_domu
    with Store(db, read_only=True) as st:
        batches = list(st.iter_samples(st.resolve("xl").run_id))
    recs = np.zeros(sum(b.num_rows for b in batches), RECORD_DTYPE)
    for key in ("seq", "deadline_tick", "entry_tick", "flags"):
        recs[key] = np.concatenate([b.column(key).to_numpy() for b in batches])
    recs = recs[np.argsort(recs["seq"])]
    console = tmp_path / "board-console.log"
    console.write_bytes(console_log(meta["probe"], recs))
    _header, data = read_xentrace(meta["hooks"]["xentrace"]["file"])
    trace = tmp_path / "board.xentrace"
    trace.write_bytes(bytes(data))                  # as `xentrace -D -e all FILE` wrote it
    board_db = tmp_path / "board.duckdb"
    res = run_cli(["import", "irqlab-console", str(console), "--xentrace", str(trace),
                   "--name", "board", "--json"], board_db)
    assert res.code == 0, res.stderr[-2000:]
    (info,) = res.lines
    assert info["xentrace"]["records"] == meta["hooks"]["xentrace"]["records"]
    assert info["runs"][0]["samples_stored"] == len(recs)
    ex = run_cli(["explain", "board", "--threshold", "0", "--json"], board_db)
    assert ex.code == 0, ex.stderr[-2000:]
    (board,) = ex.lines
    assert board["clock"]["offset_tick"] == js["clock"]["offset_tick"]
    assert board["clock"]["causality"]["violations"] == 0
    live = {s["seq"]: s["causes"] for s in js["samples"]}
    assert {s["seq"]: s["causes"] for s in board["samples"]} == live
