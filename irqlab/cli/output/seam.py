"""The output seam's interface: an Exporter (one format, one method) and the View a
person asked for; irqlab.cli.output picks the exporter and shows the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from irqlab.cli.output.screen import Block

# The widest line a command prints by default (issue 32: a 3-run compare had a
# 161-column table and prose lines up to 378 characters).
OUTPUT_WIDTH = 120


@dataclass(frozen=True)
class View:
    """How a person asked to see a model (the text exporter's options; JSON ignores
    them): ``verbose`` (compare --verbose: the noise test's whole method), ``show_all``
    (explain --all: every sample), ``width`` (explain: wrap at it; None: --wide)."""

    verbose: bool = False
    show_all: bool = False
    width: int | None = OUTPUT_WIDTH


class Exporter(Protocol):
    """One output format: a model's blocks (lines), built and returned, never written."""

    def lines(self, model: dict[str, Any]) -> list[Block]: ...


class UnknownFormat(LookupError):
    """A model this format has no form of."""
