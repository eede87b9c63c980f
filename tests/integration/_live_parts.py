"""The IRQ/thread split of a traced run's samples as stored (split_rows), and the live
IRQ/thread columns of its window lines (issue 44), judged
against the split the run stored at its end from the whole capture: one rule
(irqlab.explain.parts), so where the live read split a window's samples its figures lie
within the final split's of the same window, and equal them when it split them all."""

from __future__ import annotations

import numpy as np

def split_rows(parts: dict, samples: dict) -> np.ndarray:
    """(deadline, timer IRQ entry, entry) in ticks of every split sample, one row each."""
    rows = [(int(d), parts[(int(q), int(c))], int(e)) for q, c, d, e in
            zip(samples["seq"], samples["cpu"], samples["deadline_tick"],
                samples["entry_tick"]) if (int(q), int(c)) in parts]
    return np.array(rows, np.int64).reshape(-1, 3)


PART_KEYS = ("split_samples", "irq_min_ns", "irq_max_ns", "thread_min_ns",
             "thread_max_ns")


def check_live_columns(windows: list[dict], parts: dict, samples: dict,
                       window_ns: int) -> tuple[int, int]:
    """Assert each window's live parts against the stored split; (windows whose columns
    split >= 80 % of their samples, windows before the last)."""
    dl = samples["deadline_tick"].astype(np.int64)
    en = samples["entry_tick"].astype(np.int64)
    irq = np.array([parts.get((int(q), int(c)), -1) for q, c in
                    zip(samples["seq"], samples["cpu"])], np.int64)
    index = (dl - dl.min()) // window_ns
    full = 0
    for w in windows[:-1]:       # the last closes after the capture has stopped
        assert set(PART_KEYS) <= set(w), w
        mine = (index == w["index"]) & (irq >= 0)
        if not w["split_samples"]:
            continue
        assert w["split_samples"] <= w["samples"]
        i_part, t_part = irq[mine] - dl[mine], en[mine] - irq[mine]
        assert i_part.min() <= w["irq_min_ns"] <= w["irq_max_ns"] <= i_part.max(), w
        assert t_part.min() <= w["thread_min_ns"] <= w["thread_max_ns"] <= t_part.max(), w
        if w["split_samples"] == int(mine.sum()):
            assert (w["irq_min_ns"], w["irq_max_ns"], w["thread_min_ns"],
                    w["thread_max_ns"]) == (int(i_part.min()), int(i_part.max()),
                                            int(t_part.min()), int(t_part.max())), w
        full += w["split_samples"] >= 0.8 * w["samples"]
    return full, len(windows) - 1
