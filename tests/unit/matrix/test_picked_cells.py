"""`irqlab matrix --only`: PickedCells counts and lists the picked cells without trying
every cell (issue 47), and agrees with fnmatch over every cell's name."""

from __future__ import annotations

import itertools
import random

from irqlab.cli.scenario import PickedCells, Scenario, picked

_VALUES = ["hlt", "poll", "1", "10us", True, False, "a*b", "[x]", 3, "a,b=c"]
_PATTERNS = ["*", "*1*", "a?=*", "*=hlt", "*[!a]", "[ab]*", "*,*", "zzz", "*=on*",
             "*p=1,q=y", "*[*", "?*[x]*", "", "[]]*", "*[!]]", "*\\*", "*=a,b=c*", "**x*"]


def test_agrees_with_fnmatch_on_every_cell():
    rng = random.Random(47)
    for _ in range(1500):
        matrix: dict = {}
        for k in range(rng.randrange(0, 4)):
            key = rng.choice(["a", "b", "idle", "x_y"]) + str(k)
            matrix[key] = [rng.choice(_VALUES) for _ in range(rng.randrange(1, 4))]
        if rng.random() < 0.3:
            matrix["p+q"] = [[rng.choice(["1", "2"]), rng.choice(["x", "y"])]
                             for _ in range(2)]
        patterns = tuple(rng.choice(_PATTERNS) for _ in range(rng.randrange(1, 3)))
        every = Scenario(name="t", path=None, run={}, matrix=matrix)._all_cells()
        expected = [c for c in every if picked(c, patterns)]
        cells = PickedCells(matrix, patterns)
        assert cells.count() == len(expected), (matrix, patterns)
        assert list(cells) == expected, (matrix, patterns)


def _huge() -> dict:
    """10^12 cells."""
    return {"period": [f"{100 + i}us" for i in range(1000)],
            "threshold": [f"{10 + i}us" for i in range(1000)],
            "window": [f"{1 + i}ms" for i in range(1000)],
            "warmup": list(range(1000))}


def test_a_huge_matrix_is_counted_and_listed_by_what_is_picked():
    matrix = _huge()
    assert PickedCells(matrix, ("zzz",)).count() == 0
    assert list(PickedCells(matrix, ("zzz",))) == []
    some = PickedCells(matrix, ("*threshold=1?us,window=1ms,warmup=9?",))
    assert some.count() == 1000 * 10 * 10
    first = list(itertools.islice(some, 3))
    assert [c["warmup"] for c in first] == [90, 91, 92]
    assert PickedCells(matrix, ("*warmup=5",)).count() == 10**9
