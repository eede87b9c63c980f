"""``irqlab doctor [--json]``: what works on this host, and the fix for what does not.

Each check is one line: what it looked at, ok or not, what it found, and the command or
setting that fixes it. Host-wide checks are here; what one target needs (its images,
its programs) it declares itself (Target.doctor). Nothing is changed; `irqlab doctor` never needs root to answer,
though some answers are "needs root".
"""

from __future__ import annotations

import argparse
import os
import shutil
from typing import Callable

from irqlab.cli.common import EXIT_FAIL, EXIT_OK
from irqlab.cli.output import json_or_text, show
from irqlab.doctor import NEEDED, NOT_YET, SETUP, Check

DOCTOR_VERSION = 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="what works on this host, and the fix for what "
                                      "does not")
    p.add_argument("--db", default=None, help="also check this store (file or URL)")
    p.add_argument("--json", action="store_true", help="print JSON lines")


def _kvm() -> Check:
    from irqlab.runner.accel import kvm_is_software, kvm_usable
    why = kvm_usable()
    if why:
        return Check("kvm", False, why, "load kvm_intel/kvm_amd, or run under TCG "
                                        "(--accel tcg; figures are then emulated)")
    if kvm_is_software():
        return Check("kvm", True, "usable, but a software backend (no VMX/SVM or kvm_pvm): "
                                  "runs are labelled emulated")
    return Check("kvm", True, "hardware-assisted")


def _tracefs() -> Check:
    have = os.path.isdir("/sys/kernel/tracing/events") or "tracefs" in open(
        "/proc/filesystems").read()
    if not have:
        return Check("tracefs", False, "the kernel has no tracefs",
                     "a kernel with CONFIG_FTRACE (for --trace and explain)")
    if os.geteuid() != 0:
        return Check("tracefs", False, "present, but --trace needs root", "run as root")
    return Check("tracefs", True, "present; --trace can capture")


def _realtime() -> Check:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        return Check("sched_fifo", True, "SCHED_FIFO allowed (native probe, --prio)")
    except PermissionError:
        return Check("sched_fifo", False, "SCHED_FIFO refused",
                     "run as root, grant CAP_SYS_NICE, or raise RLIMIT_RTPRIO "
                     "(--rt-fallback runs SCHED_OTHER, recorded)")


def _tool(name: str, tool: str, package: str, why: str) -> Callable[[], Check]:
    def check() -> Check:
        path = shutil.which(tool)
        return (Check(name, True, f"{path} ({why})") if path else
                Check(name, False, f"{tool} not found ({why})",
                      f"apt-get install {package} ({SETUP} does)"))
    return check


def _postgresql() -> Check:
    from irqlab.store.pg import pg_bindir
    bindir = pg_bindir()
    if bindir is None:
        return Check("postgresql", False, "no PostgreSQL server binaries (a lab store "
                     "server; the tests start one)", f"apt-get install postgresql ({SETUP} "
                     f"does)")
    return Check("postgresql", True, f"server binaries in {bindir}")


def _probes() -> Check:
    from irqlab.runner.machines import MACHINES
    from irqlab.runner.native import NATIVE_PROBE
    missing = [str(m.probe) for m in MACHINES.values() if not m.probe.exists()]
    missing += [] if NATIVE_PROBE.exists() else [str(NATIVE_PROBE)]
    if missing:
        return Check("probes", False, f"not built: {', '.join(missing)}",
                     "make -C probes/guest ARCH=x86_64; make -C probes/guest ARCH=arm64; "
                     "make -C probes/native")
    return Check("probes", True, "guest (x86_64, arm64) and native probes built")


def _fast_path() -> Check:
    from irqlab import native
    why = native.why_not()
    if why:
        return Check("fast_path", False, f"C fast paths off: {why} (numpy runs instead: "
                                         f"same results, slower)", "make -C irqlab/native")
    return Check("fast_path", True, "C fast paths of trace decoding and explain loaded")


def _targets() -> list[Check]:
    """Each target's own checks (Target.doctor: images, programs), in registry order; a
    check two targets share (same name) is said once."""
    from irqlab.targets import TARGETS
    out: dict[str, Check] = {}
    for target in TARGETS.values():
        for check in target.doctor():
            out.setdefault(check.check, check)
    return list(out.values())


def _store(ref: str | None) -> Callable[[], Check]:
    def check() -> Check:
        from irqlab.store import StoreError, is_url, open_store
        where = ref
        if where is None:
            env = os.environ.get("IRQLAB_DB")
            if not is_url(env):
                try:
                    import psycopg  # noqa: F401
                except ImportError:
                    return Check("lab_store", False, "psycopg missing: no postgresql:// "
                                 "stores", SETUP)
                return Check("lab_store", True, "psycopg present: push and --db "
                             "postgresql:// work")
            where = env
        if not is_url(where) and not os.path.exists(where):
            # A store is made by the first run that writes it: not there yet is no fault.
            return Check("store", True, f"{where}: no database yet; the first `irqlab run "
                         f"--db {where}` (or import) creates it", group=NOT_YET)
        try:
            with open_store(where, read_only=True) as store:
                n = len(store.runs())
            return Check("store", True, f"{store.path}: {n} runs")
        except StoreError as exc:
            return Check("store", False, str(exc), "check --db / $IRQLAB_DB")
    return check


def run(args: argparse.Namespace) -> int:
    host = [_kvm, _tracefs, _realtime,
            _tool("qemu_x86", "qemu-system-x86_64", "qemu-system-x86", "guest, x86"),
            _tool("qemu_arm", "qemu-system-aarch64", "qemu-system-arm", "arm64, Xen"),
            _tool("rt_tests", "cyclictest", "rt-tests", "bench cyclictest, hackbench"),
            _tool("stress_ng", "stress-ng", "stress-ng", "cpu/cache/memory loads"),
            _tool("fio", "fio", "fio", "io load"),
            _postgresql, _probes, _fast_path]
    # Then what each target needs (its images, its programs), then the store.
    results = [c() for c in host] + _targets() + [_store(args.db)()]
    # Two groups, in this order: what a run needs (a NO fails: exit 1), then what irqlab
    # creates when first needed (informational).
    groups = [(NEEDED, [r for r in results if r.group == NEEDED]),
              (f"{NOT_YET} (irqlab makes it on first use; not a failure)",
               [r for r in results if r.group == NOT_YET])]
    show({"type": "doctor_checks", "version": DOCTOR_VERSION, "groups": groups},
         json_or_text(args))
    return EXIT_OK if all(r.ok for r in results if r.group == NEEDED) else EXIT_FAIL
