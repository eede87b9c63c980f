"""stage_summary: where the time goes, per step between consecutive stages.

Checked against a direct nearest-rank computation (Hyndman & Fan definition 1: the
smallest value with at least p of the values at or below it) on random stage times, and
for the order of the steps (the path's, names outside it last) and what is left out
(samples not explained, steps nobody has)."""

from __future__ import annotations

import numpy as np

from irqlab.explain.attribute import Attribution, stage_summary
from irqlab.reports.html import _explain_section

ORDER = ("deadline", "woken", "injected", "entered", "handler entry")


def _att(seq: int, times: list[int], names=ORDER, status: str = "explained") -> Attribution:
    a = Attribution(seq, times[-1] - times[0], times[0], times[-1], status=status)
    a.stages = list(zip(names, times))
    return a


def _nearest_rank(values: list[int], p: float) -> int:
    v = sorted(values)
    for x in v:
        if sum(y <= x for y in v) >= p * len(v):
            return x
    raise AssertionError


def test_percentiles_are_nearest_rank_per_step() -> None:
    rng = np.random.default_rng(7)
    atts, gaps = [], []
    for k in range(137):
        g = rng.integers(0, 10_000, size=4).tolist()
        gaps.append(g)
        atts.append(_att(k, np.cumsum([1000] + g).tolist()))
    out = stage_summary(atts, lambda t: t * 2, ORDER)      # ns = 2 x ticks here
    assert [(s["from"], s["to"]) for s in out] == list(zip(ORDER, ORDER[1:]))
    for j, st in enumerate(out):
        col = [g[j] for g in gaps]
        assert st["samples"] == 137
        for key, p in (("p50_ns", .5), ("p90_ns", .9), ("p99_ns", .99)):
            assert st[key] == 2 * _nearest_rank(col, p), key
        assert st["max_ns"] == 2 * max(col)


def test_only_explained_samples_and_steps_in_path_order() -> None:
    atts = [
        _att(1, [0, 5, 9], ("deadline", "entered", "handler entry")),
        _att(2, [0, 3, 4, 9], ("deadline", "woken", "entered", "handler entry")),
        _att(3, [0, 100], ("deadline", "handler entry"), status="incomplete"),
        _att(4, [0, 1, 2], ("deadline", "odd stage", "handler entry")),
    ]
    out = stage_summary(atts, lambda t: t, ORDER)
    steps = [(s["from"], s["to"], s["samples"]) for s in out]
    assert steps == [("deadline", "woken", 1), ("deadline", "entered", 1),
                     ("deadline", "odd stage", 1), ("woken", "entered", 1),
                     ("entered", "handler entry", 2), ("odd stage", "handler entry", 1)]
    assert ("deadline", "handler entry", 1) not in steps     # the incomplete one
    assert stage_summary([], lambda t: t, ORDER) == []


def test_html_section_shows_the_steps_or_why_not() -> None:
    atts = [_att(k, [0, 10 + k, 30 + k, 35 + 2 * k, 40 + 2 * k]) for k in range(5)]
    js = {"run_id": 3, "source": "xentrace", "selected_by": "top 5", "incomplete": 0,
          "not_traced": 0, "samples": [{}] * 5, "clock": {"error_bound_ns": 1500},
          "stage_summary": stage_summary(atts, lambda t: t * 1000, ORDER),
          "stages_not_traced": {"physical <timer>": "no trace point"},
          "culprits": [{"cause": "runnable while d0v0 ran", "total_ns": 12_000_000,
                        "worst_ns": 3_000_000, "samples": 5}]}
    html = "\n".join(_explain_section(js))
    assert "Where the time goes" in html and "irqlab explain 3" in html
    assert "<td class=\"l\">woken</td><td class=\"l\">injected</td><td class=\"\">5</td>" \
        in html
    assert "physical &lt;timer&gt;" in html          # escaped
    assert "runnable while d0v0 ran" in html and "12.0 ms" in html
    why = "\n".join(_explain_section("run 3 has no xentrace capture (x missing)"))
    assert "Not explained: run 3 has no xentrace capture" in why
