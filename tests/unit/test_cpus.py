"""irqlab.cpus: the one CPU-list syntax of --cpus, pin= and a load's cpus=."""

from __future__ import annotations

import os

import pytest

from irqlab.cpus import (MAX_CPUS, format_cpu_list, online_cpus, parse_available_cpus,
                         parse_cpu_list)


@pytest.mark.parametrize("text, cpus", [
    ("5", [5]),
    ("0,2-3", [0, 2, 3]),
    ("0-3", [0, 1, 2, 3]),
    ("3,1", [3, 1]),                 # order kept: ring i / vCPU i follow it
    (" 0 , 2 - 3 ", [0, 2, 3]),
    ("0-3\n", [0, 1, 2, 3]),         # as read from /sys/devices/system/cpu/online
    ("4-4", [4]),
])
def test_parse(text, cpus):
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text, words", [
    ("", "not a CPU list"),
    ("a", "not a CPU list"),
    ("0-", "not a CPU list"),
    ("-1", "not a CPU list"),
    ("1,,2", "not a CPU list"),
    ("0x1", "not a CPU list"),
    ("1.5", "not a CPU list"),
    ("²", "not a CPU list"),         # a Unicode digit is not a CPU number
    ("3-1", "goes backwards"),
    ("1,1", "names CPU 1 twice"),
    ("0-3,2", "names CPU 2 twice"),
    (f"0-{MAX_CPUS}", "beyond the largest"),
])
def test_parse_rejects(text, words):
    with pytest.raises(ValueError, match=words):
        parse_cpu_list(text)


@pytest.mark.parametrize("cpus, text", [
    ([], ""),
    ([5], "5"),
    ([0, 1], "0-1"),
    ([0, 2, 3], "0,2-3"),
    ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"),
    ([3, 1], "3,1"),
    ([2, 3, 0, 1], "2-3,0-1"),
])
def test_format_round_trips(cpus, text):
    assert format_cpu_list(cpus) == text
    if cpus:
        assert parse_cpu_list(text) == cpus


def test_online_cpus_are_this_process_affinity():
    assert online_cpus() == sorted(os.sched_getaffinity(0))


def test_available_cpus():
    first = online_cpus()[0]
    assert parse_available_cpus(str(first)) == [first]
    with pytest.raises(ValueError, match=f"CPU\\(s\\) {MAX_CPUS - 1} not available here"):
        parse_available_cpus(str(MAX_CPUS - 1))
    with pytest.raises(ValueError, match="not a CPU list"):
        parse_available_cpus("x")
