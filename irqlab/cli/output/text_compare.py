"""Text formatters of `irqlab compare`: the table (compact when it would pass
OUTPUT_WIDTH, issue 32), per-CPU rows, notes, noise, differences, warnings; and the
runs' histograms side by side (--hist). They return blocks; the screen writes them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from irqlab.cli.output.lines import OUTPUT_WIDTH, warning_blocks, wrapped
from irqlab.cli.output.screen import Block, Line, Rich

if TYPE_CHECKING:
    from rich.table import Table

    from irqlab.cli.output.seam import View


def _natural_width(table: Table, widest: bool) -> int:
    """The table's width unsqueezed (``widest``: its maximum, else its minimum), as
    rich measures it at 1,000 columns."""
    import io

    from rich.console import Console

    c = Console(file=io.StringIO(), width=1000)
    got = c.measure(table, options=c.options.update(max_width=1000))
    return got.maximum if widest else got.minimum


def compare_text(model: dict[str, Any], view: View) -> list[Block]:
    # Imported here: the compare tables pull in the store (DuckDB, Arrow: ~0.2 s),
    # which commands that never compare need not pay.
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from irqlab.reports import tables as compare_tables

    cols = compare_tables.HUMAN_COLUMNS

    def build(compact: bool) -> Table:
        """Compact (issue 32): runs as #ID (named below the table), the verdict
        wrapped at its spaces, no vertical rules: 161 -> 120 columns for 3 runs of
        default names. Numbers never wrap nor become ellipses."""
        # Cells are Text objects: run names and tags are data, never rich markup.
        table = Table(title=Text(f"compare against run {model['baseline_run_id']} "
                                 f"(baseline)"),
                      box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
                      show_edge=not compact, pad_edge=not compact,
                      padding=(0, 1) if not compact else (0, 0, 0, 1),
                      collapse_padding=compact)
        for head, _key, kind in cols:
            table.add_column(head, no_wrap=not (compact and kind == "verdict"),
                             justify="left" if kind in ("run", "verdict") else "right")
        for row in model["rows"]:
            table.add_row(*(Text(f"#{row['run_id']}" if compact and kind == "run"
                                 else compare_tables.cell(row, key, kind))
                            for _h, key, kind in cols))
        return table

    table = build(False)
    compact = _natural_width(table, widest=True) > OUTPUT_WIDTH
    if compact:
        table = build(True)
    out: list[Block] = [Rich(table, min_width=_natural_width(table, widest=not compact),
                             max_width=OUTPUT_WIDTH if compact else None)]
    if compact:
        out += [Line(part, "") for part in wrapped(
            "runs: " + ", ".join(f"#{r['run_id']} {r['name']}" for r in model["rows"]))]
    out += _per_cpu_blocks(model)
    for line in compare_tables.notes_lines(model, view.verbose):
        out += [Line(part, "dim") for part in wrapped(line)]
    for line in compare_tables.noise_lines(model):
        out += [Line(part, "") for part in wrapped(line)]
    for line in compare_tables.differs_lines(model):
        out += [Line(part, "yellow") for part in wrapped(line)]
    out += [Line(line, "yellow") for line in warning_blocks(model["warnings"])]
    return out


def _per_cpu_blocks(model: dict[str, Any]) -> list[Block]:
    """compare --per-cpu: a row per CPU of each run ('#4 T:1'), within OUTPUT_WIDTH."""
    if not model.get("per_cpu"):
        return []
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from irqlab.reports import tables as compare_tables

    out: list[Block] = []
    rows = compare_tables.per_cpu_rows(model)
    if rows:
        table = Table(title=Text("per CPU"), box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False)
        for head, _key, kind in compare_tables.PER_CPU_COLUMNS:
            table.add_column(head, no_wrap=True,
                             justify="left" if kind == "cpu_run" else "right")
        for row in rows:
            table.add_row(*(Text(compare_tables.per_cpu_cell(row, key, kind))
                            for _h, key, kind in compare_tables.PER_CPU_COLUMNS))
        out.append(Rich(table))
    for line in compare_tables.per_cpu_notes(model):
        out += [Line(part, "dim") for part in wrapped(line)]
    return out


def histograms_text(model: dict[str, Any], view: View) -> list[Block]:
    """compare --hist: after the comparison, the runs' histograms side by side."""
    from irqlab.reports.termhist import side_by_side_lines

    return ["", "histogram (latency, then per run: count and log10 bar)",
            *side_by_side_lines(model["runs"])]


def histograms_markdown(model: dict[str, Any]) -> list[str]:
    """compare --hist --format markdown: the same lines in a code block."""
    from irqlab.reports.termhist import side_by_side_lines

    return ["", "histogram (latency, then per run: count and log10 bar)",
            "```", *side_by_side_lines(model["runs"]), "```"]
