"""Import other tools' results as irqlab runs (docs/formats.md, "Imported runs").

    parse_file(fmt, path, options) -> ParseResult     one file, nothing written
    sniff(text) -> (format, score) | None             what `irqlab import auto` picks
    store_runs(store, parsed, ...)                     write them, all or nothing

Each format is a module with parse_<name>(path, text, options) and sniff_<name>(text).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from irqlab.importers import (cyclictest, irqlab_console, jitterdebugger, net_rtt, rt_eval,
                              rtla, stress_ng, tbm, tscdeadline)
from irqlab.importers.base import (PARSE_ERRORS, Format, ImportFormatError, ParsedRun,
                                   ParseOptions, ParseResult, Text, TextSource,
                                   located_error, reset_line)
from irqlab.importers.validate import validate_run

if TYPE_CHECKING:
    from irqlab.importers.ingest import StoredRun, run_names, store_runs


def __getattr__(name: str) -> Any:
    """The writing side (ingest: DuckDB, pyarrow, the store) loads on first use (PEP 562):
    `irqlab import --help` and the parser need only the formats (docs/design.md,
    "Start-up")."""
    if name in ("StoredRun", "run_names", "store_runs"):
        from irqlab.importers import ingest
        return getattr(ingest, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("rt-eval", rt_eval.parse_rt_eval, rt_eval.sniff_rt_eval,
           "Zephyr rt_eval window lines (both generations, mail-wrapped too)"),
    Format("rt-eval-tmu", rt_eval.parse_rt_eval_tmu, rt_eval.sniff_rt_eval_tmu,
           "Linux rt_eval_tmu driver lines in kernel logs"),
    Format("tbm", tbm.parse_tbm, tbm.sniff_tbm,
           "tbm 'latency (ns): max= …' lines and AVG/MIN/MAX/WARM MAX tables"),
    Format("cyclictest", cyclictest.parse_cyclictest, cyclictest.sniff_cyclictest,
           "cyclictest -q summary lines, -h histograms, --json"),
    Format("rtla-timerlat", rtla.parse_rtla, rtla.sniff_rtla,
           "rtla timerlat hist output (IRQ and thread kept apart)"),
    Format("stress-ng-cyclic", stress_ng.parse_stress_ng, stress_ng.sniff_stress_ng,
           "stress-ng --cyclic reports"),
    Format("jitterdebugger", jitterdebugger.parse_jitterdebugger,
           jitterdebugger.sniff_jitterdebugger, "jitterdebugger results.json"),
    Format("net-rtt", net_rtt.parse_net_rtt, net_rtt.sniff_net_rtt,
           "network round-trip 'latency min/avg/max/stddev (usec)' lines"),
    Format("tscdeadline", tscdeadline.parse_tscdeadline, tscdeadline.sniff_tscdeadline,
           "kvm-unit-tests tscdeadline_latency raw 'latency: N' cycles",
           stream=tscdeadline.stream_tscdeadline),
    Format("irqlab-console", irqlab_console.parse_irqlab_console,
           irqlab_console.sniff_irqlab_console,
           "irqlab's own probe console frames (sink=console) saved from a board or Xen"),
)}
AUTO = "auto"


def sniff(text: str) -> tuple[str, int] | None:
    """The format that claims the text most strongly, or None."""
    scores = [(f.sniff(text), name) for name, f in FORMATS.items()]
    score, name = max(scores)
    return (name, score) if score > 0 else None


def parse_text(fmt: str, path: str, text: Text, options: ParseOptions) -> ParseResult:
    """Parse text (a str, or a TextSource read line by line) as `fmt`; raises
    ImportFormatError, never anything else on bad input."""
    reset_line()
    try:
        result = FORMATS[fmt].parse(path, text, options)
        for run in result.runs:
            validate_run(run)          # every number in range, before anything uses it
        return result
    except ImportFormatError:
        raise
    except PARSE_ERRORS as exc:
        raise located_error(fmt, path, exc) from None


def stream_file(fmt: str, source: Path | TextSource, options: ParseOptions) -> ParseResult:
    """Like `parse_file`, but a format that streams leaves its raw samples in the file
    (ParsedRun.samples) for `store_runs` to read batch by batch: memory does not grow
    with the file (a TextSource given stays open until then). The result's skipped lines
    are complete once they were stored."""
    streamer = FORMATS[fmt].stream
    if streamer is None:
        return parse_file(fmt, source, options)
    reset_line()
    return streamer(source, options)


def parse_file(fmt: str, source: Path | TextSource, options: ParseOptions) -> ParseResult:
    """A file's runs, read as a stream: line by line for the formats that can be, whole
    (bounded) for the others."""
    if isinstance(source, TextSource):
        return parse_text(fmt, source.name, source, options)
    with TextSource(source) as opened:
        return parse_text(fmt, opened.name, opened, options)


__all__ = ["AUTO", "FORMATS", "Format", "ImportFormatError", "ParseOptions", "ParseResult",
           "ParsedRun", "StoredRun", "located_error", "parse_file", "parse_text", "run_names",
           "sniff", "store_runs", "stream_file"]
