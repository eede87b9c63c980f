import numpy as np
import pytest

from irqlab.stats import Windower, WindowStats, format_percent, format_window_line

HZ = 33_333_333  # 30 ns per tick, as in the seed logs
SEED_LINE = ("Mean: 306 (9180 ns) stddev: 3 (90 ns) above thr: 2 (0.20%) "
             "[265 (7950 ns) - 376 (11280 ns)] global [263 (7890 ns) 376 (11280 ns)]")


def _seed_windows():
    """Window 0 holds the global min; window 1 is the seed line's window."""
    # 1000 samples, mean exactly 306, population stddev 3.32, 2 above 370.
    window1 = [265, 376, 372] + [305] * 95 + [306] * 902
    latencies = np.array([263, 300] + window1 + [306], np.int64)
    deadlines = np.concatenate([[0, 33_333], HZ + 33_333 * np.arange(1000),
                                [2 * HZ]]).astype(np.int64) + 10**9
    w = Windower(HZ, HZ, threshold_tick=370)
    return w.add(deadlines, latencies)


def test_seed_line_from_synthetic_data():
    windows = _seed_windows()
    assert len(windows) == 2
    w1 = windows[1]
    assert w1.mean_tick == 306.0 and 3.3 < w1.stddev_tick < 3.4
    assert format_window_line(w1, HZ) == SEED_LINE
    assert format_window_line(windows[0], HZ) == (
        "Mean: 282 (8460 ns) stddev: 19 (570 ns) above thr: 0 (0.00%) "
        "[263 (7890 ns) - 300 (9000 ns)] global [263 (7890 ns) 300 (9000 ns)]")


def test_empty_window_line():
    w = WindowStats(4, 4.0, 0, None, None, None, None, 0, 263, 376)
    assert format_window_line(w, HZ) == \
        "Mean: - (no samples) global [263 (7890 ns) 376 (11280 ns)]"


def test_mean_rounds_half_away_from_zero():
    w = WindowStats(0, 0.0, 2, 306.5, 2.5, 305, 308, 0, 305, 308)
    line = format_window_line(w, HZ)
    assert line.startswith("Mean: 307 (9210 ns) stddev: 3 (90 ns)")  # round() gives 306, 2


@pytest.mark.parametrize("count,total,text", [
    (2, 1000, "0.20%"), (0, 1000, "0.00%"), (1, 100_000, "<0.01%"), (1, 20_000, "0.01%"),
    (1, 3, "33.33%"), (1000, 1000, "100.00%"), (99_999, 100_000, ">99.99%"), (0, 0, "-"),
])
def test_percent(count, total, text):
    assert format_percent(count, total) == text


def test_a_split_window_line_extends_the_seed_line_with_two_columns():
    from irqlab.stats.parts import WindowParts
    w1 = _seed_windows()[1]
    line = format_window_line(w1, HZ, WindowParts(990, 2, 9, 260, 370))
    assert line == SEED_LINE + " IRQ [2 (60 ns) - 9 (270 ns)] " \
                               "Thr [260 (7800 ns) - 370 (11100 ns)]"
    assert format_window_line(w1, HZ, WindowParts(0, None, None, None, None)) == \
        SEED_LINE + " IRQ [-] Thr [-]"
    assert format_window_line(w1, HZ) == SEED_LINE
