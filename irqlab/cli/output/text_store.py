"""Text formatters of the store's commands: `tag`, `rm`, `export`, `push`. Each takes its
JSON line's model and the View and returns printable lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from irqlab.cli.safe_text import printable

if TYPE_CHECKING:
    from irqlab.cli.output.screen import Block
    from irqlab.cli.output.seam import View


def tag_text(m: dict[str, Any], view: View) -> list[Block]:
    tags = ", ".join(f"{k}={v}" for k, v in m["tags"].items()) or "no tags"
    return [printable(f"{m['run_id']} {m['name']}: {tags}", False)]


def rm_text(m: dict[str, Any], view: View) -> list[Block]:
    return [printable(f"removed run {m['run_id']} {m['name']}: "
                      f"{m['rows']['samples'] or 0} stored samples, {m['sample_files']} "
                      f"sample files, {len(m['captures'])} captures", False)]


def export_text(m: dict[str, Any], view: View) -> list[Block]:
    """One exported run (model: {"type": "export_result", "line": its `export` line,
    "name": the run's name, which the line leaves out})."""
    line = m["line"]
    return [f"run {line['run_id']} {m['name']}: {line['samples']} samples"]


def push_text(m: dict[str, Any], view: View) -> list[Block]:
    """One pushed run (model: {"type": "push_result", "line": its `push` line, "name",
    "seconds": the push's time unrounded})."""
    line = m["line"]
    what = (f"pushed as run {line['lab_run_id']} ({line['samples']} samples, "
            f"{m['seconds']:.1f} s)" if line["added"]
            else f"already in the lab store as run {line['lab_run_id']}")
    if line["concurrent"]:      # exit 0 all the same: the run is there, stored once
        what += " (another push of it committed first; this one kept nothing)"
    return [f"run {line['run_id']} {m['name']}: {what}"]
