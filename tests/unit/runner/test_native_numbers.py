"""One behaviour for numbers in every program of probes/native: strict decimal.

The programs share probes/native/lib/cli.c (parse_dec_u64): digits only, no sign, blank,
0x or 0 prefix, unit or overflow. A bad number is one error line on stderr and exit 2;
a good one gets past the parser (the run then fails for want of shared memory: exit 1).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BUILD = REPO / "probes" / "native" / "build"

# a number each program must refuse, and why
BAD_NUMBERS = [
    "0x10",                   # hex (native.c once parsed with strtoull(..., 0))
    "010",                    # octal in C; refused rather than read as 8 or 10
    "+5", "-5", " 5", "5 ",   # sign, blanks
    "", "5x", "1e3", "5ms",   # empty, trailing garbage, units
    "18446744073709551616",   # 2^64: does not fit
]

# program, the words before the number, the option taking it
PROGRAMS = [
    ("irqlab-native", ["--shm", "/nonexistent"], "--samples"),
    ("irqlab-native", ["--shm", "/nonexistent"], "--duration-ns"),
    ("irqlab-netsend", ["--shm", "/nonexistent", "--dest", "127.0.0.1"], "--count"),
    ("irqlab-netsend", ["--shm", "/nonexistent", "--dest", "127.0.0.1", "--count", "1"],
     "--timeout-ns"),
    ("irqlab-echo", [], "--port"),
    ("irqlab-echo", [], "--inject-every"),
    ("irqlab-diskio", [], "--rate"),
    ("irqlab-diskio", [], "--block"),
]


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    """The programs as the current sources build them (make relinks only what changed)."""
    subprocess.run(["make", "-s", "-C", str(REPO / "probes" / "native")], check=True,
                   capture_output=True, timeout=300)


def run(program: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BUILD / program), *args], capture_output=True, text=True,
                          timeout=10)


@pytest.mark.parametrize("program,before,option", PROGRAMS)
@pytest.mark.parametrize("number", BAD_NUMBERS)
def test_bad_number_is_one_line_and_exit_2(program: str, before: list[str], option: str,
                                           number: str) -> None:
    result = run(program, [*before, option, number])
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{program}: error: {option}"), lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("number", ["0", "1", "18446744073709551615"])
def test_good_numbers_get_past_the_parser(number: str) -> None:
    # exit 1: parsed, then the shared memory cannot be opened (not 2: usage)
    native = run("irqlab-native", ["--shm", "/nonexistent", "--samples", number])
    assert native.returncode == 1, native.stderr
    assert "cannot open --shm /nonexistent" in native.stderr
    netsend = run("irqlab-netsend", ["--shm", "/nonexistent", "--dest", "127.0.0.1",
                                     "--duration-ns", "1", "--count", number])
    assert netsend.returncode == 1, netsend.stderr


@pytest.mark.parametrize("cpus", ["0,+1", " 0", "00", "0-0x1", "0-", "1-0", "0,0", ""])
def test_cpu_list_is_strict_decimal(cpus: str) -> None:
    result = run("irqlab-native", ["--shm", "/nonexistent", "--cpus", cpus])
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("irqlab-native: error: --cpus")
    assert len(result.stderr.splitlines()) == 1


def test_cpu_list_ranges_parse() -> None:
    result = run("irqlab-native", ["--shm", "/nonexistent", "--cpus", "0-1,3"])
    assert result.returncode == 1, result.stderr
