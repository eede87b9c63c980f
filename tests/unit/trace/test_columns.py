"""Columns held as codes (ringbuf.Coded in ringbuf.Columns): every read path gives the
strings, in the table's column order, and explain's IRQ labels read from the codes are
those read from the strings."""

from __future__ import annotations

import random

import numpy as np

from irqlab import native
from irqlab.explain import timeline
from irqlab.trace import fastpath
from irqlab.trace.ringbuf import Coded, Columns
from tests.unit.native_paths import both_ways
from tests.unit.trace._data_loc import data_loc_payloads


def _cols() -> Columns:
    text = np.array(["timer", "eth0", "virtio0-input.0"])
    codes = np.array([2, 0, 0, 1, 2], np.int64)
    return Columns(ts=np.arange(5, dtype=np.uint64), name=Coded(codes, text),
                   irq=np.array([4, 1, 1, 9, 4], np.int32))


def test_every_read_path_builds_a_coded_column_in_place():
    want = np.array(["virtio0-input.0", "timer", "timer", "eth0", "virtio0-input.0"])
    reads = [lambda c: c["name"], lambda c: c.get("name"), lambda c: dict(c.items())["name"],
             lambda c: c.values()[1], lambda c: dict(c)["name"], lambda c: {**c}["name"],
             lambda c: c.copy()["name"], lambda c: c.pop("name")]
    for read in reads:
        cols = _cols()
        assert cols.coded("name") is not None and "name" in cols
        got = read(cols)
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert cols.coded("name") is None
        assert all(not isinstance(v, Coded) for v in dict(cols).values())
    cols = _cols()
    cols["name"]
    assert list(cols) == ["ts", "name", "irq"]            # built where it stood
    assert cols.get("absent", 7) == 7 and cols.pop("absent", 8) == 8


def test_data_loc_codes_are_one_per_decoded_string():
    # Rows of bytes that differ only past their NUL, or decode alike (invalid UTF-8),
    # share one code: codes group records exactly as their strings do.
    rng = random.Random(3)
    names = [b"eth0", b"eth0\0zz", b"eth0\0", b"\xffa", b"\xfea", b"timer", b""]
    buf, off = data_loc_payloads(rng, names, 2000, lambda b: b"\0" * (-len(b) % 4))
    arr = np.frombuffer(bytes(buf) + b"\0" * 64, np.uint8)
    assert native.lib() is not None, native.why_not()
    code, text = fastpath.data_loc_coded(arr, off, 0)
    assert len(set(text.tolist())) == len(text) == len({s.split(b"\0")[0].decode(
        "utf-8", "replace") for s in names})
    strings = fastpath.data_loc_strings(arr, off, 0)
    assert strings.dtype == text[code].dtype
    np.testing.assert_array_equal(text[code], strings)


def test_irq_labels_from_codes_equal_labels_from_strings():
    rng = np.random.default_rng(4)
    text = np.array(["timer", "eth0", "virtio0-input.0", "ahci[0000:00:1f.2]"])
    codes = rng.integers(0, len(text), 5000).astype(np.int64)
    irq = rng.choice([0, 1, 11, 24, 25], 5000).astype(np.int32)
    by_codes = timeline._labels("irq ", irq, coded=Coded(codes, text))
    by_strings = timeline._labels("irq ", irq, text[codes])
    assert by_codes[0].tolist() == by_strings[0].tolist()
    np.testing.assert_array_equal(by_codes[1], by_strings[1])


def _switch_pages(kernel_formats, page_header, names: list[str],
                  cpus: tuple[int, ...] = (0, 1)) -> dict[int, bytes]:
    from irqlab.trace.synth import PageWriter, encode
    sw = kernel_formats["sched:sched_switch"]
    per_cpu = {}
    for cpu in cpus:
        w = PageWriter(page_header)
        for i, name in enumerate(names):
            w.add(1_000 + 3 * i, encode(sw, {"prev_pid": i, "next_pid": i + 1,
                                            "prev_comm": names[-1 - i], "next_comm": name}))
        per_cpu[cpu] = w.data()
    return per_cpu


def _decode_both(kernel_formats, page_header, per_cpu):
    from irqlab.explain.load import wanted_fields
    from irqlab.trace import ringbuf
    wanted = wanted_fields({"sched:sched_switch": kernel_formats["sched:sched_switch"]})
    fast, slow = both_ways(lambda: ringbuf.decode_tables(per_cpu, page_header, wanted))
    sw = kernel_formats["sched:sched_switch"].id
    return fast.tables[sw], slow.tables[sw]


def test_task_names_merge_as_codes_and_build_numpy_s_column(kernel_formats, page_header):
    # The streaming merge writes a code per record for char[16] names (twins that differ
    # only in their length, empty, 15 bytes): the built column is numpy's, byte for byte.
    names = ["swapper/0", "swapper/00", "", "kworker/u8:3-ev", "CPU 0/KVM", "a"] * 200
    fast, slow = _decode_both(kernel_formats, page_header,
                              _switch_pages(kernel_formats, page_header, names))
    assert fast.coded("next_comm") is not None and fast.coded("prev_comm") is not None
    assert len(fast.coded("next_comm").values) == 6
    assert list(fast) == list(slow)
    for k in slow:
        assert fast[k].dtype == slow[k].dtype and np.array_equal(fast[k], slow[k]), k


def test_more_distinct_names_than_the_codes_hold_are_copied(kernel_formats, page_header):
    # Past 65,536 distinct names the streaming merge gives up; the two-step merge copies
    # the names as bytes: the same columns as numpy's, not coded.
    names = [f"t{i}" for i in range(65_600)]
    fast, slow = _decode_both(kernel_formats, page_header,
                              _switch_pages(kernel_formats, page_header, names, (0,)))
    assert fast.coded("next_comm") is None
    for k in slow:
        assert fast[k].dtype == slow[k].dtype and np.array_equal(fast[k], slow[k]), k
