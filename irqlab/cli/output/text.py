"""The text exporter: output for people, a formatter per model type (TEXT). A formatter
takes the model and the View and returns blocks (irqlab.cli.output.screen)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from irqlab.cli.output.seam import UnknownFormat, View
from irqlab.cli.output.text_compare import compare_text, histograms_text
from irqlab.cli.output.text_matrix import matrix_text
from irqlab.cli.output.text_reports import (explain_text, run_histograms_text, tail_text,
                                            trend_text)
from irqlab.cli.output.text_runs import (auto_text, bench_text, check_text, import_text,
                                         report_text, run_detail_text, run_list_text,
                                         series_text, suite_text, summary_text)
from irqlab.cli.output.text_store import export_text, push_text, rm_text, tag_text
from irqlab.cli.output.text_tools import doctor_text, rtds_text, xentrace_text

if TYPE_CHECKING:
    from irqlab.cli.output.screen import Block

# Model type -> its text formatter: a new command's text is one line here.
TEXT: dict[str, Callable[[dict[str, Any], View], list[Block]]] = {
    "summary": summary_text,
    "run_list": run_list_text,
    "run_detail": run_detail_text,
    "suite": suite_text,
    "bench_figures": bench_text,
    "import": import_text,
    "check_result": check_text,
    "report": report_text,
    "compare": compare_text,
    "compare_histograms": histograms_text,
    "explain": explain_text,
    "tail": tail_text,
    "trend_result": trend_text,
    "run_histograms": run_histograms_text,
    "series_result": series_text,
    "auto_result": auto_text,
    "tag": tag_text,
    "rm": rm_text,
    "export_result": export_text,
    "push_result": push_text,
    "model": rtds_text,
    "xentrace_summary": xentrace_text,
    "doctor_checks": doctor_text,
    "matrix_results": matrix_text,
}


class Text:
    """The text exporter (human output)."""

    def __init__(self, view: View) -> None:
        self.view = view

    def lines(self, model: dict[str, Any]) -> list[Block]:
        try:
            formatter = TEXT[model["type"]]
        except KeyError:
            raise UnknownFormat(f"{model['type']} has no text form (irqlab.cli.output."
                                f"text.TEXT)") from None
        return formatter(model, self.view)
