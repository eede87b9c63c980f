"""The human renderer skips rich's emoji replacement only where it could not change the
text (issue 28: the replacement imports a table of 3,600 emoji on every `list`/`show`)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from rich.console import Console
from rich.table import Table

from irqlab.cli.output.screen import _NOT_AN_EMOJI, Screen, may_name_an_emoji

TEXTS = ["started: 2026-11-26T20:03:12.123", "fe80::1 and ::", "run :fire: here",
         "[bold]:smile:[/] markup", "drive=x:a:b", ":100: and :1234:", ":03-text: :+1:",
         "no code", "12:34", ":Smile:", "[series 3] 20:03:12", ":thumbs_up-emoji:"]


def test_no_emoji_is_named_as_the_skipped_codes():
    """The skip rule's premise: no emoji name is empty or one or two digits (fails when a
    rich release adds such a name: the rule must then change)."""
    from rich._emoji_codes import EMOJI

    assert not [name for name in EMOJI if re.fullmatch(_NOT_AN_EMOJI, name)]


def _rendered(console: Console, text: str) -> str:
    table = Table()
    table.add_column(text)
    table.add_row(text)
    console.print(text)
    console.print(text, markup=False)
    console.print(table)
    return console.file.getvalue()


@pytest.mark.parametrize("text", TEXTS)
def test_the_renderer_s_console_prints_as_rich_s(text):
    ours = Screen().console.__class__(file=io.StringIO(), width=60,
                                      highlight=False)
    plain = Console(file=io.StringIO(), width=60, highlight=False)
    assert _rendered(ours, text) == _rendered(plain, text)


def test_codes_that_may_be_emoji_are_seen():
    assert may_name_an_emoji("a :fire: b") and may_name_an_emoji(":a:")
    assert may_name_an_emoji(":100:") and may_name_an_emoji(":thumbs_up-emoji:")
    assert not may_name_an_emoji("2026-11-26T20:03:12") and not may_name_an_emoji("::1")


def test_a_human_table_of_plain_text_does_not_load_the_emoji_table():
    code = ("import sys\nfrom irqlab.cli.output import exporter_for, show\n"
            "from irqlab.cli.output.screen import Screen\n"
            "show({'type': 'run_list', 'rows': []}, exporter_for('text'))\n"
            "Screen().console.print('20:03:12 ok')\n"
            "print('rich._emoji_codes' in sys.modules, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "False"
