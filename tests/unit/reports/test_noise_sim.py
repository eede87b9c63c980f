"""Calibration of compare's run-level test by simulation (issue 45): 2,000 A/A pairs at
each of 3 v 3, 3 v 5 and 3 v 10 runs, with run-level lognormal noise (5 %) and
autocorrelated samples with bursts (irqlab.reports.noise_sim), judged by the function
compare calls. `different` must stay at the 5 % level, its Wilson upper bound <= 6 %."""

import numpy as np
import pytest

from irqlab.reports import noise
from irqlab.reports.noise_sim import SimConfig, auto_shares, verdict_shares

PAIRS = 2_000


@pytest.mark.slow
@pytest.mark.parametrize("runs_b", [3, 5, 10])
def test_a_a_different_rate_holds_the_level_at_unequal_sizes(runs_b):
    rng = np.random.default_rng(4500 + runs_b)
    cfg = SimConfig()
    counts = verdict_shares(rng, PAIRS, 3, runs_b, cfg, cfg)
    lo, hi = noise.wilson_interval(counts["different"], PAIRS)
    assert counts["different"] / PAIRS <= 0.05 and hi <= 0.06, counts
    # Not a test that never fires: at this level some A/A pairs must come out different.
    assert counts["different"] >= 5, counts


@pytest.mark.slow
def test_a_a_different_rate_holds_when_the_small_side_is_the_noisier():
    """Welch's df approximation was ~15 % here (issue 45): 3 runs of twice the
    run-to-run spread against 10 of half of it, one true level."""
    rng = np.random.default_rng(4511)
    counts = verdict_shares(rng, 1_000, 3, 10, SimConfig(run_sd=0.08),
                            SimConfig(run_sd=0.02))
    _lo, hi = noise.wilson_interval(counts["different"], 1_000)
    assert hi <= 0.07, counts


@pytest.mark.slow
def test_a_thirty_percent_shift_is_found_at_five_runs_a_side():
    rng = np.random.default_rng(4513)
    counts = verdict_shares(rng, 500, 5, 5, SimConfig(), SimConfig(shift=1.3))
    assert counts["different"] / 500 >= 0.9, counts
    assert counts["same"] == 0, counts


# --repeat auto replayed on simulated runs (noise.auto_decision, the rule run and matrix
# apply): the busy host of docs/figures.md, whose p50 varies 8 % from run to run, and
# the cap bench noise was measured at (6 a side: looks at 3, 4, 5 and 6).
BUSY = SimConfig(run_sd=0.08)
CAP = 6


@pytest.mark.slow
def test_repeat_auto_holds_the_level_over_its_looks():
    """The level spent over the looks (O'Brien-Fleming type, Lan-DeMets) keeps the A/A
    `different` share at the 5 % level although every look may stop."""
    pairs = 1_000
    counts, used = auto_shares(np.random.default_rng(4520), pairs, CAP, BUSY, BUSY)
    lo, hi = noise.wilson_interval(counts["different"], pairs)
    assert counts["different"] / pairs <= 0.05 and hi <= 0.06, counts
    assert counts["different"] >= 5, counts          # the test can fire
    assert all(noise.MIN_RUNS <= n <= CAP for n in used)


@pytest.mark.slow
def test_repeat_auto_finds_a_thirty_percent_shift_nine_times_in_ten():
    """Issue 45's power goal at the count auto picks (equal Bonferroni over the looks
    found x1.3 in 78 % of real pairs at this cap, 90 % here)."""
    pairs = 400
    counts, used = auto_shares(np.random.default_rng(4521), pairs, CAP, BUSY,
                               SimConfig(run_sd=0.08, shift=1.3))
    assert counts["different"] / pairs >= 0.9, (counts, sorted(used)[pairs // 2])
    assert counts["same"] == 0, counts
