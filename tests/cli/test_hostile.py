"""A catalogue of hostile command-line inputs (issue 20, item 7): each one exits 2 with one
line on stderr, or gives a correct result; none gives a traceback or an internal error,
and human output never carries a raw control character. In-process (irqlab.cli.main)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from irqlab.cli.main import main

D = Path(__file__).parents[1] / "fixtures" / "import"
EVIL_NAME = "evil\x1b]0;pwned\x07\x1b[2J[/]\x9b31m\u202e"

_BAD_DURATIONS = ["99999999999m", "527041m", "-1ms", "1x", "", "1e3ms", "nan", "inf",
                  "١ms", "²s", "0.0000000001ns", "9" * 5000 + "s", "1.5", "ms", "1 ms ms",
                  "0x10ms", "1_000us"]
_DURATION_OPTS = ["--period", "--duration", "--window", "--threshold", "--boot-timeout",
                  "--stall-timeout", "--inject-irqoff"]
_BAD_COUNTS = ["99999999999999999999999", "-1", "1e3", "١", "²", "x", "", "1_000",
               "9" * 5000, "0x10", "1.0"]
_COUNT_OPTS = ["--samples", "--warmup", "--inject-every", "--memory", "--priority"]

CASES: list[tuple[str, list[str]]] = []
for opt in _DURATION_OPTS:
    for val in _BAD_DURATIONS:
        CASES.append((f"run {opt} {val[:12]!r}", ["run", opt, val]))
for opt in _COUNT_OPTS:
    for val in _BAD_COUNTS:
        CASES.append((f"run {opt} {val[:12]!r}", ["run", opt, val]))
CASES += [(f"run {' '.join(a)}", ["run", *a]) for a in [
    ["--boot-timeout", "0"], ["--stall-timeout", "0"], ["--period", "0"],
    ["--samples", "0"], ["--window", "1us"], ["--duration", "1us"],
    ["--memory", "7"], ["--memory", "1048576"], ["--target", "nope"], ["--target", ""],
    ["--target", "native", "--idle", "poll"], ["--accel", "kvm", "--icount"],
    ["--inject-irqoff", "2ms"], ["--inject-every", "100"],
    ["--inject-irqoff", "2ms", "--inject-every", "1"], ["--cpus", "1-0"],
    ["--cpus", "99999999999999999999"], ["--cpus", "x"], ["--knob", "nope=1"],
    ["--load", "nope"], ["--arch", "mips"], ["--gic", "9"], ["--timer", "x"],
    ["--period", "1ns"], ["--priority", "0", "--target", "native"],
    ["--xen-opt", "=", "--target", "xen"],
]]
REFS = ["²", "١", "0", "-1", "99999999999999999999999", "", " ", "\x1b[2J", "tag:",
        "suite:", "tag:x", "tag:=", "' OR 1=1 --", "%", "*", "../../etc/passwd",
        "9" * 5000, "1.0", "0x1", "１"]
for ref in REFS:
    CASES.append((f"show {ref[:12]!r}", ["show", ref]))
    CASES.append((f"compare {ref[:12]!r}", ["compare", ref]))
for ref in REFS[:8]:
    CASES.append((f"check {ref[:12]!r}", ["check", ref, "--max", "1ms"]))
    CASES.append((f"explain {ref[:12]!r}", ["explain", ref]))
    CASES.append((f"report {ref[:12]!r}", ["report", ref, "-o", "{tmp}/r.html"]))
CASES += [(f"import {' '.join(a)[:40]}", ["import", *a]) for a in [
    ["nope", "{tmp}/x"], ["tbm", "{tmp}/missing.txt"], ["tbm", "{tmp}"],
    ["auto", "{tmp}/random.bin"], ["tbm", "{tmp}/random.bin"],
    ["tscdeadline", str(D / "tscdeadline_latency.txt")],
    ["tscdeadline", str(D / "tscdeadline_latency.txt"), "--tick-hz", "1e30"],
    ["tscdeadline", str(D / "tscdeadline_latency.txt"), "--tick-hz", "0"],
    ["tscdeadline", str(D / "tscdeadline_latency.txt"), "--tick-hz", "1" + "0" * 30],
    ["tscdeadline", str(D / "tscdeadline_latency.txt"), "--tick-hz", "١٠"],
    ["rt-eval", str(D / "rt_eval_zephyr.txt"), "--window-samples", "9" * 30],
    ["tbm", str(D / "tbm_live.txt"), "--tag", "novalue"],
    ["tbm", str(D / "tbm_live.txt"), "--tag", "=x"],
    ["cyclictest", "{tmp}/huge_avg.txt"], ["rt-eval", "{tmp}/huge_ns.txt"],
]]
CASES += [
    ("report no output", ["report", "1"]),
    ("report -o dir", ["report", "1", "-o", "{tmp}"]),
    ("report --png file", ["report", "1", "--png", "{tmp}/random.bin"]),
    ("list --db missing", ["list", "--db", "{tmp}/missing.duckdb"]),
    ("show --db missing", ["show", "1", "--db", "{tmp}/missing.duckdb"]),
    ("list --db dir", ["list", "--db", "{tmp}"]),
    ("list --db sqlite", ["list", "--db", "{tmp}/s.db"]),
    ("list --db random", ["list", "--db", "{tmp}/random.bin"]),
    ("show --db sqlite", ["show", "1", "--db", "{tmp}/s.db"]),
    ("import --db random", ["import", "tbm", str(D / "tbm_live.txt"),
                            "--db", "{tmp}/random.bin"]),
    ("check no limit", ["check", "1"]),
    ("check --max bad", ["check", "1", "--max", "99999999999m"]),
    ("check --above-threshold bad", ["check", "1", "--max", "1ms",
                                     "--above-threshold", "9" * 30]),
    ("compare --threshold bad", ["compare", "1", "--threshold", "-1ms"]),
    ("explain --top huge", ["explain", "1", "--top", "9" * 30]),
    ("unknown command", ["frobnicate"]),
    ("no command", []),
    ("bench --rounds huge", ["bench", "--rounds", "9" * 30]),
]
# Correct results (exit 0): escaped names, a name that looks like markup.
OK_CASES = [
    ("list with an evil name", ["list"]),
    ("show the evil name", ["show", EVIL_NAME]),
    ("show 1", ["show", "1"]),
    ("compare evil", ["compare", "1", "2"]),
    ("show the markup name", ["show", "[bold]x[/]"]),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile")
    db = tmp / "irqlab.duckdb"
    assert main(["import", "tbm", str(D / "tbm_live.txt"), "--name", EVIL_NAME,
                 "--db", str(db)]) == 0
    assert main(["import", "tbm", str(D / "tbm_live.txt"), "--name", "[bold]x[/]",
                 "--db", str(db)]) == 0
    (tmp / "random.bin").write_bytes(os.urandom(4096))
    con = sqlite3.connect(tmp / "s.db")
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    (tmp / "huge_avg.txt").write_text("T: 0 (22465) P: 0 I:1000 C:   2987 Min:     17 "
                                      "Act:   65 Avg:   " + "9" * 400 + " Max:    3768\n")
    (tmp / "huge_ns.txt").write_text(
        "Counter freq is 33280000 Hz. Period is 30 ns\nMean: 600 (" + "9" * 400
        + " ns) stddev: 3737 (112110 ns) above thr: 0% [265 (7950 ns) - 66955 (2008650 "
        "ns)] global [265 (7950 ns) 66955 (2008650 ns)]\n")
    return tmp


def _argv(argv: list[str], tmp: Path) -> list[str]:
    out = [a.replace("{tmp}", str(tmp)) for a in argv]
    if out and out[0] in ("run", "show", "compare", "check", "explain", "report", "list",
                          "import") and "--db" not in out:
        out += ["--db", str(tmp / "irqlab.duckdb")]
    return out


def _call(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:            # argparse: usage errors exit 2 from the parser
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err


def test_catalogue_is_large_enough():
    assert len(CASES) + len(OK_CASES) >= 150


@pytest.mark.parametrize("label,argv", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_exits_2_with_one_line(env, capsys, label, argv):
    code, out, err = _call(_argv(argv, env), capsys)
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "\x1b" not in err and "\x07" not in err


@pytest.mark.parametrize("label,argv", OK_CASES, ids=[c[0] for c in OK_CASES])
def test_hostile_data_gives_a_correct_result(env, capfd, label, argv):
    # capfd: the JSON renderer writes to the stdout it was created with.
    code, out, err = _call(_argv(argv, env), capfd)
    assert code == 0, err
    assert "Traceback" not in err
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    if label != "show 1":
        assert "evil\\x1b]0;pwned" in out or "[bold]x[/]" in out


def test_json_output_keeps_the_exact_name(env):
    # A subprocess: the JSON renderer writes to the process's own stdout.
    import json
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "show", EVIL_NAME,
                          "--json", "--db", str(env / "irqlab.duckdb")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[0])["name"] == EVIL_NAME
