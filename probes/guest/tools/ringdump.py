#!/usr/bin/env python3
"""ringdump - print an irqlab sample ring (docs/formats.md section 2).

Maps the guest RAM file (memory-backend-file mem-path) read-only, prints the
header and latency statistics, checks seq contiguity and the self-check
injection bound. Standard library only.

    ringdump.py /dev/shm/t1 [--offset 0x400000] [--records N] [--json]
"""
import argparse
import json
import mmap
import os
import struct
import sys

RING_GPA = 0x400000
MAGIC = 0x474E49524C515249
HDR = struct.Struct("<QIIIIQIIQIIQQQIIQ64s256s")
REC = struct.Struct("<QQQII")
HDR_SIZE = 4096
TICK_METHODS = {1: "cpuid15", 2: "cpuid16", 3: "hv40000010", 4: "pit", 5: "cntfrq"}
TIMER_MODES = {1: "tsc-deadline", 2: "lapic-oneshot", 3: "arm-virt", 4: "arm-phys"}
STATES = {0: "booting", 1: "running", 2: "done", 3: "error"}
IDLE = {1: "hlt", 2: "poll"}
F_INJECTED, F_OVERRUN = 1, 2


def cstr(b):
    """cstr - bytes up to the first NUL as text"""
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def read_header(m, off):
    """read_header - decode the 4096-byte ring header at @off"""
    f = HDR.unpack_from(m, off)
    names = ("magic version record_size capacity arch tick_hz tick_method "
             "timer_mode period_tick state error head overruns apic_hz idle "
             "inject_every inject_irqoff_tick build_id message").split()
    h = dict(zip(names, f))
    h["build_id"] = cstr(h["build_id"])
    h["message"] = cstr(h["message"])
    return h


def percentile(sorted_vals, p):
    """percentile - nearest-rank percentile of a sorted list"""
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def main():
    """main - parse arguments, dump header and statistics"""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("memfile")
    ap.add_argument("--offset", type=lambda s: int(s, 0), default=RING_GPA)
    ap.add_argument("--records", type=int, default=0, help="print the first N records")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--latencies", metavar="FILE", help="write one latency (ns) per line")
    args = ap.parse_args()

    fd = os.open(args.memfile, os.O_RDONLY)
    m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)
    h = read_header(m, args.offset)
    if h["magic"] != MAGIC:
        print("bad magic 0x%x" % h["magic"], file=sys.stderr)
        return 2
    cap, hz = h["capacity"], h["tick_hz"]
    head = h["head"]
    first = max(0, head - cap)
    recs = []
    for s in range(first, head):
        recs.append(REC.unpack_from(m, args.offset + HDR_SIZE + (s % cap) * 32))
    head_after = struct.unpack_from("<Q", m, args.offset + 56)[0]

    lost = 0
    good = []
    expect = first
    for r in recs:
        seq = r[0]
        if seq != expect or seq < head_after - cap:
            lost += 1
        else:
            good.append(r)
        expect = seq + 1

    def ns(t):
        return t * 1e9 / hz if hz else float("nan")

    lat = [(r, ns(r[2] - r[1])) for r in good]
    normal = sorted(l for r, l in lat if not r[3] & F_INJECTED)
    inj = sorted(l for r, l in lat if r[3] & F_INJECTED)
    ovr = sum(1 for r, _ in lat if r[3] & F_OVERRUN)
    bound_ns = ns(h["inject_irqoff_tick"])
    out = {
        "header": {k: v for k, v in h.items()},
        "tick_method_name": TICK_METHODS.get(h["tick_method"], "?"),
        "timer_mode_name": TIMER_MODES.get(h["timer_mode"], "?"),
        "state_name": STATES.get(h["state"], "?"),
        "idle_name": IDLE.get(h["idle"], "?"),
        "records_read": len(recs), "lost": lost, "overrun_flagged": ovr,
        "latency_ns": {
            "n": len(normal),
            "min": normal[0] if normal else None,
            "p50": percentile(normal, 50), "p90": percentile(normal, 90),
            "p99": percentile(normal, 99), "p999": percentile(normal, 99.9),
            "max": normal[-1] if normal else None,
            "mean": sum(normal) / len(normal) if normal else None,
        },
        "injected_ns": {
            "n": len(inj), "bound": bound_ns,
            "min": inj[0] if inj else None, "max": inj[-1] if inj else None,
            "below_bound": sum(1 for x in inj if x < bound_ns),
            "seqs": [r[0] for r, _ in lat if r[3] & F_INJECTED][:8],
        },
    }
    if args.latencies:
        with open(args.latencies, "w") as f:
            for r, l in lat:
                f.write("%d %d %.1f\n" % (r[0], r[3], l))
    if args.json:
        out["header"]["magic"] = "0x%x" % h["magic"]
        print(json.dumps(out, indent=1))
        return 0
    print("magic ok  version %d  record_size %d  capacity %d  arch %d" %
          (h["version"], h["record_size"], cap, h["arch"]))
    print("build_id %s" % h["build_id"])
    print("state %s  error %d  message %r" % (out["state_name"], h["error"], h["message"]))
    print("tick_hz %d (%s)  timer %s  apic_hz %d  period_tick %d (%.0f ns)" %
          (hz, out["tick_method_name"], out["timer_mode_name"], h["apic_hz"],
           h["period_tick"], ns(h["period_tick"])))
    print("idle %s  inject_every %d  inject_irqoff_tick %d (%.0f ns)" %
          (out["idle_name"], h["inject_every"], h["inject_irqoff_tick"], bound_ns))
    print("head %d  overruns %d  records read %d  lost %d  overrun-flagged %d" %
          (head, h["overruns"], len(recs), lost, ovr))
    L = out["latency_ns"]
    if normal:
        print("latency ns (non-injected, n=%d): min %.0f p50 %.0f p90 %.0f p99 %.0f "
              "p99.9 %.0f max %.0f mean %.0f" %
              (L["n"], L["min"], L["p50"], L["p90"], L["p99"], L["p999"], L["max"], L["mean"]))
    I = out["injected_ns"]
    if inj:
        print("injected (n=%d): min %.0f max %.0f bound %.0f below-bound %d seqs %s" %
              (I["n"], I["min"], I["max"], bound_ns, I["below_bound"], I["seqs"]))
    for r in good[:args.records]:
        print("seq %d deadline %d entry %d lat %.0f ns flags %d cpu %d" %
              (r[0], r[1], r[2], ns(r[2] - r[1]), r[3], r[4]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
