"""`repeat = "auto"` in a scenario (and `matrix --repeat auto`): rounds of every cell,
interleaved, until each cell against the first is decided, at most max_repeat (issue
45). Real native runs (the host's own probe: no VM)."""

import pytest

from tests.conftest import call_cli, run_cli


@pytest.fixture(scope="module")
def native_built():
    import subprocess

    from irqlab.runner.native import NATIVE_PROBE
    if not NATIVE_PROBE.exists():
        subprocess.run(["make", "-s", "-C", str(NATIVE_PROBE.parents[1])], check=True)


SCN = ('name = "auto"\n[run]\ntarget = "native"\ncpus = "0"\nrt-fallback = true\n'
       'samples = 200\nwindow = "1s"\nrepeat = "auto"\nmax_repeat = {max}\n'
       '[matrix]\nperiod = ["100us", "5ms"]\n')


@pytest.mark.slow
def test_repeat_auto_stops_at_a_verdict_or_its_cap(tmp_path, native_built):
    scn = tmp_path / "auto.toml"
    scn.write_text(SCN.format(max=4))
    db = tmp_path / "m.duckdb"
    plan = call_cli(["matrix", str(scn), "--dry-run"], db)
    assert plan.code == 0 and "x up to 4 runs (repeat auto)" in plan.stdout, plan.stdout
    res = run_cli(["matrix", str(scn)], db)
    assert res.code in (0, 1), res.stderr
    text = res.stdout + res.stderr
    assert "repeat auto: " in text, text
    runs = call_cli(["list", "--json"], db).lines
    per_cell = len(runs) // 2
    assert len(runs) % 2 == 0 and 3 <= per_cell <= 4, len(runs)
    if per_cell < 4:
        assert "every quantile decided" in text
    else:
        assert "stopped at --max-repeat 4" in text or "every quantile decided" in text


@pytest.mark.parametrize("body, words", [
    ('[run]\ntarget = "native"\nrepeat = "auto"\n[matrix]\ncpus = ["0"]\n', "two or more"),
    ('[run]\ntarget = "native"\nrepeat = "auto"\nmax_repeat = 2\n[matrix]\n'
     'cpus = ["0", "1"]\n', "too few for repeat auto"),
])
def test_repeat_auto_refusals(tmp_path, body, words):
    scn = tmp_path / "bad.toml"
    scn.write_text('name = "bad"\n' + body)
    res = call_cli(["matrix", str(scn), "--dry-run"], tmp_path / "x.duckdb")
    assert res.code == 2 and words in res.stderr and "Traceback" not in res.stderr
