"""Formatters of `irqlab matrix`'s results: a row per cell (its keys, run, status and
summary figures) as a terminal table, markdown or csv (model: {"type":
"matrix_results", "results": [irqlab.cli.matrix.CellResult], "keys", "title",
"raw"})."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

from irqlab.cli.cell_names import cell_id, value_text
from irqlab.cli.output.screen import Block, Fixed
from irqlab.cli.output.seam import OUTPUT_WIDTH
from irqlab.stats.fields import MATRIX_TABLE

if TYPE_CHECKING:
    from irqlab.cli.output.seam import View

# A cell's result (irqlab.cli.matrix.CellResult; not imported: the matrix runs through
# the CLI's commands, which render through here).
CellResult = Any
# (heading, summary key) of the results table, from the catalog (irqlab.stats.fields).
SUMMARY_COLUMNS = [(c.heading, c.key) for c in MATRIX_TABLE]


def _header(keys: list[str]) -> list[str]:
    return [k.upper() for k in keys] + ["RUN", "STATUS"] + [c for c, _ in SUMMARY_COLUMNS]


def _cells(res: CellResult, keys: list[str], units: bool = False) -> list[str]:
    """A result's cells; latencies in ns (csv, markdown, --raw) or, with ``units``, as
    every command prints them (durations.format_latency: '31.6 us')."""
    from irqlab.durations import format_latency

    s = res.summary
    vals = [value_text(res.cell.get(k, "")) for k in keys]
    vals += [str(res.run_id), res.status + (" (resumed)" if res.resumed else "")]
    vals += ["—" if s.get(key) is None
             else format_latency(s[key]) if units and key.endswith("_ns") else str(s[key])
             for _c, key in SUMMARY_COLUMNS]
    return vals


def _notes(results: list[CellResult]) -> list[str]:
    return [f"{cell_id(r.cell)}: {n}" for r in results for n in r.notes]


def matrix_text(m: dict[str, Any], view: View) -> list[Block]:
    """The terminal table (figures with units, or in ns with --raw), then the notes; at
    OUTPUT_WIDTH columns, the cells' keys (load specs ...) wrapping to fit it."""
    from rich.table import Table

    keys, header = m["keys"], _header(m["keys"])
    table = Table(title=f"{m['title']}" + (" (latencies in ns)" if m["raw"] else ""))
    for i, col in enumerate(header):
        # Figures never wrap; the cell's keys (load specs ...) wrap to fit OUTPUT_WIDTH.
        table.add_column(col, justify="left" if i < len(keys) + 2 else "right",
                         no_wrap=i >= len(keys))
    for res in m["results"]:
        table.add_row(*_cells(res, keys, units=not m["raw"]))
    return [Fixed((table, *(f"note: {n}" for n in _notes(m["results"]))), OUTPUT_WIDTH)]


def matrix_markdown(m: dict[str, Any]) -> list[str]:
    """The results as a markdown table. Cells are escaped as compare's are: a cell value
    (a load spec, a knob value, a note) may hold '|', which would split the row."""
    from irqlab.reports.tables import _md as md_cell   # the one markdown cell escaper

    keys, header = m["keys"], _header(m["keys"])
    lines = [f"### {md_cell(m['title'])}", "", "latencies in ns", "",
             "| " + " | ".join(md_cell(h) for h in header) + " |",
             "|" + "|".join("---" if i < len(keys) + 2 else "---:"
                            for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(md_cell(c) for c in _cells(r, keys)) + " |"
              for r in m["results"]]
    notes = _notes(m["results"])
    if notes:
        lines.append("")
        lines += [f"- {md_cell(n)}" for n in notes]
    return lines


def matrix_csv(m: dict[str, Any]) -> list[str]:
    """The results as csv, latencies in ns."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_header(m["keys"]))
    w.writerows(_cells(r, m["keys"]) for r in m["results"])
    return buf.getvalue().splitlines()
