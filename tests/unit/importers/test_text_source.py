"""Issue 47: imports read their input as a stream (irqlab/importers/base.py TextSource):
the lines are those of str.splitlines, whatever the chunking; a line longer than
MAX_LINE_BYTES is an error naming it; FIFOs and devices are refused, standard input is
read as `-`; a format that needs its whole text is bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from irqlab.importers import ImportFormatError, ParseOptions, parse_file
from irqlab.importers import base
from irqlab.importers.base import MAX_LINE_BYTES, TextSource

D = Path(__file__).parents[2] / "fixtures" / "import"


@pytest.mark.parametrize("text", [
    "a\nb\r\nc\rd\x0ce\u2028f\n\n", "no end", "", "\n", "é\xff\n" * 3, "x\r", "\r\n"])
def test_lines_are_those_of_splitlines_across_chunks(tmp_path, monkeypatch, text):
    path = tmp_path / "t.txt"
    path.write_bytes(text.encode("utf-8", "surrogateescape")
                     if "\xff" not in text else text.encode("latin-1"))
    expected = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    for chunk in (1, 2, 3, 1 << 20):
        monkeypatch.setattr(base, "_CHUNK_BYTES", chunk)
        monkeypatch.setattr(base, "MAX_LINE_BYTES", max(chunk, 64))
        with TextSource(path) as source:
            got = list(source.numbered_lines())
        assert [t for _n, t in got] == expected
        assert [n for n, _t in got] == list(range(1, len(expected) + 1))


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_line_longer_than_the_bound_names_its_number(tmp_path, where):
    long = b"T" * (MAX_LINE_BYTES + 10)
    lines = {"first": [long, b"ok", b"ok"], "middle": [b"ok", b"ok", long, b"ok"],
             "last": [b"ok", b"ok", b"ok", long]}[where]
    path = tmp_path / "long.txt"
    path.write_bytes(b"\n".join(lines))
    number = lines.index(long) + 1
    with pytest.raises(ImportFormatError, match=f"long.txt:{number}: expected lines of "
                                                f"at most"):
        parse_file("cyclictest", path, ParseOptions())
    with pytest.raises(ImportFormatError, match=f"long.txt:{number}: expected lines of"):
        from irqlab.importers.tscdeadline import stream_tscdeadline
        run = stream_tscdeadline(path, ParseOptions(tick_hz=1000)).runs[0]
        for _batch in run.samples.batches():
            pass


def test_fifos_and_devices_are_refused_and_never_waited_for(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(ImportFormatError, match="pipe it in as - "):
            TextSource(path)


def test_a_whole_text_format_is_bounded(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b"{" + b" " * 2000)
    with TextSource(path) as source, pytest.raises(ImportFormatError,
                                                   match="at most 1,000 bytes"):
        source.whole(1000)


@pytest.mark.slow
def test_standard_input_is_read_as_a_stream(tmp_path):
    """`irqlab import auto -` sniffs the head it read and replays it: the whole log."""
    fixture = D / "cyclictest_h.txt"
    db = tmp_path / "x.duckdb"
    cmd = [sys.executable, "-m", "irqlab.cli.main", "import", "auto", "-", "--name", "piped",
           "--json", "--db", str(db)]
    with open(fixture, "rb") as f:
        piped = subprocess.run(cmd, stdin=f, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    direct = subprocess.run([*cmd[:5], str(fixture), *cmd[6:]], capture_output=True,
                            text=True, timeout=120)
    assert direct.returncode == 0, direct.stderr
    a, b = (json.loads(x) for x in (piped.stdout.splitlines()[0],
                                    direct.stdout.splitlines()[0]))
    assert a["format"] == b["format"] == "cyclictest"
    assert [r["samples"] for r in a["runs"]] == [r["samples"] for r in b["runs"]]
    assert [r["series"] for r in a["runs"]] == [r["series"] for r in b["runs"]]
