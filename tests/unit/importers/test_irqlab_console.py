"""irqlab's own console frames: exact records kept, damage counted as loss."""

from pathlib import Path

import numpy as np
import pytest

from irqlab.importers import ImportFormatError, ParseOptions, parse_text, sniff

FIXTURE = Path(__file__).parents[2] / "fixtures" / "import" / "irqlab_console_arm64.log"


def test_real_console_log_keeps_every_record():
    text = FIXTURE.read_text()
    assert sniff(text)[0] == "irqlab-console"
    run = parse_text("irqlab-console", "c.log", text, ParseOptions()).runs[0]
    rec = run.records
    assert len(rec) == 300 and np.array_equal(rec["seq"], np.arange(300))
    injected = (rec["flags"] & 1) != 0
    assert np.flatnonzero(injected).tolist() == list(range(49, 300, 50))
    # 62.5 MHz counter: the 100 us injection is 6250 ticks, icount makes the rest exact.
    assert np.all(run.latency_tick[injected] >= 6250)
    assert run.tick_hz == 62_500_000 and run.period_ns == 1_000_000
    assert run.figures == {"lost": 0, "overruns": 0}


def test_damaged_frame_is_lost_not_invented():
    lines = FIXTURE.read_text().splitlines(keepends=True)
    idx = next(i for i, x in enumerate(lines) if x.startswith("~IQS"))
    lines[idx] = lines[idx].replace(",", ";", 1)      # breaks its CRC
    run = parse_text("irqlab-console", "c.log", "".join(lines), ParseOptions()).runs[0]
    assert run.figures["lost"] > 0
    assert len(run.records) + run.figures["lost"] == 300


def test_no_header_is_a_clean_error():
    with pytest.raises(ImportFormatError, match="header frame"):
        parse_text("irqlab-console", "c.log", "hello\n~IQ garbage\n", ParseOptions())
