"""CLI contract: durations, bad arguments exit 2 with the reason and the fix."""

import subprocess
import sys

import pytest

from irqlab.durations import parse_duration_ns
from irqlab.cli.main import main


@pytest.mark.parametrize("text,ns", [("1ms", 1_000_000), ("30us", 30_000), ("10s", 10**10),
                                     ("2m", 120 * 10**9), ("250ns", 250),
                                     ("0.5ms", 500_000), ("1.5us", 1500), ("0", 0), ("0us", 0)])
def test_durations(text, ns):
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize("text", ["1", "ms", "1 h", "-1ms", "1.0000000001s"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration_ns(text)


def _run(args, tmp_path):
    return subprocess.run([sys.executable, "-m", "irqlab.cli.main", *args,
                           "--db", str(tmp_path / "t.duckdb")],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args,needle", [
    (["run", "--period", "1"], "not a duration"),
    (["run", "--period", "500ns"], "below 1us"),
    (["run", "--accel", "xen"], "invalid choice"),
    (["run", "--inject-irqoff", "2ms"], "go together"),
    (["run", "--icount", "--accel", "kvm"], "needs TCG"),
    (["run", "--duration", "1s", "--samples", "5"], "not allowed with"),
    (["run", "--window", "100us", "--period", "1ms"], "at least one period"),
    (["run", "--inject-irqoff", "5ms", "--inject-every", "2", "--period", "1ms"],
     "shorter than"),
    (["run", "--probe", "/nonexistent"], "make -C probes/guest"),
    (["run", "--target", "xen", "--arch", "x86_64", "--xen-domain", "domU"],
     "PVH dom0 only"),
    (["run", "--target", "xen", "--arch", "x86_64", "--accel", "kvm"], "TCG only"),
    (["show", "42"], "irqlab run"),
])
def test_bad_arguments_exit_2_with_one_line(args, needle, tmp_path):
    res = _run(args, tmp_path)
    assert res.returncode == 2, res
    assert needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert res.stdout == ""


def test_list_on_missing_database_says_so_like_show(tmp_path, capsys):
    # Issue 20: `list --db MISSING` no longer prints an empty table with exit 0.
    assert main(["list", "--json", "--db", str(tmp_path / "none.duckdb")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("irqlab list: error: no database at")
