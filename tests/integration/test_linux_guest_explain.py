"""`irqlab explain` of a Linux-guest run across the guest/host boundary (issues 29, 42).

One TCG run of Debian's kernel with `--trace` (the host's capture around QEMU and the
guest kernel's own), for each guest architecture (x86_64; arm64: Debian's arm64 kernel
on QEMU virt, GICv3, the guest's counter CNTVCT_EL0 and the host capture on
CLOCK_MONOTONIC), the vCPU thread pinned to host CPU 1, and two known preempters,
each stamping its own spins:
- in the guest, `--load guest-hog`: SCHED_FIFO 95 on the probe's CPU, 2 ms every 100 ms
  (its stamps, guest CLOCK_MONOTONIC, come back as trace-marker lines in the guest
  capture);
- on the host, a SCHED_FIFO 60 thread on CPU 1 spinning 2 ms every 77 ms (its stamps,
  read from the host capture's own trace clock — the TSC for x86 (x86-tsc), CLOCK_MONOTONIC
  for arm64 (mono) — on its stdout; mapped to guest time through explain's guest->host
  clock). On x86, stamped on CLOCK_MONOTONIC and
  mapped through the capture's start/stop markers instead, they were 130-250 µs late
  against the hog's own sched_switch events (the marker is written after the stamp is
  taken), and on a busy CI host far more: spikes the hog had no part in were judged
  its (30 of 79 "named").
A spike whose window overlaps one preempter's spins for at least half its latency (and
the other's not at all) is that preempter's: >= 90 % of the guest hog's spikes must have
"guest: preempted by irqlab-hog/PID prio 95" as their largest guest-side cause; >= 90 %
of the host hog's must have a host-side cause as their largest and name "host: vCPU
thread preempted by irqlab-hhog/PID" among them, on >= 75 % as the largest host-side
one (the host's other load, e.g. a busy CI machine, may add host-side time to any spike:
each layer is judged on its own; on a fresh-clone suite a CFS task took 2.5 ms of a
spike beside the hog's 0.4 ms, let in by RT throttling, and 8 of 68 spikes had another
host thread as their largest host cause). Emulated latencies: the test asserts
attribution, not latency.

The vCPU thread runs at SCHED_FIFO 50 (`--prio`), so the host's ordinary load (a busy CI
machine) cannot preempt it and the two hogs are the spikes' causes; QEMU's other threads
are kept on CPU 0 by the test: its main loop fires TCG's timers, and starved on CPU 1 by
a guest busy in its hog it would make the guest's timer IRQ late for a host reason the
capture of the vCPU thread alone does not show. The main loop also runs at SCHED_FIFO 50
there: beside `stress-ng --cpu 1` it was otherwise kept off CPU 0 for 2-3 ms while the
host hog spun on CPU 1 and the vCPU thread slept, waiting for the timer the main loop
had to fire — rightly explained as `host: QEMU main loop (TCG's timers) preempted by
stress-ng-cpu/…`, but then no spike of the hog's (2 of 68 judged, arm64 guest). A spike
the host capture does not cover (the first ones: the host capture starts once the probe
runs, the guest's before it; such a sample carries the note `host: window outside the
capture`) is not judged for the host hog: no host cause can be named there (2 of 68).

The same run (`--window 1s`) checks issue 44 on a Linux guest: its samples are split
into IRQ and thread parts from the guest's own trace (as a native run's), the guest
hog's time lands in the thread part, and the window lines carry both parts live.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from irqlab.explain.linux_guest import GuestHostClock, explain_linux_guest
from irqlab.explain.load import decode_capture
from irqlab.explain.run import capture_path
from irqlab.explain.seam import Request, Silent, stored_samples
from irqlab.runner.linux_guest import find_kernel
from irqlab.runner.native import NATIVE_PROBE
from irqlab.store import Store
from irqlab.trace.archive import read_archive
from tests.integration._live_parts import check_live_columns, split_rows

pytestmark = [pytest.mark.integration, pytest.mark.emulated, pytest.mark.slow]

# A guest with real-time threads on the host (a SCHED_FIFO hog or vCPU on CPU 1): in the
# "host" group, never beside the native tests' FIFO probes and hogs, which preempted this
# test's threads and theirs (seen unloaded: 13 of 20 hog samples named, irqlab-native in
# the causes; a native explain test's stages 88.9 % < 90 %). Beside another guest (normal-
# priority load) it did not: with three workers the host hog was named on 63 of 101 of
# its spikes. So it also holds the guest lock (tests/conftest.py): no other guest beside.
XDIST_GROUP = "host"
GUEST_LOCK = True

HOST_CPU, VCPU_PRIO, HOST_HOG_PRIO, RUN_S = 1, 50, 60, 6

_HOST_HOG_C = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
static long long mono(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
/* the host capture's trace clock: x86-tsc, or mono (-DSTAMP_MONO) */
#ifdef STAMP_MONO
static unsigned long long stamp(void) { return (unsigned long long)mono(); }
#else
#include <x86intrin.h>
static unsigned long long stamp(void) { return __rdtsc(); }
#endif
int main(int argc, char **argv) {
    int cpu = atoi(argv[1]), prio = atoi(argv[2]);
    /* every 77 ms, not the guest hog's 100: with one period the two hogs' phases stay
       fixed through a run, and a run whose spins overlapped judged none (0 of 54 guest
       spins at load 6); with 77 about 1 in 20 overlaps, whatever the phase */
    long long spin = 2000000, every = 77000000, end = mono() + atoll(argv[3]);
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);
    struct sched_param sp = { .sched_priority = prio };
    prctl(PR_SET_NAME, "irqlab-hhog");
    if (sched_setaffinity(0, sizeof set, &set) || sched_setscheduler(0, SCHED_FIFO, &sp)
        || mlockall(MCL_CURRENT | MCL_FUTURE)) { perror("hhog"); return 1; }
    /* 50 ms out of phase with nothing in particular: bounded by argv[3] ns */
    for (long long next = mono() + 50000000; next < end; next += every) {
        struct timespec t = { next / 1000000000LL, next % 1000000000LL };
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
        long long a = mono(), b;
        unsigned long long tsc_a = stamp(), tsc_b;
        while ((b = mono()) - a < spin) ;
        tsc_b = stamp();
        printf("%llu %llu\n", tsc_a, tsc_b); fflush(stdout);
    }
    return 0;
}
"""


def _guest_spins(guest_header: dict, guest_pages: dict) -> list[tuple[int, int]]:
    pr = decode_capture(guest_header, guest_pages).t("print")
    out = []
    for buf in pr["buf"].tolist():
        text = buf.split(b"\0", 1)[0].decode() if isinstance(buf, bytes) else str(buf)
        if text.startswith("irqlab-hog spin "):
            a, b = text.split()[2:4]
            out.append((int(a), int(b)))
    return out


def _overlap(a: int, b: int, spins: list[tuple[int, int]]) -> int:
    return sum(max(0, min(b, s1) - max(a, s0)) for s0, s1 in spins)


def _children(pid: int) -> list[int]:
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        if int(text[text.rfind(")") + 2:].split()[1]) == pid:
            out.append(int(entry))
    return out


def _keep_off_cpu(qemu: int) -> None:
    """QEMU's threads other than its vCPUs onto CPU 0, its main loop at SCHED_FIFO
    VCPU_PRIO once the run has made its vCPU thread so (the module doc says why; not
    while the kernel boots: an x86 guest's boot beside it once panicked "IO-APIC + timer
    doesn't work!")."""
    try:
        tids = os.listdir(f"/proc/{qemu}/task")
    except OSError:
        return
    running = False
    for tid in tids:
        try:
            comm = Path(f"/proc/{qemu}/task/{tid}/comm").read_text()
            if not comm.startswith("CPU "):
                os.sched_setaffinity(int(tid), {0})
            elif os.sched_getscheduler(int(tid)) == os.SCHED_FIFO:
                running = True
        except OSError:
            continue
    try:
        if running and os.sched_getscheduler(qemu) != os.SCHED_FIFO:
            os.sched_setscheduler(qemu, os.SCHED_FIFO, os.sched_param(VCPU_PRIO))
    except OSError:
        pass


def _run_with_vmm_off_cpu(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + timeout_s
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.communicate()), daemon=True)
    reader.start()
    try:
        while proc.poll() is None and time.monotonic() < end:
            for child in _children(proc.pid):
                _keep_off_cpu(child)
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(30)
    return subprocess.CompletedProcess(argv, proc.returncode, *(out or ["", ""]))


# The host capture's trace clock per guest architecture (the host hog stamps on it).
HOST_TRACE_CLOCK = {"x86_64": "x86-tsc", "arm64": "mono"}


@pytest.fixture(scope="module", params=sorted(HOST_TRACE_CLOCK))
def crossed(request, tmp_path_factory):
    arch = request.param
    if os.geteuid() != 0 or (os.cpu_count() or 1) < 2:
        pytest.skip("needs root (tracefs, SCHED_FIFO) and 2 CPUs")
    if arch == "x86_64" and platform.machine() != "x86_64":
        pytest.skip("the host hog stamps its spins with the TSC (the x86-tsc trace clock)")
    kernel = find_kernel(arch)
    if kernel is None or not kernel.exists():
        pytest.skip(f"no {arch} Linux guest kernel: ./setup.sh --install-only fetches it")
    subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)
    tmp = tmp_path_factory.mktemp(f"linux-guest-explain-{arch}")
    db = tmp / "irqlab.duckdb"
    (tmp / "hhog.c").write_text(_HOST_HOG_C)
    subprocess.run(["cc", "-O2", *(["-DSTAMP_MONO"] if arch != "x86_64" else []), "-o",
                    str(tmp / "hhog"), str(tmp / "hhog.c")], check=True)
    hog = subprocess.Popen([str(tmp / "hhog"), str(HOST_CPU), str(HOST_HOG_PRIO),
                            str(180 * 10**9)], stdout=subprocess.PIPE, text=True)
    try:
        run = _run_with_vmm_off_cpu([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                              "linux-guest", "--arch", arch, "--accel", "tcg",
                              "--boot-timeout", "120s",
                              "--duration", f"{RUN_S}s", "--window", "1s", "--trace",
                              "--load", "guest-hog",
                              "--pin", str(HOST_CPU), "--prio", str(VCPU_PRIO), "--json",
                              "--name", "crossed", "--db", str(db)],
                                    240)
    finally:
        hog.kill()
        out, _ = hog.communicate(timeout=30)
    assert run.returncode == 0, run.stderr[-3000:]
    host_spins_tsc = [tuple(int(x) for x in ln.split()) for ln in out.splitlines() if ln]
    (tmp / "host-spins.txt").write_text(out)          # kept with the run, for a look
    with Store(db, read_only=True) as st:
        row = st.resolve("crossed")
        js, res, _tid = explain_linux_guest(st, row, Request(threshold_ns=30_000), Silent())
        hpath = capture_path(st, row)
        hheader, _pages = read_archive(hpath)
        guest_meta = row.metadata["hooks"]["trace"]["guest"]
        hog_meta = row.metadata["hooks"]["load:guest-hog"]
        parts = st.sample_parts(row.run_id)
        samples = stored_samples(st, row.run_id)
    gheader, gpages = read_archive(guest_meta["file"])
    clock = GuestHostClock(gheader["guest_anchors"], gheader.get("guest_counter_hz", 0))
    clock.offset = js["clock"]["offset_tick"]
    assert hheader["clock"] == HOST_TRACE_CLOCK[arch], hheader["clock"]   # the stamps'
    host_spins = [(clock.to_guest(a), clock.to_guest(b)) for a, b in host_spins_tsc]
    return dict(js=js, res=res, guest_spins=_guest_spins(gheader, gpages),
                host_spins=host_spins, guest_meta=guest_meta, hog_meta=hog_meta,
                arch=arch, run=row, gheader=gheader, gpages=gpages, hpath=hpath,
                clock=clock, parts=parts, samples=samples,
                windows=[w for w in map(json.loads, run.stdout.splitlines())
                         if w.get("type") == "window"])


def _largest(att, layer: str) -> str:
    """The largest cause of one layer ("guest: " or "host: "; "" for any), or ""."""
    return next((k for k, _v in att.ranked() if k.startswith(layer)), "")


def _judged(res, mine, other, host_side: bool = False):
    """The explained spikes that are the ``mine`` preempter's (module doc); with
    ``host_side``, only those the host capture covers."""
    out = []
    for att in res.samples:
        if att.status != "explained":
            continue
        if host_side and any(n.startswith("host: ") for n in att.notes):
            continue
        if _overlap(att.start, att.end, other) or \
                _overlap(att.start, att.end, mine) < att.latency_tick / 2:
            continue
        out.append(att)
    return out


def test_the_guest_capture_came_back_with_its_clock(crossed):
    g, js = crossed["guest_meta"], crossed["js"]
    assert g["status"] == "ok" and g["clock"] == "mono" and g["pages"] > 0
    assert "sched:sched_switch" in g["enabled"] and g["dropped_pages"] == 0
    assert crossed["hog_meta"]["status"] == "ok", crossed["hog_meta"]
    assert js["source"] == "linux-guest" and js["clock"]["error_bound_ns"] is not None
    assert js["clock"]["anchors"] > 0


def test_the_guest_is_the_arch_asked_and_its_figures_are_emulated(crossed):
    run, g = crossed["run"], crossed["gheader"]
    assert run.accel.startswith("tcg") and run.emulated and run.arch == crossed["arch"]
    if crossed["arch"] == "arm64":
        # the guest's counter (CNTVCT_EL0 at QEMU's 62.5 MHz) taken in ns; the timer IRQ
        # stage is arm64's arch_timer IRQ, and the error bound at least one counter tick
        assert g["kernel"].endswith("-arm64") and g["guest_counter_hz"] == 62_500_000
        clock = crossed["js"]["clock"]
        assert clock["guest_counter_hz"] == 62_500_000 and clock["consistent"]
        assert 16 <= clock["error_bound_ns"] <= 1_000_000, clock
        assert not any(c["source"] == "tcg" for c in clock["candidates"])
        stages = [a.stages for a in crossed["res"].samples if a.status == "explained"]
        assert sum(any(n == "timer IRQ entry" for n, _t in st) for st in stages) \
            >= 0.9 * len(stages)
        assert any(c.startswith("guest: hardirq: irq ") and c.endswith(" arch_timer")
                   for a in crossed["res"].samples for c in a.causes)
    else:
        assert g.get("guest_counter_hz", 0) == 0


def test_every_guest_event_maps_into_the_vcpus_run_periods(crossed):
    """The clock map checked by what it was not fitted on alone: every event the guest
    kernel traced on its CPU 0 was recorded while the guest ran, so at the fitted offset
    it must fall inside a run period of the vCPU thread in the host capture, give or take
    the reported bound; 50 us off, thousands would not."""
    from irqlab.explain.linux_guest import HostSide
    clock = crossed["clock"]
    bound = int(crossed["js"]["clock"]["error_bound_ns"] * clock.rate) + 1   # host ticks
    host = HostSide(decode_capture(*read_archive(crossed["hpath"])), clock, True)
    runs = host.ex.threads[host.vcpu_by_cpu[0]]
    starts, ends = (x.astype(np.int64) for x in runs.spans("running", widest=True))
    guest = decode_capture(crossed["gheader"], crossed["gpages"])

    def outside(shift_ns: int) -> tuple[int, int]:
        ts = np.concatenate([t["ts"][t["cpu"] == 0].astype(np.int64)
                             for name, t in guest.tables.items()
                             if name in ("sched_switch", "irq_handler_entry",
                                         "hrtimer_expire_entry") and len(t)])
        h = clock.to_host(ts) + int(shift_ns * clock.rate)
        h = h[(h >= starts[0]) & (h <= ends[-1])]
        i = np.searchsorted(starts, h + bound, "right") - 1
        inside = (i >= 0) & (h - bound <= ends[np.maximum(i, 0)])
        return int((~inside).sum()), len(h)

    bad, total = outside(0)
    assert total > 1000 and bad <= 0.01 * total, (bad, total, bound)
    if crossed["arch"] == "arm64":
        # A map 50 us off, either way, puts thousands outside. 20 us did not always: a
        # run whose vCPU ran in long periods has few edges for 20 us to cross (216-437
        # outside against 53-71 at the fitted map, in a whole suite and alone; 2,059-4,857
        # at 50 us in the same kind of runs, against 20-24).
        wrong = min(outside(50_000)[0], outside(-50_000)[0])
        assert wrong > 10 * max(bad, 1), ("the check would see a wrong map", wrong, bad)


def test_every_cause_names_its_layer_and_they_add_up(crossed):
    for att in crossed["res"].samples:
        assert sum(att.causes.values()) == att.latency_tick
        assert min(att.causes.values()) >= 0, (att.seq, att.causes)
        for cause in att.causes:
            assert cause == "unexplained" or cause.split(":", 1)[0] in ("guest", "host"), \
                cause


def _irq_part_by_seq(crossed) -> dict[int, int]:
    """Each split sample's IRQ part (deadline -> the guest's timer IRQ entry, ns), from
    the guest's own trace (the run's stored split), by seq."""
    s, parts = crossed["samples"], crossed["parts"]
    return {int(q): parts[(int(q), int(c))] - int(d) for q, c, d in
            zip(s["seq"], s["cpu"], s["deadline_tick"]) if (int(q), int(c)) in parts}


def test_the_guest_hog_is_named_on_its_spikes(crossed):
    """Judged on the guest hog's spikes whose timer IRQ came in time: an IRQ part of a
    quarter of the latency or more is TCG's timer path late (QEMU's main loop on a busy
    host), which the hog's spin only overlaps. Before, such spikes failed this test in
    the whole suite and passed alone: on a fresh-clone suite 4 of 21 and 5 of 36 had
    "guest: IRQ latency in irqlab-hog/80 prio 95 (inferred from the gap)" (2.2 of 3.0
    ms) or "host: QEMU main loop (TCG's timers) preempted by the CPU idle" (1.6 of 2.8
    ms) as their largest cause, rightly: the timer IRQ itself was that late."""
    irq_part = _irq_part_by_seq(crossed)
    judged = [a for a in _judged(crossed["res"], crossed["guest_spins"],
                                 crossed["host_spins"])
              if a.seq in irq_part and irq_part[a.seq] < a.latency_tick / 4]
    assert len(judged) >= 10, (len(judged), len(crossed["guest_spins"]))
    good = [a for a in judged
            if _largest(a, "guest: ").startswith("guest: preempted by irqlab-hog/")]
    assert all(_largest(a, "guest: ").endswith(" prio 95") for a in good)
    assert len(good) >= 0.9 * len(judged), \
        [(a.seq, a.ranked()[:3]) for a in judged if a not in good]


def test_the_host_hog_is_named_on_its_spikes(crossed):
    judged = _judged(crossed["res"], crossed["host_spins"], crossed["guest_spins"],
                     host_side=True)
    assert len(judged) >= 10, (len(judged), len(crossed["host_spins"]))
    hog = "host: vCPU thread preempted by irqlab-hhog/"
    good = [a for a in judged if _largest(a, "").startswith("host: ")
            and any(c.startswith(hog) for c in a.causes)]
    assert len(good) >= 0.9 * len(judged), \
        [(a.seq, a.ranked()[:3]) for a in judged if a not in good]
    largest = [a for a in judged if _largest(a, "host: ").startswith(hog)]
    assert len(largest) >= 0.75 * len(judged), \
        [(a.seq, a.ranked()[:3]) for a in judged if a not in largest]


def test_figures(crossed):
    """Not an assertion: the figures of the two judgements, for the record (-s)."""
    res = crossed["res"]
    for name, mine, other, layer, label in (
            ("guest hog", crossed["guest_spins"], crossed["host_spins"], "guest: ",
             "guest: preempted by irqlab-hog/"),
            ("host hog", crossed["host_spins"], crossed["guest_spins"], "host: ",
             "host: vCPU thread preempted by irqlab-hhog/")):
        judged = _judged(res, mine, other, host_side=layer == "host: ")
        good = sum(_largest(a, layer).startswith(label) for a in judged)
        print(f"\n{crossed['arch']} {name}: {good} of {len(judged)} spikes named "
              f"({len(mine)} spins); "
              f"clock error bound {crossed['js']['clock']['error_bound_ns']} ns")
    summary = crossed["run"].summary
    in_thread, judged = _guest_hog_in_thread(crossed)
    print(f"{crossed['arch']} split: {crossed['run'].metadata['sample_parts']} of "
          f"{summary['samples']} samples; irq {summary['irq_latency']}; thread "
          f"{summary['thread_latency']}; guest hog in the thread part on {in_thread} of "
          f"{judged} spikes")


def test_the_guest_runs_samples_split_into_irq_and_thread_parts(crossed):
    """Issue 44: the guest capture is on the samples' clock, so a traced Linux-guest run
    is split as a native one (irqlab.explain.parts): both distributions in the summary,
    one stored split point per sample, irq + thread = total within 1 us on every one."""
    summary, parts, samples = crossed["run"].summary, crossed["parts"], crossed["samples"]
    split = crossed["run"].metadata["sample_parts"]
    assert split["split"] == len(parts), split
    # The guest's capture starts before its probe: most samples split.
    assert len(parts) >= 0.8 * summary["samples"], (split, summary["samples"])
    dl, irq, en = split_rows(parts, samples).T
    assert ((irq >= dl) & (irq <= en)).all()
    assert np.abs((irq - dl) + (en - irq) - (en - dl)).max() <= 1_000
    for key, part in (("irq_latency", irq - dl), ("thread_latency", en - irq)):
        got = summary[key]
        assert got["samples"] == len(parts) and got["max_ns"] == int(part.max()), got
        assert got["unsplit"] == sum(split["unsplit"].values())


def _guest_hog_in_thread(crossed) -> tuple[int, int]:
    """(spikes whose thread part holds >= 90 % of the guest hog's time in them, spikes
    judged): those the hog held for at least half their latency, the host hog not at
    all."""
    dl, irq, en = split_rows(crossed["parts"], crossed["samples"]).T
    judged, in_thread = 0, 0
    for a, i, b in zip(dl.tolist(), irq.tolist(), en.tolist()):
        held = _overlap(a, b, crossed["guest_spins"])
        if held < 200_000 or held < (b - a) / 2 or _overlap(a, b, crossed["host_spins"]):
            continue
        judged += 1
        in_thread += (b - i) >= 0.9 * held
    return in_thread, judged


def test_the_guest_hogs_spikes_land_in_the_thread_part(crossed):
    """The guest hog is a user-space SCHED_FIFO thread: it cannot hold the guest's timer
    IRQ off, so the time it holds the probe's CPU after a deadline is thread latency.
    Judged on the spikes it held for at least half their latency and the host hog not at
    all (the host hog stops the whole vCPU, the timer IRQ with it). Alone, 48 of 48
    (x86_64) and 49 of 49 (arm64) had it there; >= 75 % asked: on a busy host TCG's
    timer path can make the guest's timer IRQ itself late during a spin (the failures of
    test_the_guest_hog_is_named_on_its_spikes in the whole suite), and that time is
    rightly the IRQ part's. A split at the wrong timer IRQ (after the wake-up) would put
    the hog's time in the IRQ part on every spike."""
    in_thread, judged = _guest_hog_in_thread(crossed)
    assert judged >= 10, (judged, len(crossed["guest_spins"]))
    assert in_thread >= 0.75 * judged, (in_thread, judged)


def test_the_window_lines_show_the_parts_live(crossed):
    """Issue 44: the guest's capture is read as gtrace ships it (every 50 ms), so each
    window line carries its IRQ and thread parts while the guest runs; they agree with
    the split stored at the end. The newest samples' events may not be shipped yet when
    their window closes: those are left out of its columns."""
    windows = crossed["windows"]
    assert len(windows) >= RUN_S, windows
    full, judged = check_live_columns(windows, crossed["parts"], crossed["samples"],
                                      1_000_000_000)
    assert full >= judged - 1, [(w["samples"], w["split_samples"]) for w in windows]
