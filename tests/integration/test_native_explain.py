"""`irqlab explain` of a native run (issue 29): a known preempter with known timing must
be named, with its duration.

One real native run with `--trace` on CPU 1 (probe SCHED_FIFO 90); a helper thread at
SCHED_FIFO 95 on the same CPU spins HOG_NS every 100 ms for a bounded time and records
each spin's CLOCK_MONOTONIC start and end. The native capture is on CLOCK_MONOTONIC too,
so a spin is a trace interval as it is. Each spike that a spin overlaps must name the
helper ("preempted by irqlab-hog/PID prio 95", and "IRQ latency in irqlab-hog/…" for the
part before a late timer IRQ) for the part of the spin inside it (the truth: the overlap
of [spin start, spin end] with [deadline, handler entry]) within 10 %, on >= 95 % of
those spikes (TAIL_NS says which are left out).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from irqlab.explain.native import explain_native, switch_priorities
from irqlab.explain.load import decode_capture
from irqlab.explain.run import capture_path
from irqlab.explain.seam import Request, stored_samples
from irqlab.store import Store
from irqlab.trace.archive import read_archive

pytestmark = [pytest.mark.integration]
XDIST_GROUP = "host"          # no guest: a native probe, tracefs (tests/conftest.py)

CPU, PROBE_PRIO, HOG_PRIO = 1, 90, 95
HOG_NS, EVERY_MS, HOG_DELAY_S, HOG_RUN_S, RUN_S = 2_000_000, 100, 2.5, 4.0, 8
# The hog stamps a spin's end just before it gives the CPU back (its clock_nanosleep call
# follows): a deadline in the last TAIL_NS of a spin has a truth too short to judge to
# 10 % by that stamp, so those spikes are left out.
TAIL_NS = 20_000

# Bounded: it sleeps, spins HOG_NS every EVERY_MS for HOG_RUN_S, prints its spins, exits
# (its SCHED_FIFO priority ends with it; nothing else is changed). In C with its memory
# locked: a Python hog was seen holding the CPU for ms past its own end stamp (page
# faults and reclaim on a loaded host), which made its stamps a wrong truth.
_HOG_C = r"""
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
int main(int argc, char **argv) {
    int cpu = atoi(argv[1]), prio = atoi(argv[2]);
    long long spin = atoll(argv[3]), every = atoll(argv[4]) * 1000000LL;
    long long delay = atoll(argv[5]), run = atoll(argv[6]);
    static long long s0[1000], s1[1000];
    int n = 0;
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);
    struct sched_param sp = { .sched_priority = prio };
    prctl(PR_SET_NAME, "irqlab-hog");
    if (sched_setaffinity(0, sizeof set, &set) || sched_setscheduler(0, SCHED_FIFO, &sp)
        || mlockall(MCL_CURRENT | MCL_FUTURE)) { perror("hog"); return 1; }
    long long next = mono() + delay, end = next + run;
    while (next < end && n < 1000) {
        struct timespec t = { next / 1000000000LL, next % 1000000000LL };
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
        long long a = mono(), b;
        while ((b = mono()) - a < spin) ;
        s0[n] = a; s1[n++] = b;
        next += every;
    }
    printf("[");
    for (int i = 0; i < n; i++) printf("%s[%lld, %lld]", i ? ", " : "", s0[i], s1[i]);
    printf("]\n");
    return 0;
}
"""


@pytest.fixture(scope="module")
def hogged(tmp_path_factory, probe_built):
    if os.geteuid() != 0 or (os.cpu_count() or 1) < 2:
        pytest.skip("needs root (tracefs, SCHED_FIFO) and 2 CPUs")
    tmp = tmp_path_factory.mktemp("native-explain")
    db = tmp / "irqlab.duckdb"
    (tmp / "hog.c").write_text(_HOG_C)
    subprocess.run(["cc", "-O2", "-o", str(tmp / "hog"), str(tmp / "hog.c")], check=True)
    hog = subprocess.Popen([str(tmp / "hog"), str(CPU), str(HOG_PRIO), str(HOG_NS),
                            str(EVERY_MS), str(int(HOG_DELAY_S * 1e9)),
                            str(int(HOG_RUN_S * 1e9))], stdout=subprocess.PIPE, text=True)
    try:
        run = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "run", "--target",
                              "native", "--cpus", str(CPU), "--priority", str(PROBE_PRIO),
                              "--duration", f"{RUN_S}s", "--trace", "--json", "--name",
                              "hogged", "--db", str(db)],
                             capture_output=True, text=True, timeout=120)
        spins = json.loads(hog.communicate(timeout=60)[0])
    finally:
        if hog.poll() is None:
            hog.kill()
            hog.wait(10)
    assert run.returncode == 0, run.stderr
    with Store(db, read_only=True) as st:
        row = st.resolve("hogged")
        header, per_cpu = read_archive(capture_path(st, row))
        prio = switch_priorities(header, per_cpu)
        res, _tid = explain_native(row, decode_capture(header, per_cpu),
                                   stored_samples(st, row.run_id),
                                   Request(threshold_ns=30_000), prio)
    return res, spins, prio


def test_the_preempting_fifo_thread_is_named_with_its_duration(hogged):
    res, spins, prio = hogged
    # The trace names the hog by its kernel pid: the same as Popen's outside a pid
    # namespace, another inside one (a CI container), so the label is found by its name.
    labels = {c for att in res.samples for c in att.causes
              if c.startswith("preempted by irqlab-hog/")}
    assert len(labels) == 1, labels
    label = labels.pop()
    hog_pid = int(label.split("/")[1].split()[0])
    # The kernel's prio of a SCHED_FIFO task is 99 - its priority (sched_switch).
    assert prio.get(hog_pid) == 99 - HOG_PRIO, (hog_pid, len(prio), prio.get(hog_pid))
    assert label.endswith(f" prio {HOG_PRIO}"), label
    irq_latency = (f"IRQ latency in {label.removeprefix('preempted by ')} (IRQs off or "
                   f"hardware; inferred from the gap)")
    checked = []
    for att in res.samples:
        if att.status != "explained":
            continue
        # The hog's share of this spike: its spin inside [deadline, handler entry]. The
        # deadline may fall just before a spin (the hog woke between the timer and the
        # probe thread) as well as inside one; which happens depends on the phase of the
        # two periods in this run.
        truth = max((min(s1, att.end) - max(s0, att.start) for s0, s1 in spins
                     if s0 < att.end and att.start < s1), default=0)
        if truth < TAIL_NS:
            continue
        # While the hog spins, the probe thread is kept off its CPU (preempted), or, when
        # the timer IRQ itself comes late, still asleep: then the part before the IRQ is
        # IRQ latency in the task that held the CPU, the hog (rtla --aa's IRQ latency, the
        # rest its thread latency). Both name the hog. Seen loaded on this nested-virt
        # host: the timer IRQ 1.01 and 2.05 ms after the deadline, the hog on the CPU in
        # user space throughout. Explain may call it so only where the capture shows the
        # timer IRQ that late.
        late = att.inclusive(irq_latency)
        t_irq = dict(att.stages).get("timer IRQ entry", att.start)
        assert late <= t_irq - att.start, (att.seq, late, att.stages)
        got = att.inclusive(label) + late
        checked.append((abs(got - truth) <= 0.1 * truth, att.seq, truth, got,
                        dict(att.ranked()[:3])))
    assert len(checked) >= 0.5 * len(spins), (len(checked), len(spins))
    good = sum(c[0] for c in checked)
    assert good >= 0.95 * len(checked), (good, len(checked),
                                         [c for c in checked if not c[0]])


def test_every_spike_shows_its_stages_and_unexplained(hogged):
    res, _spins, _prio = hogged
    explained = [a for a in res.samples if a.status == "explained"]
    assert explained
    for att in explained:
        assert "unexplained" in att.causes
        assert sum(att.causes.values()) == att.latency_tick
        names = [s for s, _t in att.stages]
        assert names[0] == "deadline" and names[-1] == "handler"
    # The timer path is seen on nearly every spike (local_timer_entry on this kernel):
    # every stage that should be there is found, or the failure says which were not.
    # (CI once had 229 of 1,877 spikes short of a stage; a deadline inside a running
    # timer IRQ and one passed while the thread was preempted are now told apart.)
    short = [a for a in explained if a.stages_missing]
    why = Counter(m.split(" (")[0] for a in short for m in a.stages_missing)
    assert len(short) <= 0.1 * len(explained), (
        len(short), len(explained), why.most_common(),
        [(a.seq, a.stages, a.stages_missing, a.notes, a.ranked()[:3]) for a in short[:3]])
    # The five stages of a deadline met asleep, in time order.
    full = [a for a in explained if len(a.stages) == 5]
    assert len(full) >= 0.5 * len(explained), (len(full), len(explained))
    for att in full:
        times = [t for _s, t in att.stages]
        assert times == sorted(times), att.stages
