"""CLI contract: durations, bad arguments exit 2 with the reason and the fix."""

import pytest

from irqlab.durations import parse_duration_ns
from irqlab.cli.main import main
from tests.conftest import call_argv


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
    # In this interpreter: refused before anything starts, so nothing of a process's own
    # is checked here (tests/cli/test_hostile.py runs children).
    return call_argv([*args, "--db", str(tmp_path / "t.duckdb")])


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


# Issue 32: a run's length takes a bare number as seconds (cyclictest -D 5); a period
# or latency does not (cyclictest's -i is us, so a bare number there is ambiguous).
@pytest.mark.parametrize("text,ns", [("5", 5 * 10**9), ("0.5", 5 * 10**8), ("5s", 5 * 10**9),
                                     ("250ms", 250 * 10**6)])
def test_run_length_bare_number_is_seconds(text, ns):
    from irqlab.argtypes import run_length
    assert run_length(text) == ns


def test_short_options_of_run_parse_as_the_long_ones():
    from irqlab.cli.main import build_parser
    args = build_parser(only="run", every=False).parse_args(
        ["run", "-D", "5", "-i", "1ms", "-p", "80", "-q", "-n", "x"])
    assert (args.duration, args.period, args.priority, args.quiet, args.name) == \
        (5 * 10**9, 10**6, 80, True, "x")


def test_run_short_options_are_exactly_the_daily_ones():
    # A new short option must not shadow one of these (argparse would refuse a clash,
    # but not a confusing letter): the set is the documented one.
    from irqlab.cli.main import build_parser
    run = build_parser(only="run", every=False)._subparsers._group_actions[0].choices["run"]
    shorts = {s for s in run._option_string_actions if not s.startswith("--")}
    assert shorts == {"-h", "-D", "-i", "-n", "-p", "-q"}


@pytest.mark.parametrize("args,needle", [
    (["run", "--duratoin", "5s"], "unrecognized arguments: --duratoin 5s; did you mean "
                                  "--duration? (see `irqlab run --help`)"),
    (["lsit"], "did you mean list?"),
    (["run", "--accel", "kmv"], "did you mean kvm?"),
    (["compare", "--threshhold=5us", "1", "2"], "did you mean --threshold?"),
    (["run", "-i", "1000"], "a period needs a unit, e.g. 1000us (cyclictest's -i 1000)"),
    (["run", "--threshold", "30"], "only --duration (-D) takes a bare number"),
])
def test_typos_and_bare_numbers_exit_2_with_one_line(args, needle, tmp_path):
    res = _run(args, tmp_path)
    assert res.returncode == 2, res
    assert needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert res.stdout == ""
