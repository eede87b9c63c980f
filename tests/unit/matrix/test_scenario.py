"""Scenario files: cells, run arguments, and errors that name the line and the key."""

from __future__ import annotations

import pytest

from irqlab.cli.scenario import ScenarioError, cell_id, load_scenario
from tests.conftest import run_cli

GOOD = """\
name = "wfi-vs-poll"        # seed 002
[run]
target = "guest"
period = "1ms"
duration = "30s"
icount = true
accel = "tcg"
[matrix]
idle = ["hlt", "poll"]
load = ["none", "cpu:cpus=1"]
"""


def _write(tmp_path, text: str):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_cross_product_and_argv(tmp_path):
    scn = load_scenario(_write(tmp_path, GOOD))
    cells = scn.cells()
    assert [cell_id(c) for c in cells] == ["idle=hlt,load=none", "idle=hlt,load=cpu:cpus=1",
                                           "idle=poll,load=none",
                                           "idle=poll,load=cpu:cpus=1"]
    assert scn.argv(cells[3])[-4:] == ["--idle", "poll", "--load", "cpu:cpus=1"]
    assert "--icount" in scn.argv(cells[0])


@pytest.mark.parametrize("bad, line, key, words", [
    (GOOD.replace('period = "1ms"', 'period = "1xs"'), 4, "period", "not a duration"),
    (GOOD.replace('period = "1ms"', 'perod = "1ms"'), 4, "perod", "unknown key"),
    (GOOD.replace('idle = ["hlt", "poll"]', 'idle = "hlt"'), 9, "idle", "non-empty list"),
    (GOOD.replace('idle = ["hlt", "poll"]', 'idle = ["hlt", "nap"]'), 9, "idle",
     "invalid choice"),
    (GOOD.replace('"cpu:cpus=1"', '"cpu:speed=9"'), 10, "load", "no parameter 'speed'"),
    (GOOD.replace('icount = true', 'icount = "yes"'), 6, "icount", "true or false"),
    (GOOD + 'prio = [200]\n', 11, "prio", "1..99"),
    (GOOD.replace('[run]', '[run]\ndb = "x"'), 3, "db", "not allowed"),
    (GOOD.replace('[run]', 'colour = 1\n[run]'), 2, "colour", "unknown top-level key"),
])
def test_errors_name_line_and_key(tmp_path, bad, line, key, words):
    path = _write(tmp_path, bad)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}:{line}:"), msg
    assert repr(key) in msg and words in msg, msg


def test_toml_syntax_error_names_the_line(tmp_path):
    path = _write(tmp_path, GOOD.replace('period = "1ms"', 'period = 1ms'))
    with pytest.raises(ScenarioError, match="line 4"):
        load_scenario(path)


def test_cli_exits_2_on_a_malformed_file(tmp_path, db):
    path = _write(tmp_path, GOOD.replace('period = "1ms"', 'perod = "1ms"'))
    res = run_cli(["matrix", str(path)], db)
    assert res.code == 2 and f"{path}:4" in res.stderr and "'perod'" in res.stderr


def test_builtin_scenarios_load():
    from pathlib import Path
    files = sorted(Path(__file__).resolve().parents[3].joinpath("scenarios").glob("*.toml"))
    assert len(files) >= 3
    from irqlab.runner.xen import find_xen
    xen = find_xen("rtds", "amd64")
    rtds_here = xen is not None and "rtds" in (xen.schedulers() or ("rtds",))
    for f in files:
        assert f.read_text().startswith("# Mirrors seed")
        try:
            scn = load_scenario(f)
        except ScenarioError as exc:
            # The one refusal that depends on the host: Debian's Xen has no RTDS, and the
            # scenario is refused up front (before any cell runs) with the fix.
            assert not rtds_here and "build-xen-rtds.sh" in str(exc), exc
            continue
        assert scn.cells()


PAIRED = GOOD.replace('load = ["none", "cpu:cpus=1"]',
                      '"period+window" = [["1ms", "1s"], ["100us", "100ms"]]')


def test_paired_key_sweeps_pairs_not_their_cross_product(tmp_path):
    scn = load_scenario(_write(tmp_path, PAIRED))
    assert [cell_id(c) for c in scn.cells()] == [
        "idle=hlt,period=1ms,window=1s", "idle=hlt,period=100us,window=100ms",
        "idle=poll,period=1ms,window=1s", "idle=poll,period=100us,window=100ms"]
    argv = scn.argv(scn.cells()[1])
    assert argv[argv.index("--period") + 1] == "100us"
    assert argv[argv.index("--window") + 1] == "100ms"


@pytest.mark.parametrize("value, words", [
    ('[["1ms"]]', "list of 2 values, one per key (period, window)"),
    ('["1ms", "1s"]', "list of 2 values"),
    ('[["1ms", "1xs"]]', "not a duration"),
])
def test_paired_key_errors_name_the_paired_key(tmp_path, value, words):
    path = _write(tmp_path, GOOD.replace('load = ["none", "cpu:cpus=1"]',
                                         f'"period+window" = {value}'))
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}:10:"), msg
    assert "'period+window'" in msg and words in msg, msg


def test_paired_key_may_not_repeat_a_matrix_key(tmp_path):
    path = _write(tmp_path, PAIRED.replace('idle = ["hlt", "poll"]',
                                           'period = ["1ms"]'))
    with pytest.raises(ScenarioError, match="period is also in another matrix key"):
        load_scenario(path)


def _big(tmp_path, clash: bool = False):
    """10 x 10 x 11 = 1,100 cells (more than CHECK_CELLS_FIRST); with ``clash`` [run]
    sets priority, which does not apply to the guest target: every cell is invalid as a
    whole though each value is fine alone."""
    nums = ", ".join(str(i) for i in range(1, 11))
    thresholds = ", ".join(f'"{i}us"' for i in range(1, 12))
    run = "[run]\npriority = 5\n" if clash else ""
    return _write(tmp_path, f'name = "big"\n{run}[matrix]\nsamples = [{nums}]\n'
                            f'warmup = [{nums}]\nthreshold = [{thresholds}]\n')


def test_cells_are_counted_not_built(tmp_path):
    from irqlab.cli.scenario import CHECK_CELLS_FIRST, check_cell

    path = _big(tmp_path)
    with pytest.raises(ScenarioError, match=r"1,100 cells \(10 x 10 x 11\).*--max-cells 1100"):
        load_scenario(path, max_cells=1000)
    scn = load_scenario(path, max_cells=1100)
    assert scn.cell_count() == 1100 > CHECK_CELLS_FIRST
    first = next(scn.iter_cells())
    assert first == {"samples": 1, "warmup": 1, "threshold": "1us"}
    assert scn.cells()[-1] == {"samples": 10, "warmup": 10, "threshold": "11us"}
    # A matrix this large checks each cell at its run, and its first cell at once: a
    # clash in [run] is every cell's (issue 47: 120,000 cells of them ended in
    # "internal error: _ArgError").
    with pytest.raises(ScenarioError, match="cell samples=1,warmup=1,threshold=1us"):
        load_scenario(_big(tmp_path, clash=True), max_cells=1100)
    check_cell(scn, first)


def test_matrix_command_refuses_too_many_cells_at_once(tmp_path):
    path = _big(tmp_path)
    res = run_cli(["matrix", str(path)] + ["--max-cells", "1099"], tmp_path / "x.duckdb",
                  timeout=60)
    assert res.code == 2 and "1,100 cells" in res.stderr and "--max-cells 1100" in res.stderr
