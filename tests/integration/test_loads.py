"""Each load really starts, really loads the system (CPU time of its processes, from
/proc) and stops with no process left behind."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from irqlab.loads import group_members, parse_load

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

# (spec, CPU seconds its processes must burn). Not per wall second: other jobs share this
# host's 2 cores, so a burner gets a fraction of a CPU; the test waits until the load has
# burned this much (at most 60 s, a hang guard). A sleeping process burns ~0 and never
# gets there, so these still prove real work; I/O loads mostly wait.
SPECS = [("cpu:cpus=1,workers=1", 0.15), ("hackbench:groups=1,loops=200", 0.15),
         ("io:size=8M,drop=200ms", 0.02), ("cache:workers=1", 0.15),
         ("memory:mode=alloc,size=64M", 0.15), ("memory:mode=vm,size=256M,accel=tcg", 0.02),
         ("console:accel=tcg", 0.15), ("neighbour:accel=tcg,cpus=1", 0.15)]


@pytest.mark.parametrize("spec, min_cpu", SPECS, ids=[s for s, _ in SPECS])
def test_load_starts_loads_and_stops_without_orphans(spec, min_cpu, tmp_path, monkeypatch,
                                                     probe_built):
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path))
    load = parse_load(spec)
    if shutil.which(load.tool) is None:
        pytest.skip(f"{load.tool} not installed (./setup.sh installs it)")
    load.before_start()
    load.after_start(None)
    pgid = load.proc.pid
    end = time.monotonic() + 60
    while load.cpu_seconds() < min_cpu:
        assert time.monotonic() < end, f"{spec}: {load.cpu_seconds():.3f} CPU s in 60 s"
        assert group_members(pgid), f"{spec}: its processes ended: {load.metadata()}"
        time.sleep(0.05)
    pids = group_members(pgid)
    assert pids, "the load has processes while it runs"
    checked = 0
    for pid in pids:                      # placement: every process on the asked CPUs
        try:
            affinity = os.sched_getaffinity(pid)
        except ProcessLookupError:
            continue                      # short-lived workers (hackbench) come and go
        assert affinity <= set(load.cpus)
        checked += 1
    assert checked, "no load process lived long enough to check its placement"
    load.stop()
    meta = load.metadata()
    assert meta["status"] == "ok", meta
    assert meta["cpu_s"] >= min_cpu, meta
    assert group_members(pgid) == [], "no orphan left"
    assert not any(p.exists() for p in (tmp_path / "journal").glob("*.jsonl"))
