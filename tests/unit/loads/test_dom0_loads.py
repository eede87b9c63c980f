"""Dom0-side loads and Xen knobs: parsing, and how the Xen target bakes them into the
Linux dom0's plan (or marks them not applicable)."""

from __future__ import annotations

import pytest

from irqlab.knobs import make_knob
from irqlab.loads import parse_load
from irqlab.measure.config import config_for_target
from irqlab.runner.xen_dom0 import dom0_cache_dir
from irqlab.targets.xen import XenTarget


def test_domain_create_params() -> None:
    load = parse_load("domain-create:size=2G,delay=10s,every=15s")
    kind, name, params = load.dom0_load()
    assert (kind, name) == ("domain-create", "load:domain-create")
    assert params == {"delay_ns": 10**10, "size_bytes": 2 << 30, "every_ns": 15 * 10**9}


def test_hypercall_load_loops_the_kind_s_toolstack_command() -> None:
    from irqlab.runner.xen_dom0 import Dom0Load, _load_script
    for kind, command in (("sysctl", "xl info"), ("domctl", "xl list"),
                          ("evtchn", "xenstore-write /irqlab/hcall $n")):
        load = parse_load(f"hypercall:kind={kind},delay=2s")
        script = _load_script(Dom0Load(*load.dom0_load()))
        assert f"while :; do {command} >/dev/null 2>&1; n=$((n + 1))" in script
        assert script.startswith("( sleep 2.000; ") and "/irqlab/cpu-pids" in script
    summary = parse_load("hypercall").summarise([], {"loads": {"hypercall_loops": "412"}})
    assert summary == {"hypercall_kind": "sysctl", "command": "xl info", "loops": 412}


@pytest.mark.parametrize("spec,words", [("domain-create", "needs size="),
                                        ("hypercall:kind=mmu", "not one of sysctl"),
                                        ("dom0-cpu:cpus=1", "cpus= does not apply"),
                                        ("dom0-console:bytes_per_s=1", "bytes_per_s")])
def test_bad_specs(spec: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_load(spec)


def test_rtds_knob_bounds() -> None:
    assert make_knob("rtds_period", "100us").parsed == 100_000
    with pytest.raises(ValueError, match="RTDS budget must be 10 us"):
        make_knob("rtds_budget", "1us")
    with pytest.raises(ValueError, match="whole us"):
        make_knob("rtds_period", "100500ns")
    with pytest.raises(ValueError, match="scheduler"):
        make_knob("cpupool", "fifo")


@pytest.mark.skipif(not (dom0_cache_dir() / ".complete").exists(),
                    reason="run scripts/fetch-xen-dom0.sh")
def test_target_bakes_hooks_into_dom0_plan() -> None:
    hooks = [make_knob("pin", "1"), make_knob("rtds_period", "100us"),
             make_knob("cpupool", "null"), parse_load("dom0-cpu:workers=2"),
             parse_load("dom0-console:bytes_per_s=5000")]
    cfg = config_for_target("xen", {"xen_dom0": "linux", "xen_pcpus": 2},
                               period_ns=1_000_000, samples=100)
    cfg.hooks = hooks
    plan = XenTarget().dom0_plan(cfg)
    assert plan.pin == "1" and plan.pcpus == 2
    assert [ld.kind for ld in plan.loads] == ["dom0-cpu", "dom0-console"]
    assert plan.loads[0].params["workers"] == 2
    assert "samples=100" in plan.probe_cmdline and "sink" not in plan.probe_cmdline
    # credit2 (Debian's Xen): RTDS parameters cannot apply; null is not built in.
    assert plan.rtds_period_ns is None
    assert hooks[1].status.startswith("not applicable here: the scheduler is credit2")
    if plan.cpupool_sched is None:
        assert hooks[2].status.startswith("not applicable here: this Xen has only")
