"""The binary ring-buffer decoder against the kernel's own text, and on assembled pages."""

from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

from irqlab.trace.ringbuf import decode
from irqlab.trace.synth import PageWriter, encode
from irqlab.trace.tracefs import Instance


def test_real_pages_match_the_kernels_text(tracefs, page_header):
    inst = Instance(tracefs, f"irqlab-test-{os.getpid()}")
    try:
        inst.write("trace_clock", "x86-tsc" if "x86-tsc" in inst.read("trace_clock")
                   else "local")
        for ev in ("sched/sched_switch", "sched/sched_waking", "irq/irq_handler_entry",
                   "timer/hrtimer_start", "timer/hrtimer_expire_entry"):
            inst.write(f"events/{ev}/enable", "1")
        for _ in range(50):
            time.sleep(0.002)
        inst.write("tracing_on", "0")
        text = inst.read("trace")            # the kernel's own decoding, not consuming
        per_cpu = {}
        for cpu in range(inst.cpu_count()):
            fd = os.open(inst.path / f"per_cpu/cpu{cpu}/trace_pipe_raw",
                         os.O_RDONLY | os.O_NONBLOCK)
            chunks = []
            try:
                while True:
                    try:
                        page = os.read(fd, page_header.page_size)
                    except BlockingIOError:
                        break
                    if not page:
                        break
                    chunks.append(page)
            finally:
                os.close(fd)
            per_cpu[cpu] = b"".join(chunks)
    finally:
        problems = inst.close()
    assert problems == [] and not inst.path.exists()
    ev = decode(per_cpu, page_header)
    stamps = sorted(int(m.group(1)) for m in re.finditer(r"\s(\d+)(?:\.\d+)?: \w+:", text))
    if ev.missed:
        pytest.skip("the buffer overflowed on this busy machine")
    assert len(ev) == len(stamps) > 0
    if "." not in text.split("\n")[-2]:       # counter clock: raw values in the text
        assert np.array_equal(ev.ts, np.array(stamps, np.uint64))


def test_assembled_pages_decode_every_encoding(kernel_formats, page_header):
    sw = kernel_formats["sched:sched_switch"]
    pr = kernel_formats["ftrace:print"]
    w = PageWriter(page_header)
    ts = 1_000_000
    want = []
    for i in range(300):                      # spans pages
        ts += 50 + i
        w.add(ts, encode(sw, {"prev_pid": i, "next_pid": i + 1, "prev_comm": "a",
                              "next_comm": "b"}))
        want.append(ts)
    ts += 1 << 30                             # needs a time extend
    w.add(ts, encode(sw, {"prev_pid": 7}))
    want.append(ts)
    w.add_padding(ts + 999, 16)               # discarded event: its delta is ignored
    ts += 5
    w.add(ts, encode(pr, {"buf": "x" * 200}))  # long event: type_len 0 + length word
    want.append(ts)
    w.lose_events()
    ts += 10_000
    w.add(ts, encode(sw, {"prev_pid": 8}))
    want.append(ts)
    ev = decode({0: w.data()}, page_header)
    assert ev.ts.tolist() == want
    assert ev.missed and ev.missed[0][:2] == (0, want[-1])
    idx = ev.select(sw)
    assert ev.column(sw, "prev_pid", idx)[:3].tolist() == [0, 1, 2]
    assert ev.column(sw, "next_comm", idx)[0] == b"b"
    assert ev.column(pr, "buf", ev.select(pr))[0] == b"x" * 200
