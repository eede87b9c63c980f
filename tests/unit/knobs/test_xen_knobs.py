"""Xen scheduler knobs: values in xl's own unit, ranges and whole units enforced."""

from __future__ import annotations

import pytest

from irqlab.knobs.xen import (Credit2CapKnob, Credit2RatelimitKnob, Credit2WeightKnob,
                              CreditRatelimitKnob, CreditTsliceKnob, RtdsBudgetKnob,
                              RtdsPeriodKnob)


@pytest.mark.parametrize("cls, text, parsed", [
    (Credit2WeightKnob, "512", 512),
    (Credit2CapKnob, "0", 0),
    (Credit2RatelimitKnob, "1ms", 1000),          # xl sched-credit2 -r takes µs
    (CreditRatelimitKnob, "500us", 500),
    (CreditTsliceKnob, "30ms", 30),               # xl sched-credit -t takes ms
    (RtdsPeriodKnob, "100us", 100_000),           # ns: dom0's init writes µs
    (RtdsBudgetKnob, "12us", 12_000),
])
def test_value_in_the_unit_xl_takes(cls, text, parsed):
    assert cls(text).parsed == parsed


@pytest.mark.parametrize("cls, text, words", [
    (Credit2WeightKnob, "0", "credit2_weight must be in 1..65535, not 0"),
    (Credit2CapKnob, "x", "credit2_cap 'x' is not an integer"),
    (Credit2RatelimitKnob, "1s", "credit2_ratelimit must be 0 us..500 ms in whole us"),
    (Credit2RatelimitKnob, "1500ns", "in whole us, not 1500ns"),
    (CreditTsliceKnob, "1500us", "credit_tslice must be 1 ms..1000 ms in whole ms"),
    (RtdsPeriodKnob, "5us", "RTDS period must be 10 us.."),
])
def test_out_of_range_or_unit_names_the_limits(cls, text, words):
    with pytest.raises(ValueError) as exc:
        cls(text)
    assert words in str(exc.value)
