"""The markdown and csv exporters: plain-text documents of the models that have them
(DOCUMENTS); lines as the formatters in irqlab.reports.tables build them."""

from __future__ import annotations

from typing import Any, Callable

from irqlab.cli.output.seam import UnknownFormat


def _compare_markdown(model: dict[str, Any]) -> list[str]:
    # The compare tables pull in the store (DuckDB, Arrow): imported when used.
    from irqlab.reports.tables import markdown_lines
    return markdown_lines(model)


def _compare_csv(model: dict[str, Any]) -> list[str]:
    from irqlab.reports.tables import csv_lines
    return csv_lines(model)


def _matrix_markdown(model: dict[str, Any]) -> list[str]:
    from irqlab.cli.output.text_matrix import matrix_markdown
    return matrix_markdown(model)


def _matrix_csv(model: dict[str, Any]) -> list[str]:
    from irqlab.cli.output.text_matrix import matrix_csv
    return matrix_csv(model)


def _histograms_markdown(model: dict[str, Any]) -> list[str]:
    from irqlab.cli.output.text_compare import histograms_markdown
    return histograms_markdown(model)


# Format -> model type -> its lines: a model's markdown or csv form is one line here.
DOCUMENTS: dict[str, dict[str, Callable[[dict[str, Any]], list[str]]]] = {
    "markdown": {"compare": _compare_markdown, "compare_histograms": _histograms_markdown,
                 "matrix_results": _matrix_markdown},
    "csv": {"compare": _compare_csv, "matrix_results": _matrix_csv},
}


class Document:
    """The exporter of one document format (markdown or csv)."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def lines(self, model: dict[str, Any]) -> list[str]:
        try:
            make = DOCUMENTS[self.fmt][model["type"]]
        except KeyError:
            raise UnknownFormat(f"{model['type']} has no {self.fmt} form") from None
        return make(model)
