"""Issue 47: a huge matrix plan streams (its count and first cells at once, nothing
materialised), and hostile matrix options are one line, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import call_argv

# Nothing host-wide: every matrix here is a dry run or refused ("native" is the
# scenario's target text; the word alone had put it in the host group).
XDIST_GROUP = ""


def _scenario(tmp_path, run: str = "") -> str:
    def values(fmt: str) -> str:
        return "[" + ", ".join(fmt.format(100 + i) for i in range(1000)) + "]"
    path = tmp_path / "huge.toml"
    path.write_text(f'name = "huge"\n[run]\ntarget = "native"\nduration = "1s"\n{run}'
                    f'[matrix]\nperiod = {values(chr(34) + "{}us" + chr(34))}\n'
                    f'warmup = {values("{}")}\nthreshold = {values(chr(34) + "{}us" + chr(34))}\n'
                    f'window = {values(chr(34) + "{}ms" + chr(34))}\n')
    return str(path)


def test_a_dry_run_of_a_trillion_cells_prints_its_count_and_first_cells(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "matrix",
                             _scenario(tmp_path), "--dry-run", "--max-cells",
                             str(10**12)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        head = [proc.stdout.readline() for _ in range(4)]
    finally:
        proc.kill()
        proc.communicate()
    assert head[0].startswith("huge: 1,000,000,000,000 cells")
    assert head[1].startswith("CELL")
    assert head[2].startswith("period=100us,warmup=100,threshold=100us,window=100ms ")
    assert head[3].startswith("period=100us,warmup=100,threshold=100us,window=101ms ")


@pytest.mark.parametrize("extra,words", [
    (["--only", "zzz"], "matches none of the 1,000,000,000,000 cells"),
    (["--max-cells", "0"], "argument --max-cells: '0' is out of range: use 1-"),
    (["--parallel", "0"], "argument --parallel: '0' is out of range: use 1-"),
    (["--set", "duration=-5s"], "'-5s' is not a duration"),
    (["--set", "duration=" + "9" * 100_000 + "s"], "a value of 100,001 characters"),
])
def test_hostile_matrix_options_are_one_line(tmp_path, extra, words):
    res = call_argv(["matrix", _scenario(tmp_path), "--dry-run", "--max-cells",
                     str(10**12), *extra])
    assert res.returncode == 2, res.stderr
    assert words in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "internal error" not in res.stderr


def test_a_run_clash_over_a_big_matrix_is_one_line(tmp_path):
    res = call_argv(["matrix", _scenario(tmp_path, run="samples = 1000\n"), "--dry-run",
                     "--max-cells", str(10**12)])
    assert res.returncode == 2 and "internal error" not in res.stderr, res.stderr
    assert "cell period=100us,warmup=100,threshold=100us,window=100ms: argument --samples: " \
           "not allowed with argument -D/--duration" in res.stderr
