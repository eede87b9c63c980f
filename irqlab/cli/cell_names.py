"""A matrix cell's name and its values as text ('idle=hlt,load=cpu'): what the scenario
parser, the runner, the plan and the results table all call a cell."""

from __future__ import annotations

from typing import Any


def cell_id(cell: dict[str, Any]) -> str:
    """Stable text for a cell: 'idle=hlt,load=cpu'."""
    return ",".join(f"{k}={value_text(v)}" for k, v in cell.items())


def value_text(v: Any) -> str:
    if isinstance(v, list):
        return "+".join(value_text(x) for x in v)
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)
