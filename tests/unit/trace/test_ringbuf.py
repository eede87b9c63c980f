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


def test_absolute_stamps_restart_the_running_time(kernel_formats, page_header):
    # A writer that interrupts another writer's time update stamps its event with the
    # full time (type 31, rb_add_time_stamp()); later deltas count from it, and the
    # next page starts again from its own stamp.
    sw = kernel_formats["sched:sched_switch"]
    w = PageWriter(page_header)
    want = []
    ts = 5_000_000_000_000
    for i in range(400):                       # several pages
        if i % 37 == 5:
            ts += 3
            w.add_absolute(ts)
        elif i % 53 == 7:
            ts += (1 << 28) + i                # a time extend
        ts += 17
        w.add(ts, encode(sw, {"prev_pid": i}))
        want.append(ts)
    ev = decode({0: w.data()}, page_header)
    assert ev.ts.tolist() == want
    assert ev.column(sw, "prev_pid", ev.select(sw)).tolist() == list(range(400))


def _drain(fd: int, page_size: int, out: list[bytes]) -> None:
    while True:
        try:
            page = os.read(fd, page_size)
        except BlockingIOError:
            return
        if not page:
            return
        out.append(page)


def test_live_reads_of_partial_pages_lose_and_repeat_nothing(tracefs, page_header,
                                                             kernel_formats):
    """Read trace_pipe_raw while the kernel writes (pages handed out partially filled,
    then the rest of them in later reads: ring_buffer_read_page() copies only what was
    committed and advances the read position), and compare with a second instance that
    recorded the same switches and is decoded by the kernel itself."""
    live = Instance(tracefs, f"irqlab-test-live-{os.getpid()}")
    ref = Instance(tracefs, f"irqlab-test-ref-{os.getpid()}")
    pages: dict[int, list[bytes]] = {}
    try:
        clock = "x86-tsc" if "x86-tsc" in live.read("trace_clock") else "counter"
        for inst in (live, ref):
            inst.write("tracing_on", "0")
            inst.write("trace_clock", clock)       # raw counter values in the text
            inst.write("buffer_size_kb", "8192")
            inst.write("events/sched/sched_switch/enable", "1")
            inst.write("events/sched/sched_waking/enable", "1")
        ncpu = live.cpu_count()
        fds = {c: os.open(live.path / f"per_cpu/cpu{c}/trace_pipe_raw",
                          os.O_RDONLY | os.O_NONBLOCK) for c in range(ncpu)}
        live.write("tracing_on", "1")
        ref.write("tracing_on", "1")
        try:
            end = time.monotonic() + 1.0
            while time.monotonic() < end:       # switches on every CPU, read as they come
                time.sleep(0.0005)
                for c, fd in fds.items():
                    _drain(fd, page_header.page_size, pages.setdefault(c, []))
            ref.write("tracing_on", "0")
            live.write("tracing_on", "0")
            for c, fd in fds.items():
                _drain(fd, page_header.page_size, pages.setdefault(c, []))
        finally:
            for fd in fds.values():
                os.close(fd)
        text = ref.read("trace")
        stats = {c: live.read(f"per_cpu/cpu{c}/stats") for c in range(ncpu)}
    finally:
        assert live.close() == [] and ref.close() == []
    if any("overrun: 0" not in s for s in stats.values()) or "LOST" in text:
        pytest.skip("a buffer overflowed on this busy machine")
    ev = decode({c: b"".join(p) for c, p in pages.items()}, page_header)
    commits = [int.from_bytes(p[page_header.commit_offset:page_header.commit_offset + 4],
                              "little") & 0x3FFFFFFF for ps in pages.values() for p in ps]
    assert min(commits) < page_header.data_size // 2   # partial pages were read
    fmt = kernel_formats["sched:sched_switch"]
    sw = ev.select(fmt)
    got: dict[int, list[tuple[int, int, int]]] = {}
    for c, t, p, n in zip(ev.cpu[sw].tolist(), ev.ts[sw].tolist(),
                          ev.column(fmt, "prev_pid", sw).tolist(),
                          ev.column(fmt, "next_pid", sw).tolist()):
        got.setdefault(c, []).append((t, p, n))
    want: dict[int, list[tuple[int, int, int]]] = {}
    for m in re.finditer(r"\[(\d+)\]\s+\S+\s+(\d+)(?:\.\d+)?: sched_switch: .*prev_pid=(\d+) "
                         r".*next_pid=(\d+)", text):
        want.setdefault(int(m[1]), []).append((int(m[2]), int(m[3]), int(m[4])))
    assert want
    # The instances were switched on and off a moment apart, and each buffer reads the
    # clock itself (ns apart): align on time, then the switches must be the same ones.
    checked = 0
    for c, ref_seq in want.items():
        seq = got.get(c, [])
        core = ref_seq[2:-2]    # the edges may fall outside the other instance's window
        if not core:
            continue            # a CPU that barely switched: nothing to align on
        checked += 1
        k = min(range(len(seq)), key=lambda i: abs(seq[i][0] - core[0][0]))
        assert [x[1:] for x in seq[k:k + len(core)]] == [x[1:] for x in core]
        ours = [x[0] for x in seq[k:k + len(core)]]
        assert ours == sorted(ours)
        # Each instance stamps an event when it writes it, one after the other in the
        # same tracepoint call: ns apart, unless the hypervisor takes the CPU in between
        # (seen on this nested-virt host: 1 switch in ~50,000 stamped 3.65 ms later by the
        # second instance, its neighbours within 2 us, ours in line with the task's
        # ~150 us bursts). A decoding error would move a page's events, not one event:
        # an outlier must stand alone, and outliers be rare.
        far = [i for i, (a, b) in enumerate(zip(ours, core)) if abs(a - b[0]) >= 1_000_000]
        assert len(far) <= max(1, len(core) // 200), (c, len(far), len(core), far[:10])
        for i in far:
            assert all(abs(ours[j] - core[j][0]) < 1_000_000 for j in (i - 1, i + 1)
                       if 0 <= j < len(core)), (c, i, ours[max(0, i - 2):i + 3],
                                                core[max(0, i - 2):i + 3])
    assert checked
