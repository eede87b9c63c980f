"""`irqlab run --target xen --xen-dom0 linux --trace` then `irqlab explain` and
`irqlab xentrace` on what it recorded, under QEMU TCG (one boot, ~25 s here).

The run: 2500 samples at 1 ms, dom0 creating (and destroying) a 256 MiB domain after 1 s,
the probe disabling interrupts for 2 ms across every 50th deadline. Checked on the real
capture: it arrived whole through the ivshmem channel (complete, nothing lost); the
xentrace summary equals xenalyze's; explain maps every sample, does not blame the
injected irq-off samples on Xen (the probe's own 2 ms are charged to it on every one
that no other vCPU interrupted, first on >= 90 % of those; the rest were also
descheduled for dom0 or waited for Xen's timer, which the trace shows), names a dom0
hypercall for a spike while the extra domain was created or destroyed (when dom0 got
that far within the run), and writes a Perfetto trace that parses. Emulated latencies:
functional evidence only.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from irqlab.runner.machines import MACHINES
from irqlab.runner.xen import cached_binaries
from irqlab.runner.xen_dom0 import dom0_cache_dir
from irqlab.store import Store
from irqlab.xen.capture import read_xentrace
from irqlab.explain.run import _samples
from irqlab.explain.xen import (PROBE_BLOCKED_IDLE, PROBE_RUNNING, TRC_DOM0_DOM_ADD,
                                TRC_DOM0_DOM_REM, _records, explain_samples, load_capture,
                                probe_vcpu)
from tests.conftest import run_cli
from tests.unit.xen.test_summary import assert_agree

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

X86 = MACHINES["x86_64"]
INJECT_EVERY = 50
INJECT_IRQOFF_NS = 2_000_000


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    if shutil.which(X86.qemu) is None:
        pytest.skip("qemu-system-x86_64 missing: run ./setup.sh --install-only")
    if not cached_binaries("amd64"):
        pytest.skip("no amd64 Xen hypervisor cached: run scripts/fetch-xen.sh")
    if not (dom0_cache_dir() / ".complete").exists():
        pytest.skip("no dom0 toolstack cached: run scripts/fetch-xen-dom0.sh")
    subprocess.run(["make", "-s", "-C", str(X86.probe.parents[2]), "ARCH=x86_64"],
                   check=True)
    db = tmp_path_factory.mktemp("xen-explain") / "irqlab.duckdb"
    res = run_cli(["run", "--target", "xen", "--xen-dom0", "linux", "--period", "1ms",
                   "--samples", "2500", "--load", "domain-create:size=256M,delay=1s",
                   "--inject-irqoff", f"{INJECT_IRQOFF_NS // 1_000_000}ms",
                   "--inject-every", str(INJECT_EVERY),
                   "--trace", "--name", "traced", "--json"], db, timeout=240)
    assert res.code == 0, res.stderr[-2000:]
    with Store(db, read_only=True) as st:
        run = st.resolve("traced")
        flags = np.concatenate([b.column("flags").to_numpy()
                                for b in st.iter_samples(run.run_id)])
        seqs = np.concatenate([b.column("seq").to_numpy()
                               for b in st.iter_samples(run.run_id)])
    return db, res.summary, run.metadata, dict(zip(seqs.tolist(), flags.tolist()))


def test_the_capture_came_whole_through_the_channel(traced) -> None:
    _db, summary, meta, _flags = traced
    x = meta["hooks"]["xentrace"]
    assert summary["lost"] == 0 and x["problems"] == []
    assert x["complete"] and x["channel_state"] == "done"
    assert x["records"] > 10_000 and x["lost_records"] == 0
    assert x["tsc_hz"] and Path(x["file"]).exists()
    # (dom0's own "xentrace trcfwd: bytes=…" report may not reach the console before the
    # host stops QEMU: the channel's state is the proof)
    assert meta["xen"]["dom0"]["xentrace_started"]["cpu_khz"]


def test_xentrace_agrees_with_xenalyze(traced, tmp_path, monkeypatch) -> None:
    _db, _s, meta, _flags = traced
    header, data = read_xentrace(meta["hooks"]["xentrace"]["file"])
    plain = tmp_path / "capture.trc"
    plain.write_bytes(data)
    monkeypatch.setattr("tests.unit.xen.test_summary.HZ", header["tsc_hz"])
    assert_agree(plain)


def test_explain_blames_the_right_parts(traced, tmp_path) -> None:
    db, summary, meta, flags = traced
    pf = tmp_path / "xen.pftrace"
    res = run_cli(["explain", "traced", "--threshold", "0", "--json", "--perfetto",
                   str(pf)], db)
    assert res.code == 0, res.stderr[-2000:]
    (js,) = res.lines
    assert js["source"] == "xentrace" and js["not_traced"] <= 2   # the capture's ends
    jsonschema = pytest.importorskip("jsonschema")
    schema = Path(__file__).parents[2] / "docs" / "schema" / "explain.schema.json"
    jsonschema.validate(js, __import__("json").loads(schema.read_text()))
    steps = {(st["from"], st["to"]): st for st in js["stage_summary"]}
    assert ("virtual interrupt injected", "guest entered") in steps
    assert all(st["p50_ns"] <= st["p99_ns"] <= st["max_ns"] for st in steps.values())
    samples = {s["seq"]: s for s in js["samples"] if s["status"] == "explained"}
    assert len(samples) >= 2400
    # the probe's own irq-off injection is the guest's, not Xen's. Which targets the
    # probe hit depends on the host: it skips an injection when it reaches the deadline
    # too late (probe.c inject_irqoff, "missed"); a loaded TCG host saw 40 of 50. So
    # compare with what was recorded: every injected sample sits on a target deadline,
    # explain lists each one, and enough were hit for the proportions below to matter.
    recorded = sorted(q for q, f in flags.items() if f & 1)
    assert all((q + 1) % INJECT_EVERY == 0 for q in recorded), recorded
    assert len(recorded) == summary["injected"] >= 2500 // INJECT_EVERY // 5, len(recorded)
    flagged = [s for s in js["samples"] if flags.get(s["seq"], 0) & 1]
    assert sorted(s["seq"] for s in flagged) == recorded
    injected = [s for q, s in samples.items() if flags.get(q, 0) & 1]
    # (on a busy host one or two more than the capture's ends went unmapped once)
    assert len(injected) >= 0.9 * len(flagged), [(s["seq"], s["status"], s["reason"])
                                                 for s in flagged]
    top = Counter(s["causes"][0]["cause"] for s in injected)
    # Xen may also deschedule the spinning vCPU (the trace then shows dom0 ran: true);
    # where no other vCPU took a tenth of the window, the probe's own time must come first
    alone = [s for s in injected
             if sum(c["ns"] for c in s["causes"] if c["cause"].startswith(
                 ("runnable while", "blocked while", "d0v"))) < 0.1 * s["latency_ns"]]
    assert len(alone) >= 0.5 * len(injected), top
    # on every one of those the probe's own 2 ms are charged to the probe; Xen's timer may
    # still have fired late before the spin began (seen once on a busy TCG host: 4.9 ms
    # "blocked: Xen's timer not yet fired", then the probe's 2.2 ms), so first on >= 90 %
    own_ns = {s["seq"]: sum(c["ns"] for c in s["causes"] if c["cause"] == PROBE_RUNNING)
              for s in alone}
    assert all(ns >= 0.8 * INJECT_IRQOFF_NS for ns in own_ns.values()), \
        [s["causes"][:3] for s in alone if own_ns[s["seq"]] < 0.8 * INJECT_IRQOFF_NS]
    first = [s for s in alone if s["causes"][0]["cause"] == PROBE_RUNNING]
    assert len(first) >= 0.9 * len(alone), \
        [s["causes"][:3] for s in alone if s["causes"][0]["cause"] != PROBE_RUNNING]
    # The others were also descheduled for dom0 or waited for Xen's timer, which the
    # trace shows: how many depends on how long dom0's work overlaps the run, i.e. on
    # TCG's pace (5 of 16 on a loaded host, where >= 75 % first was asked of all); their
    # first cause is one of those, never anything else.
    # (Xen's timer not yet fired is PROBE_BLOCKED_IDLE: "probe vCPU blocked: …", seen
    # once in 29 on an unloaded host.)
    others = [s for s in injected if s["causes"][0]["cause"] != PROBE_RUNNING]
    assert all(s["causes"][0]["cause"].startswith(("runnable while", "blocked", "d0v"))
               or s["causes"][0]["cause"] == PROBE_BLOCKED_IDLE
               for s in others), ([s["causes"][:2] for s in others], top)
    # a spike while the extra domain was created or destroyed names a dom0 hypercall.
    # Whether dom0's `xl create` gets that far within the run's 2500 samples is TCG's
    # pace: on a loaded host (dom0 ready at 54 s instead of ~20) the run ended before the
    # create reported anything, and the extra domain is not in the capture. So this part
    # holds when the load says its domain was created; then the capture must show it.
    created = meta["hooks"]["load:domain-create"]["created_ok"]
    if created:
        _check_a_dom0_hypercall_is_named(db, meta)
    else:
        print("domain-create did not create its domain within the run: hypercall part "
              "not applicable", meta["hooks"]["load:domain-create"]["dom0_reports"])
    # the Perfetto trace parses, with the Xen tracks and the spikes
    from irqlab.explain.perfetto import _pb
    trace = _pb().Trace()
    trace.ParseFromString(pf.read_bytes())
    names = {p.track_descriptor.name for p in trace.packet if p.HasField("track_descriptor")}
    assert "Xen pCPU 0: vCPU running" in names and any("spikes" in n for n in names)
    assert js["perfetto"]["spikes"] == len(samples)


def _check_a_dom0_hypercall_is_named(db: Path, meta: dict) -> None:
    """The extra domain is in the capture (created, maybe destroyed), and an explained
    sample in that window names a dom0 hypercall."""
    cap = load_capture(Path(meta["hooks"]["xentrace"]["file"]))
    (_p, _c, add), (_p2, _c2, rem) = (_records(cap, TRC_DOM0_DOM_ADD),
                                      _records(cap, TRC_DOM0_DOM_REM))
    # The probe's domain and the extra one were created in the capture; the extra one's
    # destruction may come after the run (dom0's create and destroy took 7 s of TCG time
    # on a loaded host): then the window reaches the run's end.
    assert len(add) >= 2
    with Store(db, read_only=True) as st:
        run = st.resolve("traced")
        s = _samples(st, run.run_id)
    hz = cap.header["tsc_hz"]
    clock, atts, _ex = explain_samples(cap, probe_vcpu(meta), s["seq"].astype(np.int64),
                                       s["deadline_tick"].astype(np.int64),
                                       s["entry_tick"].astype(np.int64),
                                       np.arange(len(s["seq"])), hz)
    lo = int(add[-1])
    hi = int(rem[-1]) + hz // 10 if len(rem) else max(a.end for a in atts)
    during = [a for a in atts if a.status == "explained" and lo <= a.end and a.start <= hi]
    assert during
    named = [k for a in during for k, v in a.causes.items()
             if k.startswith("d0v0 in hypercall") and v > 0]
    assert named, [a.ranked()[:2] for a in sorted(during, key=lambda a: -a.latency_tick)[:3]]


def test_report_says_where_the_time_goes(traced, tmp_path) -> None:
    db, _s, _meta, _flags = traced
    html = tmp_path / "r.html"
    res = run_cli(["report", "traced", "-o", str(html), "--json"], db)
    assert res.code == 0, res.stderr[-2000:]
    text = html.read_text()
    section = text[text.index("Where the time goes"):text.index("<h3>Plots</h3>")]
    assert "virtual interrupt injected" in section and "guest entered" in section
    assert "Not traced: physical timer interrupt in Xen" in section
    assert "irqlab explain" in section and "Not explained" not in section
    bare = tmp_path / "bare.html"
    assert run_cli(["report", "traced", "-o", str(bare), "--no-explain"], db).code == 0
    assert "Where the time goes" not in bare.read_text()
