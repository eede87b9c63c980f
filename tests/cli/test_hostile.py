"""A catalogue of hostile command-line inputs (issue 20, item 7): each one exits 2 with one
line on stderr, or gives a correct result; none gives a traceback or an internal error,
and human output never carries a raw control character. In-process (irqlab.cli.main)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import signal
import sqlite3
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from irqlab.cli.main import main
from irqlab.store.interface import NewRun

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
        if opt == "--duration" and val == "1.5":
            continue        # a bare number is a run length in seconds (as cyclictest -D)
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
# Hostile configuration and files (issue 30): (label, argv, text the one line must hold,
# naming the problem). {tmp}/... files are made by the `env` fixture.
BOARD_LOG = str(Path(__file__).parents[1] / "fixtures" / "xen" / "arm64-board-console.log")
NAMED_CASES: list[tuple[str, list[str], str]] = [
    # Issue 47: arguments that are not UTF-8 (Python hands them over as lone surrogates),
    # resample and benchmark sizes out of range; issue 42: a board's xentrace file.
    ("run --name not UTF-8", ["run", "--name", "\udcff\udcfe"], "is not UTF-8 text"),
    ("run --tag not UTF-8", ["run", "--tag", "k=\udcff"], "argument 3"),
    ("show not UTF-8", ["show", "\udcff"], "is not UTF-8 text"),
    ("tag not UTF-8", ["tag", "1", "\udcffk=v"], "is not UTF-8 text"),
    ("compare --resamples 10^12", ["compare", "1", "2", "--resamples", "1000000000000"],
     "use 1-100,000"),
    ("compare --resamples 0", ["compare", "1", "2", "--resamples", "0"], "use 1-100,000"),
    ("bench --stats-samples 0", ["bench", "--stats-samples", "0", "stats"],
     "a benchmark needs something"),
    ("bench --lab-samples 0", ["bench", "--lab-samples", "0", "push"],
     "a benchmark needs something"),
    ("import --xentrace random bytes",
     ["import", "irqlab-console", BOARD_LOG, "--xentrace", "{tmp}/random1m.bin"],
     "is not a xentrace file"),
    ("import --xentrace zeros",
     ["import", "irqlab-console", BOARD_LOG, "--xentrace", "{tmp}/zeros.bin"],
     "is not a xentrace file"),
    ("import --xentrace gzip bomb",
     ["import", "irqlab-console", BOARD_LOG, "--xentrace", "{tmp}/bomb.gz"],
     "decompression bomb"),
    ("import auto /dev/zero", ["import", "auto", "/dev/zero"], "expected a regular file"),
    ("import cyclictest /dev/zero", ["import", "cyclictest", "/dev/zero"],
     "expected a regular file"),
    ("import tscdeadline a FIFO", ["import", "tscdeadline", "{tmp}/fifo"],
     "expected a regular file"),
    ("import auto a FIFO", ["import", "auto", "{tmp}/fifo"], "expected a regular file"),
    ("import --xentrace a FIFO",
     ["import", "irqlab-console", BOARD_LOG, "--xentrace", "{tmp}/fifo"],
     "not a regular file"),
    # Scenarios: counted before anything is built; regular UTF-8 files of bounded depth.
    ("matrix 10^12 cells", ["matrix", "{tmp}/cells_1e12.toml"], "1,000,000,000,000 cells"),
    ("matrix 10^6 valid cells", ["matrix", "{tmp}/cells_1e6.toml"], "1,000,000 cells"),
    ("matrix 10^6 cells, --max-cells below",
     ["matrix", "{tmp}/cells_1e6.toml", "--max-cells", "999999"], "--max-cells 1000000"),
    ("matrix --max-cells 0", ["matrix", "{tmp}/cells_1e6.toml", "--max-cells", "0"],
     "--max-cells"),
    ("matrix --max-cells x", ["matrix", "{tmp}/cells_1e6.toml", "--max-cells", "x"],
     "--max-cells"),
    ("matrix TOML nested 5000 deep", ["matrix", "{tmp}/deep5000.toml"], "nested too deeply"),
    ("matrix TOML nested 100 deep", ["matrix", "{tmp}/deep100.toml"], "nested more than 64"),
    ("matrix not UTF-8", ["matrix", "{tmp}/latin1.toml"], "not UTF-8"),
    ("matrix FIFO", ["matrix", "{tmp}/fifo"], "is a FIFO"),
    ("matrix directory", ["matrix", "{tmp}"], "is a directory"),
    ("matrix /dev/zero", ["matrix", "/dev/zero"], "is a device"),
    ("matrix 2 MiB file", ["matrix", "{tmp}/big.toml"], "larger than"),
    # xentrace: the clock rate, the file kind, bombs and garbage.
    ("xentrace random bytes", ["xentrace", "{tmp}/random1m.bin", "--tsc-hz", "2e9"],
     "no Xen trace class"),
    ("xentrace random bytes --json",
     ["xentrace", "{tmp}/random1m.bin", "--tsc-hz", "2e9", "--json"], "no Xen trace class"),
    ("xentrace gzip bomb", ["xentrace", "{tmp}/bomb.gz", "--tsc-hz", "2e9"],
     "decompression bomb"),
    ("xentrace zeros", ["xentrace", "{tmp}/zeros.bin", "--tsc-hz", "2e9"],
     "no Xen trace class"),
    ("xentrace header tsc_hz inf", ["xentrace", "{tmp}/hdr_inf.xentrace.gz"], "tsc_hz"),
    ("xentrace header tsc_hz -1", ["xentrace", "{tmp}/hdr_neg.xentrace.gz"], "tsc_hz"),
    ("xentrace header not an object", ["xentrace", "{tmp}/hdr_list.xentrace.gz"],
     "not a JSON object"),
    ("xentrace header of 4 GiB", ["xentrace", "{tmp}/hdr_huge.xentrace.gz"],
     "capture header claims"),
    ("xentrace FIFO", ["xentrace", "{tmp}/fifo", "--tsc-hz", "2e9"], "not a regular file"),
    ("xentrace directory", ["xentrace", "{tmp}", "--tsc-hz", "2e9"], "not a regular file"),
    ("xentrace /dev/zero", ["xentrace", "/dev/zero", "--tsc-hz", "2e9"],
     "not a regular file"),
    ("xentrace backwards cycles", ["xentrace", "{tmp}/backwards.xt", "--tsc-hz", "2e9"],
     "cycle counts go back"),
] + [(f"xentrace --tsc-hz {hz}", ["xentrace", "{tmp}/random1m.bin", "--tsc-hz", hz],
      "--tsc-hz") for hz in ("1e400", "inf", "-inf", "nan", "0", "-1", "1e30", "0.5")] + [
    # Serial targets: a port that is no tty is refused before the run starts.
    ("serial /dev/null", ["run", "--target", "serial", "--serial-port", "/dev/null"],
     "class mem"),
    ("serial /dev/zero", ["run", "--target", "serial", "--serial-port", "/dev/zero"],
     "class mem"),
    ("serial regular file", ["run", "--target", "serial", "--serial-port",
                             "{tmp}/random.bin"], "a regular file"),
    ("serial directory", ["run", "--target", "serial", "--serial-port", "{tmp}"],
     "a directory"),
    ("serial FIFO", ["run", "--target", "serial", "--serial-port", "{tmp}/fifo"],
     "not a serial port"),
    # Damaged sample files of a run kept in Parquet (run 1 truncated, run 2 corrupt
    # inside, run 3 its footer corrupt): user's files, not irqlab's bugs.
] + [(f"{cmd[0]} run {run} damaged samples", [*cmd, "--db", "{tmp}/files.duckdb"],
      "samples file is damaged")
     for run, what in (("1", "truncated"), ("2", "inside"), ("3", "footer"))
     for cmd in (["check", run, "--max", "1ms"], ["compare", run],
                 ["export", run, "--parquet", "{tmp}/export-" + run],
                 ["report", run, "-o", "{tmp}/r.html"])] + [
    ("export --parquet /proc/self/x", ["export", "1", "--parquet", "/proc/self/x"],
     "cannot create a directory there"),
    ("export --parquet /sys/x", ["export", "1", "--parquet", "/sys/x"],
     "cannot create a directory there"),
    # PostgreSQL URLs libpq cannot parse.
    ("list --db postgresql://[::1", ["list", "--db", "postgresql://[::1"], "[::1"),
    ("list --db bad percent", ["list", "--db", "postgresql://%zz@[::1]/x"], "%zz"),
    ("show --db bad port", ["show", "1", "--db", "postgresql://[::1]:99999/x"], "99999"),
]
if importlib.util.find_spec("labgrid") is not None:     # else "labgrid is not installed"
    NAMED_CASES += [
        (f"labgrid --lg-env {label}", ["run", "--target", "labgrid", "--lg-env", path],
         text) for label, path, text in (
            ("alias bomb", "{tmp}/bomb.yaml", "alias bomb"),
            ("alias bomb under targets", "{tmp}/bomb_targets.yaml", "alias bomb"),
            ("flow nested 10000 deep", "{tmp}/deep10000.yaml", "nesting depth"),
            ("block nested 100 deep", "{tmp}/deep100.yaml", "nested more than 64"),
            ("not UTF-8", "{tmp}/latin1.toml", "not UTF-8"),
            ("FIFO", "{tmp}/fifo", "not a regular file"),
            ("directory", "{tmp}", "not a regular file"),
            ("/dev/zero", "/dev/zero", "not a regular file"))]

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
    _hostile_config_files(tmp)
    return tmp


def _hostile_config_files(tmp: Path) -> None:
    """The files NAMED_CASES read: scenarios, xentrace files, YAML, a damaged store."""
    nums = ", ".join(str(i) for i in range(1, 101))
    (tmp / "cells_1e12.toml").write_text(
        'name = "big"\n[matrix]\n' + "".join(
            f"{k} = [{', '.join(str(i) for i in range(1, 1001))}]\n"
            for k in ("samples", "warmup", "priority", "inject_every")))
    (tmp / "cells_1e6.toml").write_text(
        f'name = "valid"\n[matrix]\nsamples = [{nums}]\nwarmup = [{nums}]\n'
        f'threshold = [{", ".join(f"{chr(34)}{i}us{chr(34)}" for i in range(1, 101))}]\n')
    (tmp / "deep5000.toml").write_text('name = "x"\n[run]\nload = ' + "[" * 5000
                                       + "]" * 5000 + "\n")
    (tmp / "deep100.toml").write_text('name = "x"\n[run]\nload = ' + "[" * 100
                                      + "]" * 100 + "\n")
    (tmp / "latin1.toml").write_bytes(b'name = "caf\xe9"\n')
    (tmp / "big.toml").write_text("# " + "x" * (2 << 20) + "\n")
    os.mkfifo(tmp / "fifo")
    # xentrace: 1 MB of random bytes, zeros, a gzip bomb (100 MiB of zeros in ~100 KB),
    # capture archives with hostile headers, records whose cycles run backwards.
    (tmp / "random1m.bin").write_bytes(np.random.default_rng(30).bytes(1 << 20))
    (tmp / "zeros.bin").write_bytes(bytes(1 << 16))
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)          # 31: a gzip stream
    with open(tmp / "bomb.gz", "wb") as f:
        zeros = bytes(1 << 20)
        for _ in range(100):
            f.write(comp.compress(zeros))
        f.write(comp.flush())
    from irqlab.xen.records import TRC_SCHED_SWITCH, encode_record, encode_window
    recs = b"".join(encode_record(TRC_SCHED_SWITCH, (1, 2), tsc=10**9 - i * 1000)
                    for i in range(200))
    body = encode_window(0, recs)
    (tmp / "backwards.xt").write_bytes(body)
    for name, header, n in (("hdr_inf", b'{"tsc_hz": "inf"}', None),
                            ("hdr_neg", b'{"tsc_hz": -1}', None),
                            ("hdr_list", b"[1, 2]", None),
                            ("hdr_huge", b'{"tsc_hz": 2e9}', 0xFFFFFFF0)):
        (tmp / f"{name}.xentrace.gz").write_bytes(gzip.compress(
            b"IRQLXTR1\n" + struct.pack("<I", len(header) if n is None else n) + header
            + body))
    # labgrid environment files
    laughs = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        laughs.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]")
    (tmp / "bomb.yaml").write_text("\n".join(laughs) + "\ntargets: [*i, *i]\n")
    (tmp / "bomb_targets.yaml").write_text(
        "\n".join(laughs[:7]) + "\ntargets:\n  main:\n    resources: {x: *g}\n")
    (tmp / "deep10000.yaml").write_text("targets:\n  main: " + "[" * 10000 + "]" * 10000)
    (tmp / "deep100.yaml").write_text("targets:\n  main:\n" + "".join(
        "  " * (i + 2) + "k:\n" for i in range(100)))
    _damaged_sample_files(tmp / "files.duckdb")


def _damaged_sample_files(db: Path) -> None:
    """A store with three runs kept in sample files, each file then damaged: run 1
    truncated, run 2 corrupt inside its pages, run 3 in its footer."""
    from irqlab.samples.record import RECORD_DTYPE
    from irqlab.store import Store
    from irqlab.store.sample_files import run_dir

    rec = np.zeros(5000, RECORD_DTYPE)
    rec["seq"] = np.arange(5000)
    rec["deadline_tick"] = rec["seq"] * 1000
    rec["entry_tick"] = rec["deadline_tick"] + 700
    with Store(db) as st:
        for name in ("truncated", "inside", "footer"):
            rid = st.create_run(NewRun(name, "guest", {}, {}))
            assert st.keep_samples_in_files(rid)
            with st.transaction():
                st.add_samples(rid, rec)
            st.finish_run(rid, "ok", {"samples": len(rec)})
    for rid, how in ((1, "truncated"), (2, "inside"), (3, "footer")):
        (path,) = run_dir(db, rid).glob("*.parquet")
        data = bytearray(path.read_bytes())
        if how == "truncated":
            data = data[:300]
        else:
            lo, hi = (100, len(data) - 200) if how == "inside" else (len(data) - 300,
                                                                       len(data) - 8)
            for i in range(lo, hi, 1 if how == "footer" else 7):
                data[i] ^= 0x5A
        path.write_bytes(bytes(data))


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
    assert len(NAMED_CASES) >= 55


class _Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


@pytest.mark.parametrize("label,argv,text", NAMED_CASES, ids=[c[0] for c in NAMED_CASES])
def test_hostile_configuration_is_one_line_naming_it(env, capsys, label, argv, text):
    """Exit 2, one line on stderr naming the problem, no traceback, no internal error;
    a case still running after 60 s (they take well under a second) is a hang: the
    alarm stops it so the catalogue reports it instead of hanging."""
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(60)
    try:
        code, out, err = _call(_argv(argv, env), capsys)
    except _Hang:
        pytest.fail(f"{label}: still running after 60 s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == 2, (code, err)
    assert len(err.strip().splitlines()) == 1, err
    assert text in err, err
    assert out == "", out


@pytest.mark.parametrize("argv", [["manpage"], ["completion", "bash"], ["list"]])
def test_output_to_a_full_device_is_one_line(env, capsys, monkeypatch, argv):
    """`irqlab manpage > /dev/full`: ENOSPC on stdout is the host's state, not a bug."""
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        code, _out, err = _call(_argv(argv, env), capsys)
    assert code == 2, err
    assert "internal error" not in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "No space left on device" in err


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
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "show", EVIL_NAME,
                          "--json", "--db", str(env / "irqlab.duckdb")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[0])["name"] == EVIL_NAME
