"""`irqlab xentrace` refuses what is not Xen's records (issue 30): plausibility of the
records, the decompression bound, the clock rate."""

from __future__ import annotations

import lzma
import zlib
from pathlib import Path

import numpy as np
import pytest

from irqlab.cli.cmd_xentrace import plausible_hz
from irqlab.xen.capture import (DecompressionLimitError, decompressed_limit,
                                read_xentrace)
from irqlab.xen.index import check_plausible, index_records
from irqlab.xen.records import (TRC_SCHED_SWITCH, TraceFormatError, encode_record,
                                encode_window)

FIXTURE = Path(__file__).parents[2] / "fixtures" / "xen" / "dom0-cpu.xentrace.xz"


def test_the_real_capture_is_plausible():
    data = lzma.decompress(FIXTURE.read_bytes())
    check_plausible(index_records(data))


def test_random_bytes_are_not():
    data = np.random.default_rng(1).bytes(1 << 20)
    with pytest.raises(TraceFormatError, match="no Xen trace class"):
        check_plausible(index_records(data))


def test_cycles_running_back_are_not():
    back = b"".join(encode_record(TRC_SCHED_SWITCH, (1, 2), tsc=10**6 - i)
                    for i in range(100))
    with pytest.raises(TraceFormatError, match="cycle counts go back at 99 of 100"):
        check_plausible(index_records(encode_window(0, back)))
    # two pCPUs, each in order, interleaved in the file: plausible
    fwd = [encode_window(c, b"".join(encode_record(TRC_SCHED_SWITCH, (1, 2),
                                                   tsc=10**6 * (c + 1) + i)
                                     for i in range(50))) for c in (1, 0)]
    check_plausible(index_records(b"".join(fwd)))


def test_a_decompression_bomb_is_stopped_at_its_bound(tmp_path):
    assert decompressed_limit(1000) == 64 << 20              # the floor
    assert decompressed_limit(10 << 20) == 320 << 20         # 32 x
    assert decompressed_limit(1 << 40) == 4 << 30            # the ceiling
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    path = tmp_path / "bomb.gz"
    with open(path, "wb") as f:
        for _ in range(80):
            f.write(comp.compress(bytes(1 << 20)))
        f.write(comp.flush())
    with pytest.raises(DecompressionLimitError, match="decompression bomb"):
        read_xentrace(path)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0, -1, 1e30, "2e9", True])
def test_implausible_rates(value):
    assert plausible_hz(value)


def test_plausible_rate():
    assert plausible_hz(2_596_146_000) is None and plausible_hz(1e6) is None
