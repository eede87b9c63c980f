"""`irqlab run --break-at` on a real native run (issue 32): a SCHED_FIFO hog at a higher
priority than the probe, on the probe's CPU, spins 2 ms every second for a bounded time;
the traced run, asked for 20 s, stops at its first sample above 1 ms, and `explain` of a
break inside a spin names the hog for it.

The hog changes only its own thread (its priority ends with it); it is killed if alive."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration]
XDIST_GROUP = "host"          # no guest: a native probe, tracefs (tests/conftest.py)

CPU, PROBE_PRIO, HOG_PRIO = 1, 90, 95
HOG_NS, EVERY_S, HOG_DELAY_S, HOG_RUN_S = 2_000_000, 1.0, 2.0, 8.0
BREAK_NS, RUN_S = 1_000_000, 20

# Bounded: sleeps, spins HOG_NS every EVERY_S for HOG_RUN_S, prints its spins, exits.
_HOG = r"""
import ctypes, json, os, sys, time
ctypes.CDLL(None).prctl(15, b"irqlab-hog", 0, 0, 0)      # PR_SET_NAME
cpu, prio, spin, every, delay, run = sys.argv[1:]
os.sched_setaffinity(0, {int(cpu)})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(prio)))
mono = time.monotonic_ns
time.sleep(float(delay))
spins, end = [], mono() + int(float(run) * 1e9)
while mono() < end:
    t0 = mono()
    while mono() - t0 < int(spin):
        pass
    spins.append((t0, mono()))
    sys.stdout.write(json.dumps(spins[-1]) + "\n")
    sys.stdout.flush()
    time.sleep(float(every))
"""


def test_a_traced_native_run_stops_at_the_hog_and_explain_names_it(tmp_path, probe_built):
    if os.geteuid() != 0 or (os.cpu_count() or 1) < 2:
        pytest.skip("needs root (tracefs, SCHED_FIFO) and 2 CPUs")
    db = tmp_path / "irqlab.duckdb"
    hog = subprocess.Popen([sys.executable, "-c", _HOG, str(CPU), str(HOG_PRIO),
                            str(HOG_NS), str(EVERY_S), str(HOG_DELAY_S), str(HOG_RUN_S)],
                           stdout=subprocess.PIPE, text=True)
    try:
        run = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                              "native", "--cpus", str(CPU), "-p", str(PROBE_PRIO),
                              "-D", str(RUN_S), "--break-at", "1ms", "--trace", "--json",
                              "-n", "broke", "--db", str(db)],
                             capture_output=True, text=True, timeout=120)
    finally:
        hog.kill()
        spins = [json.loads(line) for line in hog.communicate(timeout=10)[0].splitlines()]
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    summary = next(o for o in lines if o["type"] == "summary")
    assert run.returncode == 1, run.stderr
    assert summary["status"] == "stopped-at-break", summary["message"]
    brk = summary["break_sample"]
    assert brk["latency_ns"] > BREAK_NS
    # It stopped at the break, long before its 20 s (20,000 periods of 1 ms).
    assert summary["samples"] < RUN_S * 1000 // 2
    deadline = brk["deadline_tick"]          # native ticks: CLOCK_MONOTONIC ns
    if not any(s0 <= deadline < s1 for s0, s1 in spins):
        return      # host noise crossed 1 ms before the hog did: nothing to name
    ex = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "explain", "broke",
                         "--json", "--db", str(db)], capture_output=True, text=True,
                        timeout=300)
    assert ex.returncode == 0, ex.stderr
    explained = json.loads(ex.stdout.splitlines()[0])
    (sample,) = [s for s in explained["samples"] if s["seq"] == brk["seq"]]
    top = max(sample["causes"], key=lambda c: c["ns"])
    # The trace names the hog by its kernel pid: Popen's outside a pid namespace, another
    # inside one (a CI container), so it is found by its name.
    assert top["cause"].startswith("preempted by irqlab-hog/"), json.dumps(sample)
