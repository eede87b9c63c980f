"""The C fast path (irqlab/native) gives exactly what the numpy decoder gives: records,
their order across CPUs (ties, stamps that go back), lost-event pages and every field."""

from __future__ import annotations

import random

import numpy as np
from irqlab import native
from irqlab.explain.load import wanted_fields
from irqlab.trace import fastpath, ringbuf
from irqlab.trace.synth import PageWriter, encode
from tests.unit.trace._data_loc import data_loc_payloads


def both_ways(per_cpu, hdr, wanted):
    """(C result, numpy result) of decode() and decode_tables()."""
    assert native.lib() is not None, native.why_not()
    fast = ringbuf.decode(per_cpu, hdr), ringbuf.decode_tables(per_cpu, hdr, wanted)
    native.set_enabled(False)
    try:
        slow = ringbuf.decode(per_cpu, hdr), ringbuf.decode_tables(per_cpu, hdr, wanted)
    finally:
        native.set_enabled(True)
    return fast, slow


def assert_same(fast, slow):
    (ev_f, tab_f), (ev_s, tab_s) = fast, slow
    for k in ("ts", "cpu", "etype", "off"):
        a, b = getattr(ev_f, k), getattr(ev_s, k)
        assert a.dtype == b.dtype and np.array_equal(a, b), k
    assert ev_f.missed == ev_s.missed and ev_f.pages == ev_s.pages
    assert (tab_f.missed, tab_f.events, tab_f.pages) == (tab_s.missed, tab_s.events,
                                                         tab_s.pages)
    assert tab_f.tables.keys() == tab_s.tables.keys()
    for t, cols in tab_s.tables.items():
        assert cols.keys() == tab_f.tables[t].keys()
        for k, b in cols.items():
            a = tab_f.tables[t][k]
            assert a.dtype == b.dtype and np.array_equal(a, b), (t, k)


def test_the_library_is_built():
    # ./setup.sh builds it; without it every trace would silently take the slow path.
    assert native.lib() is not None, native.why_not()


def test_every_encoding_and_cpu_order_match(kernel_formats, page_header):
    sw = kernel_formats["sched:sched_switch"]
    wk = kernel_formats["sched:sched_waking"]
    irq = kernel_formats["irq:irq_handler_entry"]
    pr = kernel_formats["ftrace:print"]
    rng = random.Random(7)
    per_cpu = {}
    for cpu in (0, 1, 3):
        w = PageWriter(page_header)
        ts = 1_000_000
        for i in range(3000):
            # Steps of 0 give equal stamps within and across CPUs (ties keep CPU order).
            ts += rng.choice((0, 0, 1, 17, 250, 4000))
            kind = rng.random()
            if kind < 0.01:
                ts += (1 << 28) + i                      # a time extend
            if kind < 0.02:
                w.add_absolute(ts)
            if 0.02 <= kind < 0.03:
                w.add_padding(ts + 5, 16)                # discarded: its delta ignored
            if 0.03 <= kind < 0.035:
                w.lose_events()
            if kind < 0.5:
                w.add(ts, encode(sw, {"prev_pid": i, "next_pid": i + cpu, "prev_comm": "a",
                                      "next_comm": f"t{i % 9}", "prev_state": i % 3}))
            elif kind < 0.8:
                w.add(ts, encode(wk, {"pid": i, "target_cpu": cpu, "comm": "w"}))
            elif kind < 0.95:
                w.add(ts, encode(irq, {"irq": i % 40, "name": f"eth{i % 3}"}))
            else:
                w.add(ts, encode(pr, {"buf": "m" * (i % 300)}))   # long records
        per_cpu[cpu] = w.data()
    fast, slow = both_ways(per_cpu, page_header, wanted_fields(kernel_formats))
    assert len(fast[0]) == 9000 and fast[0].missed
    assert_same(fast, slow)


def test_stamps_that_go_back_are_ordered_like_a_stable_sort(kernel_formats, page_header):
    # Pages out of time order within one CPU: each backward step starts a sorted run;
    # a few runs and thousands of them (the runs sit in a heap) are merged alike.
    sw = kernel_formats["sched:sched_switch"]
    for npages in (40, 4200):
        pages = []
        for p in range(npages):
            w = PageWriter(page_header)
            base = 10_000_000 + (npages - p) * 1000          # later pages, earlier stamps
            for i in range(3):
                w.add(base + 7 * i, encode(sw, {"prev_pid": p, "next_pid": i}))
            pages.append(w.data())
        other = PageWriter(page_header)
        for i in range(500):
            other.add(10_000_000 + 997 * i, encode(sw, {"prev_pid": -i}))
        per_cpu = {0: b"".join(pages), 1: other.data()}
        fast, slow = both_ways(per_cpu, page_header,
                               wanted_fields({"sched:sched_switch": sw}))
        ts = fast[0].ts
        assert np.all(ts[1:] >= ts[:-1]) and len(ts) == 3 * npages + 500
        assert_same(fast, slow)


def test_many_runs_with_equal_stamps_across_cpus_merge_like_a_stable_sort(
        kernel_formats, page_header):
    # Every page of every CPU starts at a random earlier or later time, with many equal
    # stamps inside and across runs: the heap of runs must break each tie by run order
    # (CPU, then position), exactly as numpy's stable sort of the concatenation does.
    sw = kernel_formats["sched:sched_switch"]
    rng = random.Random(29)
    per_cpu = {}
    for cpu in (0, 1, 2):
        pages = []
        for p in range(120):
            w = PageWriter(page_header)
            ts = 5_000_000 + 40 * rng.randrange(50)
            for i in range(rng.randrange(1, 12)):
                ts += rng.choice((0, 0, 0, 40))
                w.add(ts, encode(sw, {"prev_pid": p, "next_pid": 100 * cpu + i}))
            pages.append(w.data())
        per_cpu[cpu] = b"".join(pages)
    fast, slow = both_ways(per_cpu, page_header, wanted_fields({"sched:sched_switch": sw}))
    assert len(fast[0]) > 1000
    assert_same(fast, slow)


def test_a_field_past_the_buffer_is_refused_not_read(kernel_formats, page_header):
    # A field declared past the end of the buffer (a corrupt format or truncated page)
    # is never read by the C merges: they say no, and the caller takes the numpy path.
    sw = kernel_formats["sched:sched_switch"]
    w = PageWriter(page_header)
    w.add(1000, encode(sw, {"prev_pid": 1}))
    _, buf, spans = ringbuf._one_buffer({0: w.data()})
    for offset, ok in ((sw.f("prev_pid").offset, True), (page_header.page_size, False)):
        spec = {sw.id: ([(offset, 8)], False)}
        assert (fastpath.stream_tables(spans, buf, page_header, spec) is not None) == ok
        pieces = fastpath.decode_pieces(spans, buf, page_header)
        assert (fastpath.merge_tables(pieces, spec) is not None) == ok


def test_streaming_merge_cuts_a_cpu_that_goes_back_in_time_into_runs(kernel_formats,
                                                                      page_header):
    # In time order: one run per CPU. A CPU whose stamps go back (between pages, inside a
    # page): the counting pass finds each run's start (page and records to skip) and the
    # streaming merge decodes the runs as it goes: the same tables as the runs merge.
    sw = kernel_formats["sched:sched_switch"]
    spec = {sw.id: ([(sw.f("prev_pid").offset, 4)], False)}
    pages = []
    for p in range(6):
        w = PageWriter(page_header)
        w.add(1_000_000 + p * 5000, encode(sw, {"prev_pid": p}))
        if p == 4:                                   # back inside the page, then on
            w.add_absolute(1_000_000)
            w.add(1_000_000, encode(sw, {"prev_pid": 40}))
            w.add(1_026_000, encode(sw, {"prev_pid": 41}))
        pages.append(w.data())
    for order in (range(6), (0, 1, 2, 5, 3, 4)):
        blob = b"".join(pages[i] for i in order)
        _, buf, spans = ringbuf._one_buffer({0: blob, 1: pages[0]})
        streamed = fastpath.stream_tables(spans, buf, page_header, spec)
        assert streamed is not None
        merged = fastpath.merge_tables(fastpath.decode_pieces(spans, buf, page_header), spec)
        assert merged is not None
        for k in ("ts", "cpu", "fields"):
            a, b = streamed[1][sw.id][k], merged[sw.id][k]
            assert all(np.array_equal(x, y) for x, y in zip(a, b)) if k == "fields" \
                else np.array_equal(a, b)
        assert len(merged[sw.id]["ts"]) == 9
        assert np.all(np.diff(merged[sw.id]["ts"].astype(np.int64)) >= 0)


def test_merge_orders_only_the_wanted_types_like_numpy(kernel_formats, page_header):
    # Each merge orders only the records of its tables (pages of other types are decoded
    # and passed over, whole pages of them included): with every second type unwanted,
    # in runs that go back and tie across CPUs, the tables still equal numpy's.
    sw = kernel_formats["sched:sched_switch"]
    wk = kernel_formats["sched:sched_waking"]
    rng = random.Random(31)
    per_cpu = {}
    for cpu in (0, 1, 2):
        pages = []
        for p in range(60):
            w = PageWriter(page_header)
            ts = 5_000_000 + 40 * rng.randrange(50)
            only_sw = p % 7 == 3                        # pages without a waking at all
            for i in range(rng.randrange(1, 30)):
                ts += rng.choice((0, 0, 0, 40))
                if only_sw or rng.random() < 0.6:
                    w.add(ts, encode(sw, {"prev_pid": p, "next_pid": 100 * cpu + i}))
                else:
                    w.add(ts, encode(wk, {"pid": i, "target_cpu": cpu}))
            pages.append(w.data())
        per_cpu[cpu] = b"".join(pages)
    for wanted in ({"sched:sched_waking": wk}, {"sched:sched_switch": sw},
                   {"sched:sched_switch": sw, "sched:sched_waking": wk}):
        fast, slow = both_ways(per_cpu, page_header, wanted_fields(wanted))
        assert len(fast[0]) > 1000
        assert all(len(cols["ts"]) for cols in fast[1].tables.values())
        assert_same(fast, slow)
        # ... and from the streaming merge itself, not from a fallback.
        _, buf, spans = ringbuf._one_buffer(per_cpu)
        spec = {fmt.id: ([(fmt.f(n).offset, fmt.f(n).size) for n in names], False)
                for fmt, names in wanted_fields(wanted)}
        assert fastpath.stream_tables(spans, buf, page_header, spec) is not None


def test_data_loc_strings_in_one_c_pass_match_numpy():
    # __data_loc strings (irq handler names): the one-pass C codes and distinct rows give
    # numpy's array exactly: lengths past the NUL, a string equal to another but for
    # trailing zeros, non-UTF-8 bytes, unaligned payloads; a string whose kept bytes run
    # past the buffer is left to the numpy path (which clamps).
    from irqlab.trace.formats import Field
    rng = random.Random(5)
    names = [b"eth0", b"eth0\0", b"eth0\0\0\0", b"virtio0-input.0", b"\xffbad", b"", b"x" * 40]
    # garbage after each payload, odd alignment
    buf, off = data_loc_payloads(rng, names, 3000, lambda b: b"\xaa" * rng.randrange(0, 5))
    f = Field("name", 0, 4, False, data_loc=True)
    for tail in (b"\0" * 64, b""):                      # "" : the last string at the end
        arr = np.frombuffer(bytes(buf) + tail, np.uint8)
        fast = ringbuf.read_field(arr, off, f)
        native.set_enabled(False)
        try:
            slow = ringbuf.read_field(arr, off, f)
        finally:
            native.set_enabled(True)
        assert fast.dtype == slow.dtype and np.array_equal(fast, slow)
        assert (fastpath.data_loc_strings(arr, off, 0) is not None) == bool(tail)
    assert set(fast.tolist()) >= {"eth0", "virtio0-input.0", "\ufffdbad", "", "x" * 40}
