"""Off a terminal the output seam's screen draws list/show's tables and lines itself,
without rich (issue 28: importing rich and laying out a table was ~40 ms of their start).
What it writes must be what rich writes, byte for byte: the screen's plain path and its
rich path (the same screen with the plain drawing off) print the same random tables,
lines, run lists and run details (as the text exporter builds them), hostile text
included (markup, emoji codes, control and wide characters, tables wider than the
console)."""

from __future__ import annotations

import contextlib
import io
import random
from typing import Any, Callable

import pytest
from rich.errors import MarkupError

from irqlab.cli.output import View
from irqlab.cli.output.screen import PLAIN_WIDTH, Data, PlainTable, Screen
from irqlab.cli.output.text_runs import run_detail_text, run_list_text
from irqlab.stats.fields import make_summary

# Words the random texts are made of: ordinary ones, and (one in ten) each thing rich
# would render differently from its plain text.
WORDS = ["run", "ok", "12", "2504 ns", "—", "≤3", "µs", "é", "×", "x  y", "", " ", "a]",
         ":03:", "::1", "\\", "wide" * 30]
HOSTILE = ["[bold]b[/]", "[x", "\\[b]", ":fire:", "a\tb", "\x1b[2J", "\u202e", "中文",
           "e\u0301", "\u00ad", "🔥"]


def _text(rng: random.Random, words: int = 3) -> str:
    return "".join(rng.choice(HOSTILE if rng.random() < 0.1 else WORDS)
                   for _ in range(rng.randint(0, words)))


def _printed(draw: Callable[[Screen], None], plain: bool) -> str:
    """What ``draw`` prints to a pipe-like stdout, through the plain drawing or rich."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        screen = Screen()
        assert screen._plain              # a StringIO is no terminal: plain allowed
        screen._plain = plain
        draw(screen)
    return buf.getvalue()


def _same(draw: Callable[[Screen], None]) -> str:
    try:
        theirs = _printed(draw, plain=False)
    except MarkupError:         # (a style's closing tag escaped by a trailing backslash)
        with pytest.raises(MarkupError):        # left to rich, as it must be
            _printed(draw, plain=True)
        return ""
    ours = _printed(draw, plain=True)
    assert ours == theirs
    return ours


def _random_table(rng: random.Random) -> PlainTable:
    title = rng.choice([None, "windows", Data(_text(rng)), _text(rng)])
    table = PlainTable(title=title, show_header=rng.random() < 0.7)
    columns = rng.randint(1, 6)
    for _ in range(columns):
        table.add_column(_text(rng, 2) or "h", justify=rng.choice(["left", "right"]))
    for _ in range(rng.randint(0, 4)):
        table.add_row(*(rng.choice([Data, str])(_text(rng)) for _ in range(columns)))
    return table


@pytest.mark.parametrize("seed", range(12))
def test_random_tables_print_as_rich_prints_them(seed):
    rng = random.Random(seed)
    for _ in range(25):
        table = _random_table(rng)
        _same(lambda r: r._print_table(table))


@pytest.mark.parametrize("seed", range(4))
def test_random_lines_print_as_rich_prints_them(seed):
    rng = random.Random(100 + seed)
    for _ in range(60):
        text = _text(rng, 6)
        style = rng.choice([None, "yellow", "bold red"])
        markup = style is not None and rng.random() < 0.5
        _same(lambda r: r._print(text, style=style, markup=markup))


def test_plain_tables_are_drawn_without_rich():
    """The drawing is really used for ordinary text (else the tests above held nothing),
    and left to rich for what it cannot draw as rich does."""
    table = PlainTable(title=Data("run 1 x — ok"), show_header=False)
    table.add_column("statistic")
    table.add_column("value", justify="right")
    table.add_row("p99", "2504 ns")
    assert table.plain_lines(PLAIN_WIDTH) == [
        "run 1 x — ok", "┌─────┬─────────┐", "│ p99 │ 2504 ns │", "└─────┴─────────┘"]
    table.add_row(Data("[bold]"), "ok")                   # data: no markup to render
    assert table.plain_lines(PLAIN_WIDTH) is not None
    for hard in ["[bold]", ":fire:", "中文", "a\x1bb", " pad", "w" * PLAIN_WIDTH]:
        other = PlainTable()
        other.add_column("h")
        other.add_row(hard)
        assert other.plain_lines(PLAIN_WIDTH) is None, hard


def _list_row(rng: random.Random, run_id: int) -> dict[str, Any]:
    return {"run_id": run_id, "name": rng.choice(["boot", "rt-kernel", _text(rng)]),
            "started_at": "2026-11-26T20:03:12.123456", "target": rng.choice(
                ["native", "guest", _text(rng, 1)]), "accel": rng.choice([None, "kvm", "tcg"]),
            "status": rng.choice(["ok", "failed", "running"]),
            "series": rng.choice([None, "s1", _text(rng, 1)]),
            "samples": rng.choice([0, 10_000, None]), "p99_ns": rng.choice([None, 2504, 1.5e6]),
            "max_ns": rng.choice([None, 4066, 3.2e7])}


@pytest.mark.parametrize("seed", range(6))
def test_run_lists_print_as_rich_prints_them(seed):
    rng = random.Random(200 + seed)
    rows = [_list_row(rng, i) for i in range(1, rng.randint(0, 5) + 1)]
    _same(lambda r: r.write(run_list_text({"type": "run_list", "rows": rows}, View())))


def _summary(rng: random.Random, name: str) -> dict[str, Any]:
    summary = make_summary(7, name, {
        "status": rng.choice(["ok", "failed"]), "accel": rng.choice(["kvm", "tcg"]),
        "emulated": rng.random() < 0.5, "samples": 10_000, "lost": 0, "min_ns": 395,
        "mean_ns": 1303.2, "p50_ns": 1246, "p99_ns": 2504, "max_ns": 4066,
        "period_ns": 1_000_000, "above_threshold": 3, "threshold_ns": 50_000,
        "message": rng.choice([None, "stopped: " + _text(rng)])})
    # Keys a run adds beside the catalog's (irqlab.measure).
    summary["self_check"] = rng.choice([None, {"text": "self-check " + _text(rng),
                                               "passed": rng.random() < 0.5}])
    summary["per_cpu"] = [{"cpu": 0, "samples": 5000, "min_ns": 395, "p50_ns": 1246,
                           "p99_ns": 2504, "max_ns": 4066, "above_threshold": 1}]
    return summary


@pytest.mark.parametrize("seed", range(6))
def test_run_details_print_as_rich_prints_them(seed):
    rng = random.Random(300 + seed)
    name = rng.choice(["boot", _text(rng)])
    detail = {"run": f"7 {name}", "status": "ok", "configuration":
              "\n  target: native  accel — (latency)\n  options: " + _text(rng, 8),
              "qemu command": "qemu-system-x86_64 " + "-device virtio " * 20}
    windows = [{"index": i, "start_s": float(i), "samples": 100, "mean_ns": 1000.5,
                "stddev_ns": 10, "min_ns": 900, "max_ns": rng.choice([1100, 2.5e6]),
                "above_threshold": 0} for i in range(rng.randint(0, 3))]
    model = {"type": "run_detail", "summary": _summary(random.Random(seed), name),
             "detail": detail, "windows": windows}
    out = _same(lambda r: r.write(run_detail_text(model, View())))
    assert "p99" in out
